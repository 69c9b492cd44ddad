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


@pytest.mark.parametrize("reply", [
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    "OOM command not allowed when used memory > 'maxmemory'.",
    "READONLY You can't write against a read only replica.",
    "NOREPLICAS Not enough good replicas to write.",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
])
def test_a_redis_refusing_every_writer_for_now_is_the_stores_failure_never_the_commands(reply) -> None:
    """Each error reply, parsed as redis-py parses it off the wire, alone and as a pipeline reports it, is a
    refusal to write for now: the engine neither counts it as a command's attempt nor steps aside for it,
    and the gateway answers 503."""
    from redis._parsers.base import BaseParser  # noqa: PLC0415
    from redis.asyncio.client import Pipeline  # noqa: PLC0415

    from almanac.services.redis_client import refuses_writes  # noqa: PLC0415

    assert refuses_writes(BaseParser.parse_error(reply))
    in_pipeline = BaseParser.parse_error(reply)
    Pipeline.annotate_exception(None, in_pipeline, 1, ["EVALSHA", "sha", "1", "key"])  # type: ignore[arg-type]
    assert "of pipeline caused error" in str(in_pipeline) and refuses_writes(in_pipeline)


def test_errors_of_the_command_or_of_this_client_are_not_refusals_to_write() -> None:
    from redis._parsers.base import BaseParser  # noqa: PLC0415
    from redis.asyncio.client import Pipeline  # noqa: PLC0415

    from almanac.services.redis_client import refuses_writes  # noqa: PLC0415

    for reply in ("BUSYGROUP Consumer Group name already exists", "NOPERM this user has no permissions",
                  "WRONGTYPE Operation against a key holding the wrong kind of value", "ERR unknown command"):
        error = BaseParser.parse_error(reply)
        assert not refuses_writes(error), reply
        Pipeline.annotate_exception(None, error, 2, ["XADD", "stream"])  # type: ignore[arg-type]
        assert not refuses_writes(error), reply
    # A command whose own arguments look like a refusal: only the reply, after the last marker, counts.
    error = BaseParser.parse_error("WRONGTYPE Operation against a key holding the wrong kind of value")
    Pipeline.annotate_exception(None, error, 1, ["SET", "k", " of pipeline caused error: BUSY x"])  # type: ignore[arg-type]
    assert not refuses_writes(error)
