"""A client with a socket timeout sends without a task per command, and a send Redis does not take still times out."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
import redis.exceptions

from almanac.services.embedded_redis import EmbeddedRedis, free_port
from almanac.services.redis_client import connect


async def test_a_timed_client_answers_its_commands_without_a_task_for_each_send(redis_url: str) -> None:
    """Given a client with a socket timeout (as the gateway's and its engine's are), when it sends 200 commands one
    after another, then each is answered and no task was made for any of them (redis-py's asyncio.wait_for made one
    a send: 17-21% of the deciding gateway's samples under bench e2e)."""
    client = connect(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    loop = asyncio.get_running_loop()
    made: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro, **kwargs):  # noqa: ANN001, ANN202 - the loop's signature
        made.append(coro)
        return factory(loop, coro, **kwargs) if factory else asyncio.Task(coro, loop=loop, **kwargs)

    try:
        await client.ping()  # connected before counting
        loop.set_task_factory(counting)
        for n in range(200):
            assert await client.set(f"timed-send:{n}", n)
        loop.set_task_factory(factory)
        assert made == []
        assert await client.get("timed-send:199") == b"199"
    finally:
        loop.set_task_factory(factory)
        await client.aclose()


async def test_a_send_a_stopped_redis_does_not_take_times_out_and_the_next_command_is_answered(tmp_path: Path) -> None:
    """Given a client with a 0.5 s socket timeout and a Redis that stops reading (SIGSTOP), when it sends more than the
    sockets' buffers hold, then the send fails with redis-py's TimeoutError within about the timeout (the drain is
    waited for under it), and once Redis runs again the client's next command is answered on a new connection."""
    server = EmbeddedRedis(tmp_path, port=free_port()).start()
    client = connect(server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        await client.ping()
        big = b"x" * 32_000_000  # more than localhost's socket buffers hold
        server.process.send_signal(signal.SIGSTOP)
        started = asyncio.get_running_loop().time()
        with pytest.raises(redis.exceptions.TimeoutError):
            await client.set("big", big)
        assert asyncio.get_running_loop().time() - started < 10  # not waiting for Redis: about the timeout
        server.process.send_signal(signal.SIGCONT)
        assert await client.set("small", "1")
        assert await client.get("small") == b"1"
    finally:
        server.process.send_signal(signal.SIGCONT)
        await client.aclose()
        server.stop()
