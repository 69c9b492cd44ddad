"""The gateway's pipelined connection: many commands on one connection, each answered with its own reply or error."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
    ResponseError,
    TimeoutError as RedisTimeoutError,
)

from almanac.events import codec
from almanac.services import bus
from almanac.services.gateway.pipelined_connection import PipelinedConnection
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys

KEYS = Keys(16)


def _record(index: int) -> CommandRecord:
    return CommandRecord(command_id=f"line-{index}", room=f"line-room-{index % 7}", player="p",
                         server_time_ms=1_000 + index, body={"kind": "join_room"})


async def _blocked_line(redis_client: aioredis.Redis, line: PipelinedConnection) -> tuple[asyncio.Task, asyncio.Task]:
    """A BLPOP that holds the line's connection for seconds, and a PING queued behind it."""
    blocking = asyncio.create_task(line.call("BLPOP", "nothing-comes", 3))
    for _ in range(100):
        if "cmd=blpop" in (await redis_client.execute_command("CLIENT", "LIST")).decode():
            break
        await asyncio.sleep(0.01)
    behind = asyncio.create_task(line.call("PING"))
    await asyncio.sleep(0.05)
    assert not blocking.done() and not behind.done()
    return blocking, behind


async def test_submits_sent_together_are_each_answered_with_their_own_entry(redis_client) -> None:
    """Given one line, when 300 rate-limited submits are in flight at once, then each returns the id of the
    stream entry holding its own record, and every one of them was appended once."""
    line = PipelinedConnection(redis_client, timeout_s=5)
    records = [_record(index) for index in range(300)]
    limit = bus.RateLimit(key=KEYS.seat_rate(records[0].room, "t"), amount=10_000, window_ms=60_000)
    try:
        ids = await asyncio.gather(*(bus.submit(redis_client, KEYS, record, limit, reply="alm:reply:x", call=line.call)
                                     for record in records))
    finally:
        await line.close()
    # Entry ids are per stream: a record is named by its shard's stream and its id there.
    streams = [KEYS.command_stream(KEYS.shard(record.room)) for record in records]
    assert len(set(zip(streams, ids, strict=True))) == len(records)
    appended = {(stream, entry_id): fields[bus.COMMAND_FIELD.encode()] for stream in set(streams)
                for entry_id, fields in await redis_client.xrange(stream)}
    assert len(appended) == len(records)
    assert [appended[stream, entry_id] for stream, entry_id in zip(streams, ids, strict=True)] == [
        codec.encode(record) for record in records]


async def test_an_error_reply_answers_its_own_call_and_no_other(redis_client) -> None:
    """Given calls in flight together, one of which Redis refuses, then that one raises Redis's error and
    the others get their own replies; and after Redis forgets the submit script, a submit still goes in."""
    await redis_client.set("a-string", "x")
    line = PipelinedConnection(redis_client, timeout_s=5)
    try:
        first, refused, last = await asyncio.gather(line.call("INCR", "counter"), line.call("LPUSH", "a-string", "y"),
                                                    line.call("INCR", "counter"), return_exceptions=True)
        assert (first, last) == (1, 2)
        assert isinstance(refused, ResponseError) and "WRONGTYPE" in str(refused)

        await redis_client.script_flush()
        limit = bus.RateLimit(key=KEYS.seat_rate("line-room-0", "t"), amount=10, window_ms=60_000)
        entry_id = await bus.submit(redis_client, KEYS, _record(0), limit, call=line.call)  # NOSCRIPT, then EVAL
        assert await redis_client.xrange(KEYS.command_stream(KEYS.shard("line-room-0")), entry_id, entry_id)
    finally:
        await line.close()


async def test_a_lost_connection_fails_every_call_in_flight_and_the_next_call_connects_again(redis_client) -> None:
    """Given a call holding the line (a blocking read) and another behind it, when Redis drops the connection,
    then both raise a connection error at once, and the next call is answered on a new connection."""
    line = PipelinedConnection(redis_client, timeout_s=30)
    try:
        own = await line.call("CLIENT", "ID")
        blocking, behind = await _blocked_line(redis_client, line)
        await redis_client.execute_command("CLIENT", "KILL", "ID", own)
        for call in (blocking, behind):
            with pytest.raises(RedisConnectionError):
                await asyncio.wait_for(call, 2)
        assert await line.call("PING") == b"PONG"
    finally:
        await line.close()


async def test_a_silent_redis_times_the_calls_out_and_its_late_reply_answers_nothing(redis_client) -> None:
    """Given a call Redis does not answer for 3 s and another behind it, on a line with a 1 s timeout, then
    both raise a timeout within about that time, and the next call gets its own reply, not the late one's."""
    line = PipelinedConnection(redis_client, timeout_s=1)
    try:
        started = time.monotonic()
        blocking, behind = await _blocked_line(redis_client, line)
        for call in (blocking, behind):
            with pytest.raises(RedisTimeoutError):
                await asyncio.wait_for(call, 2.5)
        assert time.monotonic() - started < 2.5
        assert await line.call("ECHO", "mine") == b"mine"
        await redis_client.rpush("nothing-comes", "late")  # the dropped BLPOP is gone: nobody takes it
        await asyncio.sleep(0.1)
        assert await line.call("LLEN", "nothing-comes") == 1
    finally:
        await line.close()


async def test_a_closed_line_refuses_calls(redis_client) -> None:
    line = PipelinedConnection(redis_client, timeout_s=5)
    assert await line.call("PING") == b"PONG"
    await line.close()
    with pytest.raises(RedisConnectionError):
        await line.call("PING")


