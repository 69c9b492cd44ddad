"""A client made with ``reconnecting()`` rides out a Redis restart; a plain one reports the failure."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis.exceptions

from almanac.services.embedded_redis import EmbeddedRedis, free_port
from almanac.services.redis_client import connect, reconnecting


async def restart_after(server: EmbeddedRedis, pause_s: float) -> None:
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(pause_s)
    await asyncio.to_thread(server.start)


async def test_a_reconnecting_client_answers_across_a_restart_and_a_plain_one_fails(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, port=free_port(), persist=True).start()
    steady = connect(server.url, **reconnecting(retries=6, base_s=0.05, cap_s=0.5))
    plain = connect(server.url)
    try:
        await steady.set("k", "kept")
        assert await plain.get("k") == b"kept"
        # Given Redis goes away for 300 ms (and comes back with its data, AOF)
        restart = asyncio.create_task(restart_after(server, 0.3))
        await asyncio.sleep(0.1)
        with pytest.raises(redis.exceptions.ConnectionError):
            await plain.get("k")  # a plain client reports it to its caller
        # then the reconnecting client's command waits it out with backoff and is answered
        assert await steady.get("k") == b"kept"
        await restart
    finally:
        await steady.aclose()
        await plain.aclose()
        server.stop()
