"""A single Redis that forgot its scripts (SCRIPT FLUSH, or a restart) still runs every script the store, projector, archiver, seat keys and trimmer call by SHA: redis-py's registered Script loads it again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.services.embedded_redis import EmbeddedRedis, free_port
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage import archive_index, seat_keys
from almanac.storage.archive import archive_room
from almanac.storage.retention import StreamTrimmer

Forget = Callable[[], Awaitable[None]]


@pytest.fixture(params=["script flush", "restart"])
async def forgetful(request, redis_url, tmp_path) -> AsyncIterator[tuple[object, Forget]]:
    """A process's normal client (``connect``) on an empty Redis, and how that Redis forgets every script."""
    if request.param == "script flush":
        client = connect(redis_url)
        await client.flushdb()

        async def flush() -> None:
            await client.script_flush()

        yield client, flush
        await client.aclose()
        return
    server = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=True).start()  # the data survives (AOF)
    client = connect(server.url)

    async def restart() -> None:
        server.stop()
        server.start()
        # The connections the old server closed are dropped, as a process's first failed command drops its own
        # (told apart from a script's NOSCRIPT elsewhere): here only what the restarted server forgot is at stake.
        await client.connection_pool.disconnect()

    try:
        yield client, restart
    finally:
        await client.aclose()
        server.stop()


async def knows(client, *scripts) -> bool:
    """Whether the server has every one of ``scripts`` cached: after a forget, only a script run since."""
    return all(await client.script_exists(*(script.sha for script in scripts)))


async def test_every_script_called_by_sha_runs_again_on_a_redis_that_forgot_it(forgetful, tmp_path) -> None:
    client, forget = forgetful
    store = archiving_store(client, file_archive_url(tmp_path / "archive"))
    keys = store.keys
    done, idle = "forgot-done", "forgot-idle"

    # Each step runs right after Redis forgot every script, and must run its scripts all the same.
    # The store's writes (EVALSHA in its pipeline, then the reload and the refused calls sent again)
    await forget()
    service = RoomService(store)
    for step, (player, body) in enumerate([("alice", {"kind": "create_room", "ruleset": "claim",
                                                      "options": {"block": "North Forty"}}),
                                           ("alice", {"kind": "join_room"}), ("alice", {"kind": "end_room"})]):
        outcome = await service.handle(CommandRecord(command_id=f"{done}-c{step}", room=done, player=player,
                                                     server_time_ms=1_000 + step, body=body))
        assert outcome.accepted, outcome.error
    table = RealmTable(store, idle)
    await forget()
    await table.create("realm@1")
    await table.mine("alice")

    # The projector's commit and its feed trim
    await forget()
    projector = Projector(client, store.shard_count, store=store)
    await projector.drain()
    assert await knows(client, projector._commit_script)
    await forget()
    await projector.trim_feeds()
    assert await knows(client, projector._trimmer._feed)

    # The archiver: a first-layout pointer moved, a finished and an idle room moved, the finished one's rows compacted
    await forget()
    await client.hset(keys.first_layout_pointers(0), "forgot-legacy", b"p")
    assert await archive_index.migrate_pointers(client, keys) == 1
    await forget()
    assert (await archive_room(store, done)).status == "archived"
    assert await knows(client, store._record_pointer, store._delete_room)
    await forget()
    assert (await archive_room(store, idle, reason="idle")).status == "archived"
    assert await knows(client, store._record_idle_pointer)
    await forget()
    assert await archive_index.compact(store, [done]) == 1
    assert await knows(client, store._compact_index, store._compact_models)

    # A fresh reader's load (the script that answers the pointer), then the idle room brought back by its next command
    await forget()
    reader = archiving_store(client, file_archive_url(tmp_path / "archive"))
    _, tail = await reader.snapshot_and_tail(done)
    assert tail
    assert await knows(client, reader._load_or_pointer)
    await forget()
    await table.mine("bob")
    assert await store.pointer(idle) is None and await knows(client, store._restore_script)
    # and moved again: the object its trip back left behind is forgotten
    await forget()
    assert (await archive_room(store, idle, reason="idle")).status == "archived"
    assert await knows(client, store._forget_superseded)

    # A seat key granted, and a command stream trimmed
    await forget()
    granted = await seat_keys.grant(client, keys, done, "alice")
    assert await seat_keys.opens(client, keys, done, "alice", granted)
    await forget()
    trimmer = StreamTrimmer(client, retain_ms=0)
    await trimmer.trim_commands(keys.command_stream(0))
    assert await knows(client, trimmer._commands)