async def test_callers_that_leave_keep_their_turn_so_every_other_reply_reaches_its_own_call(redis_client) -> None:
    """Given 90 calls in flight, when every third caller leaves (its request cancelled) before Redis answers,
    then each remaining call gets exactly its own reply."""
    line = PipelinedConnection(redis_client, timeout_s=5)
    try:
        await line.call("PING")  # connected: the calls below are all written at once
        calls = [asyncio.ensure_future(line.call("ECHO", f"reply-{index}")) for index in range(90)]
        await asyncio.sleep(0)  # every call written, no reply read yet
        for call in calls[::3]:
            call.cancel()
        answers = await asyncio.gather(*calls, return_exceptions=True)
        for index, answer in enumerate(answers):
            if index % 3 == 0:
                assert isinstance(answer, asyncio.CancelledError)
            else:
                assert answer == f"reply-{index}".encode()
        assert await line.call("ECHO", "after") == b"after"
    finally:
        await line.close()


async def test_a_line_closed_while_connecting_keeps_no_connection(redis_client, redis_url) -> None:
    """Given a line connecting to a Redis that answers nothing yet (its handshake waits), when the line is
    closed meanwhile, then the call fails with a connection error once the connect completes, and the line
    holds no connection and refuses further calls."""
    pauser = aioredis.Redis.from_url(redis_url)
    # A database other than 0: the connect's handshake sends SELECT, which waits out the pause.
    client = aioredis.Redis.from_url(urlunsplit(urlsplit(redis_url)._replace(path="/15")))
    line = PipelinedConnection(client, timeout_s=5)
    try:
        await pauser.execute_command("CLIENT", "PAUSE", 400, "ALL")
        call = asyncio.ensure_future(line.call("PING"))
        await asyncio.sleep(0.1)
        assert not call.done()
        await line.close()
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(call, 3)
        assert line._connection is None and line._reader_task is None  # noqa: SLF001
        with pytest.raises(RedisConnectionError):
            await line.call("PING")
    finally:
        await client.aclose()
        await pauser.aclose()


async def test_the_calls_of_one_loop_turn_go_out_in_one_socket_write_each_answered_its_own(redis_client) -> None:
    """Given a connected line, when 200 requests reach their submit in the same turn of the event loop (as the
    requests of one poll of their sockets do), then the line writes them to Redis in ONE socket write (a write
    is a syscall that wakes Redis: the submit's largest cost), and each call still gets its own reply."""
    line = PipelinedConnection(redis_client, timeout_s=5)
    try:
        await line.call("PING")
        writer = line._connection._writer  # noqa: SLF001 - the socket's writer, observed, still writing
        writes: list[int] = []
        write = writer.write

        def counted(data: bytes) -> None:
            writes.append(len(data))
            write(data)

        writer.write = counted
        calls = [asyncio.ensure_future(line.call("ECHO", f"turn-{index}")) for index in range(200)]
        answers = await asyncio.gather(*calls)
        assert answers == [f"turn-{index}".encode() for index in range(200)]
        assert len(writes) == 1

        # A call of a later turn goes in a write of its own, after the first turn's replies.
        assert await line.call("ECHO", "later") == b"later"
        assert len(writes) == 2
    finally:
        await line.close()


async def test_calls_whose_turn_finds_the_socket_closed_all_fail_and_the_call_behind_them_connects_again(
        redis_client) -> None:
    """Given calls made in one turn, when the line's socket is closed before the turn's write and another call comes
    in right behind them (requests keep arriving), then every call of the closed turn fails with a connection error
    (none waits for a reply that cannot come, none is answered another's reply), and the call behind them is
    answered on a new connection: the failed write ends the dead connection at once, so no call made after it is
    queued on the dead socket to fail later, when the reader sees the close (a turn later; longer where the close
    waits for unsent bytes)."""
    line = PipelinedConnection(redis_client, timeout_s=5)
    try:
        await line.call("PING")
        calls = [asyncio.ensure_future(line.call("ECHO", f"lost-{index}")) for index in range(5)]
        await asyncio.sleep(0)  # the calls are queued for the turn's write
        line._connection._writer.transport.abort()  # noqa: SLF001 - the socket dies before the write
        # Its first step runs in the next turn just after the failed write, before the reader has seen the close.
        behind = asyncio.ensure_future(line.call("ECHO", "behind"))
        answers = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 3)
        assert all(isinstance(answer, RedisConnectionError) for answer in answers)
        assert await asyncio.wait_for(behind, 3) == b"behind"
        assert await asyncio.wait_for(line.call("ECHO", "again"), 3) == b"again"
    finally:
        await line.close()


async def test_commands_sent_together_are_answered_in_order_and_an_error_among_them_raises_after_every_reply(
        redis_client) -> None:
    """Given a line, when three commands go as one (``call_many``: the clock's look), then they go in one write and
    come back as their raw replies in order; when one of them is refused, then the others still took effect, the
    refusal raises Redis's error, and the line answers the next call its own reply."""
    await redis_client.set("a-string", "x")
    line = PipelinedConnection(redis_client, timeout_s=5)
    try:
        await line.call("PING")  # connected
        writes = line.writes
        assert await line.call_many([("INCR", "many"), ("ECHO", "two"), ("INCR", "many")]) == [1, b"two", 2]
        assert line.writes == writes + 1
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await line.call_many([("INCR", "many"), ("LPUSH", "a-string", "y"), ("INCR", "many")])
        assert await redis_client.get("many") == b"4"
        assert await line.call("ECHO", "mine") == b"mine"
    finally:
        await line.close()
