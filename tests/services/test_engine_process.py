"""The engine as real processes on a real Redis: games, kill -9, standby takeover, duplicates, poison commands."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from engine_process_helper import register_test_rulesets
from engine_test_support import (
    KEYS,
    EngineProcess,
    engine_metrics,
    heartbeat,
    held_shards,
    record,
    send,
    send_nowait,
    wait_for,
)

from almanac.events import codec, room as room_rules
from almanac.events.envelope import GENESIS_HASH
from almanac.events.hashing import envelope_hash, state_hash
from almanac.events.step import replay
from almanac.services.bus import COMMAND_FIELD, submit
from almanac.services.engine.lease import lease_key
from almanac.services.engine.shard_engine import GROUP
from almanac.services.room_service import RoomService
from almanac.storage.keys import engines_key
from almanac.storage.redis_store import RedisEventStore

register_test_rulesets()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALL_SHARDS = list(range(16))


@pytest.fixture
def engines(redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Callable[..., EngineProcess]]:
    started: list[EngineProcess] = []

    def start(name: str, **env: str) -> EngineProcess:
        process = EngineProcess(redis_url, name, tmp_path, **env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def fold(envelopes) -> room_rules.RoomState | None:
    return replay(envelopes)


async def assert_log_consistent(store: RedisEventStore, room: str) -> room_rules.RoomState:
    """The chain links, and the state loaded the engine's way (snapshot + tail) equals a plain fold."""
    envelopes = await store.read(room)
    previous = GENESIS_HASH
    for envelope in envelopes:
        assert envelope.previous_hash == previous and envelope_hash(envelope) == envelope.hash
        previous = envelope.hash
    folded = fold(envelopes)
    loaded, last_hash = await RoomService(store).load(room)
    assert folded is not None and state_hash(loaded) == state_hash(folded) and last_hash == previous
    return folded


async def test_a_counter_game_through_the_engine_equals_the_fold_of_its_log(redis_client, engines) -> None:
    engines("e1", ALMANAC_SNAPSHOT_EVERY="4")
    await wait_for(lambda: held_shards(redis_client, "e1"), what="the engine's leases")
    created = await send(redis_client, "g1", "ann",
                         {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["ann", "bob"]}}, "create")
    assert created.accepted and (created.first_version, created.last_version) == (1, 1)
    outcomes = [created]
    for player, body, command_id in [
        ("ann", {"kind": "join_room"}, "join-ann"),
        ("bob", {"kind": "join_room"}, "join-bob"),
        ("carol", {"kind": "join_room"}, "join-carol"),  # refused: no seat
        ("ann", {"kind": "add", "amount": 5}, "add-1"),
        ("bob", {"kind": "add", "amount": 0}, "add-0"),  # refused: amount
        ("bob", {"kind": "roll", "dice": 3}, "roll-1"),
        ("ann", {"kind": "add", "amount": 7}, "add-2"),
        ("ann", {"kind": "end_room", "reason": "done"}, "end"),
    ]:
        outcomes.append(await send(redis_client, "g1", player, body, command_id))
    refused = {o.command_id: o.error["code"] for o in outcomes if not o.accepted}
    assert refused == {"join-carol": "no_seat", "add-0": "counter.amount_not_positive"}

    store = RedisEventStore(redis_client)
    state = await assert_log_consistent(store, "g1")
    stored = await store.read("g1")
    assert [e.hash for o in outcomes for e in o.envelopes] == [e.hash for e in stored]
    assert state.game.total == 12 and state.ended and state.players == ("ann", "bob")
    # The seed revealed at the end is the one committed to at creation.
    assert hashlib.sha256(bytes.fromhex(state.revealed_seed)).hexdigest() == state.seed_commitment
    assert len(await store.rejections("g1")) == 2 and len(await store.commands("g1")) == 7
    assert await store.latest_snapshot("g1") is not None

    metrics = await wait_for(lambda: engine_metrics(redis_client, "e1"), what="metrics")
    metrics = await wait_for(
        lambda: _when(engine_metrics(redis_client, "e1"), lambda m: m.get("commands") == 9), what="9 commands"
    )
    assert metrics["accepted"] == 7 and metrics["rejected"] == 2 and metrics["latency_count"] == 9
    assert metrics["latency_le_10000"] == 9
    beat = await heartbeat(redis_client, "e1")
    assert beat["shards_held"] == ALL_SHARDS and await redis_client.sismember(engines_key(), "e1")


async def _when(value_awaitable, predicate):
    value = await value_awaitable
    return value if predicate(value) else None


def _scenario(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return lines[0], lines[1:]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.jsonl")))
async def test_each_example_scenario_plays_through_the_engine(redis_client, engines, example: str) -> None:
    header, moves = _scenario(EXAMPLES / example)
    engines("ex")
    await wait_for(lambda: held_shards(redis_client, "ex"), what="the engine's leases")
    room = f"engine-{header['room']}"
    created = await send(redis_client, room, header["player"], {
        "kind": "create_room", "ruleset": header["ruleset"], "options": header.get("options", {}),
        "challenge": header.get("challenge"),
    }, "create", time_ms=header["time_ms"])
    assert created.accepted, created.error
    for index, move in enumerate(moves):
        await send_nowait(redis_client, room, move["player"], move["command"], f"move-{index}", move["time_ms"])
    last = await send(redis_client, room, header["player"], {"kind": "join_room"}, "probe", timeout_s=30,
                      time_ms=moves[-1]["time_ms"])
    assert last.command_id == "probe"
    store = RedisEventStore(redis_client)
    outcomes = [await store.outcome(room, f"move-{index}") for index in range(len(moves))]
    assert all(outcomes)
    state = await assert_log_consistent(store, room)
    # The server draws its own seed, so dice-dependent moves may be refused; most of the script plays.
    accepted = sum(1 for o in outcomes if o.accepted)
    assert state.ruleset == header["ruleset"] and accepted > len(moves) // 2
    assert state.version == 1 + sum(o.last_version - o.first_version + 1 for o in outcomes if o.accepted)


async def test_kill_9_while_holding_unacknowledged_commands_then_restart_applies_each_exactly_once(
    redis_client, engines
) -> None:
    first = engines("k")
    await wait_for(lambda: held_shards(redis_client, "k"), what="the engine's leases")
    await send(redis_client, "k1", "ann", {"kind": "create_room", "ruleset": "fragile"}, "create-k1")
    await send(redis_client, "k1", "ann", {"kind": "join_room"}, "join-k1")
    await send(redis_client, "k2", "bob", {"kind": "create_room", "ruleset": "counter"}, "create-k2")
    await send(redis_client, "k2", "bob", {"kind": "join_room"}, "join-k2")
    for index in range(100):
        await send_nowait(redis_client, "k1", "ann", {"kind": "add", "amount": 1}, f"k1-a-{index}")
    # A second inside decide: the engine holds its batch read but unacknowledged meanwhile.
    slow_id = await submit(redis_client, KEYS, record("k1", "ann", {"kind": "add", "amount": 99}, "k1-slow"))
    for index in range(100):
        await send_nowait(redis_client, "k1", "ann", {"kind": "add", "amount": 1}, f"k1-b-{index}")
        await send_nowait(redis_client, "k2", "bob", {"kind": "add", "amount": 2}, f"k2-{index}")
    stream = KEYS.command_stream(KEYS.shard("k1"))

    async def slow_command_in_hand() -> bool:
        in_hand = await redis_client.xpending_range(stream, GROUP, min=slow_id, max=slow_id, count=1)
        return bool(in_hand) and await RedisEventStore(redis_client).outcome("k1", "k1-slow") is None

    await wait_for(slow_command_in_hand, what="the engine to hold the slow command")
    first.kill()
    assert (await redis_client.xpending(stream, GROUP))["pending"] > 0

    engines("k")  # the same stable name, a new process: it waits for the lapsed lease, then drains
    store = RedisEventStore(redis_client)
    await wait_for(lambda: store.outcome("k1", "k1-b-99"), timeout_s=20, what="k1 to finish")
    await wait_for(lambda: store.outcome("k2", "k2-99"), timeout_s=20, what="k2 to finish")
    k1 = await assert_log_consistent(store, "k1")
    k2 = await assert_log_consistent(store, "k2")
    assert k1.game.total == 200 + 99 and k2.game.total == 200
    for room, expected in (("k1", 203), ("k2", 102)):
        command_ids = [codec.decode(r)["command_id"] for _, r in await store.commands(room)]
        assert len(command_ids) == len(set(command_ids)) == expected
    for shard in {KEYS.shard("k1"), KEYS.shard("k2")}:
        assert (await redis_client.xpending(KEYS.command_stream(shard), GROUP))["pending"] == 0


async def test_a_standby_engine_waits_and_takes_over_when_the_active_one_is_killed(redis_client, engines) -> None:
    active = engines("a")
    await wait_for(lambda: _when(held_shards(redis_client, "a"), lambda h: h == ALL_SHARDS), what="a's leases")
    engines("b")
    await wait_for(lambda: heartbeat(redis_client, "b"), what="b's heartbeat")
    assert await held_shards(redis_client, "b") == []
    await send(redis_client, "s1", "ann", {"kind": "create_room", "ruleset": "counter"}, "create")
    await send(redis_client, "s1", "ann", {"kind": "join_room"}, "join")
    for index in range(20):
        assert (await send(redis_client, "s1", "ann", {"kind": "add", "amount": 1}, f"a-{index}")).accepted
    holder = await redis_client.get(lease_key(KEYS.shard("s1")))
    assert holder.decode().startswith("a|")
    assert (await engine_metrics(redis_client, "b")).get("commands", 0) == 0

    active.kill()
    await wait_for(lambda: _when(held_shards(redis_client, "b"), lambda h: h == ALL_SHARDS), timeout_s=10,
                   what="b to take every shard")
    for index in range(20):
        assert (await send(redis_client, "s1", "ann", {"kind": "add", "amount": 1}, f"b-{index}")).accepted
    assert (await redis_client.get(lease_key(KEYS.shard("s1")))).decode().startswith("b|")
    metrics_b = await wait_for(lambda: _when(engine_metrics(redis_client, "b"), lambda m: m.get("commands") == 20),
                               what="b's counters")
    assert metrics_b["accepted"] == 20
    state = await assert_log_consistent(RedisEventStore(redis_client), "s1")
    assert state.game.total == 40 and state.version == 42


async def test_a_graceful_stop_finishes_the_command_in_hand_and_hands_the_leases_over(redis_client, engines) -> None:
    active = engines("g-a", ALMANAC_LEASE_MS="10000")
    await wait_for(lambda: _when(held_shards(redis_client, "g-a"), lambda h: h == ALL_SHARDS), what="leases")
    engines("g-b", ALMANAC_LEASE_MS="10000")
    await wait_for(lambda: heartbeat(redis_client, "g-b"), what="the standby's heartbeat")
    await send(redis_client, "f1", "ann", {"kind": "create_room", "ruleset": "fragile"}, "create")
    await send(redis_client, "f1", "ann", {"kind": "join_room"}, "join")
    await send_nowait(redis_client, "f1", "ann", {"kind": "add", "amount": 99}, "slow")


    await asyncio.sleep(0.4)  # inside the slow decision
    assert active.terminate() == 0
    store = RedisEventStore(redis_client)
    slow = await store.outcome("f1", "slow")
    assert slow is not None and slow.accepted and slow.first_version == 3
    # Released, not lapsed: the standby holds every shard long before the 10 s lease would run out.
    await wait_for(lambda: _when(held_shards(redis_client, "g-b"), lambda h: h == ALL_SHARDS), timeout_s=4,
                   what="the standby to take over")
    assert (await send(redis_client, "f1", "ann", {"kind": "add", "amount": 1}, "after")).last_version == 4


async def test_the_same_command_twice_has_one_effect(redis_client, engines) -> None:
    engines("d")
    await wait_for(lambda: held_shards(redis_client, "d"), what="leases")
    await send(redis_client, "d1", "ann", {"kind": "create_room", "ruleset": "counter"}, "create")
    await send(redis_client, "d1", "ann", {"kind": "join_room"}, "join")
    first = await send(redis_client, "d1", "ann", {"kind": "add", "amount": 3}, "once")
    again = await send(redis_client, "d1", "ann", {"kind": "add", "amount": 3}, "once")
    assert first.accepted and not first.duplicate and again.duplicate
    assert (again.first_version, again.last_version) == (first.first_version, first.last_version) == (3, 3)
    assert [e.hash for e in again.envelopes] == [e.hash for e in first.envelopes]
    # Twice in one batch, and a refused command twice.
    await send_nowait(redis_client, "d1", "ann", {"kind": "add", "amount": 4}, "twin")
    await send_nowait(redis_client, "d1", "ann", {"kind": "add", "amount": 4}, "twin")
    refused = await send(redis_client, "d1", "ann", {"kind": "add", "amount": -1}, "bad")
    refused_again = await send(redis_client, "d1", "ann", {"kind": "add", "amount": -1}, "bad")
    assert not refused.duplicate and refused_again.duplicate and refused_again.error == refused.error
    store = RedisEventStore(redis_client)
    state = await assert_log_consistent(store, "d1")
    assert state.game.total == 7 and state.version == 4
    assert len(await store.rejections("d1")) == 1


async def test_a_poison_command_goes_to_the_dead_letter_stream_and_the_shard_keeps_moving(
    redis_client, engines
) -> None:
    engines("p", ALMANAC_MAX_ATTEMPTS="3")
    await wait_for(lambda: held_shards(redis_client, "p"), what="leases")
    await send(redis_client, "p1", "ann", {"kind": "create_room", "ruleset": "fragile"}, "create")
    await send(redis_client, "p1", "ann", {"kind": "join_room"}, "join")
    poisoned = await send(redis_client, "p1", "ann", {"kind": "add", "amount": 13}, "poison")
    assert not poisoned.accepted and poisoned.error["code"] == "engine.dead_letter"
    shard = KEYS.shard("p1")
    await redis_client.xadd(KEYS.command_stream(shard), {COMMAND_FIELD: b"\xc1 not msgpack"})
    assert (await send(redis_client, "p1", "ann", {"kind": "add", "amount": 1}, "after")).last_version == 3

    letters = await wait_for(lambda: _when(redis_client.xrange(KEYS.dead_letters(shard)), lambda x: len(x) == 2),
                             what="two dead letters")
    first, second = (fields for _, fields in letters)
    assert first[b"command_id"] == b"poison" and first[b"attempts"] == b"3"
    assert first[b"reason"].startswith(b"ZeroDivisionError: thirteen is unlucky")
    assert second[b"room"] == b"" and second[b"data"] == b"\xc1 not msgpack"
    assert (await redis_client.xpending(KEYS.command_stream(shard), GROUP))["pending"] == 0
    metrics = await wait_for(lambda: _when(engine_metrics(redis_client, "p"), lambda m: m.get("dead_letters") == 2),
                             what="dead-letter counter")
    assert metrics["failures"] == 6
    state = await assert_log_consistent(RedisEventStore(redis_client), "p1")
    assert state.game.total == 1


def _burst(rooms: list[str]) -> list:
    """Every room's commands, interleaved room by room: joins, additions, refusals that depend on the state
    (a second join, a third player, adding after the end), a command id sent twice, and an end."""
    plays: dict[str, list] = {}
    for room in rooms:
        moves = [("ann", {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["ann", "bob"]}}, "c"),
                 ("ann", {"kind": "join_room"}, "j-ann"), ("bob", {"kind": "join_room"}, "j-bob"),
                 ("carol", {"kind": "join_room"}, "j-carol"), ("bob", {"kind": "join_room"}, "j-bob-again")]
        moves += [("ann" if i % 2 else "bob", {"kind": "add", "amount": i % 5}, f"add-{i}") for i in range(24)]
        moves.insert(12, moves[11])  # the same command id twice in a row
        if room.endswith(("0", "3", "6")):
            moves.insert(20, ("ann", {"kind": "end_room"}, "end"))
        plays[room] = [record(room, player, body, f"{room}:{command_id}", 1_000 + index)
                       for index, (player, body, command_id) in enumerate(moves)]
    return [plays[room][index] for index in range(max(map(len, plays.values())))
            for room in rooms if index < len(plays[room])]


async def assert_decided_as_one_by_one(redis_client: aioredis.Redis, store: RedisEventStore, records: list) -> None:
    """Every command's stored outcome, every room's log and every recorded refusal are what handling the
    records one at a time, in order, gives; every log verifies and has its snapshots; no entry is left pending."""
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    expected = RoomService(MemoryEventStore())
    answers = {item.command_id: await expected.handle(item) for item in records}
    for item in records:
        stored = await wait_for(lambda item=item: store.outcome(item.room, item.command_id), what=item.command_id)
        want = answers[item.command_id]
        assert (stored.accepted, (stored.error or {}).get("code"), stored.first_version, stored.last_version) == (
            want.accepted, (want.error or {}).get("code"), want.first_version, want.last_version), item.command_id
    rooms = sorted({item.room for item in records})
    for room in rooms:
        state = await assert_log_consistent(store, room)
        assert state.version == (await expected.load(room))[0].version
        assert state.game.total == (await expected.load(room))[0].game.total
        accepted = [codec.decode(r)["command_id"] for _, r in await store.commands(room)]
        assert accepted == [codec.decode(r)["command_id"] for _, r in await expected.store.commands(room)], room
        # Refusals are recorded without a version check: each at the version one-by-one handling refuses it.
        refused = [(r["command_id"], r["refused_at_version"]) for r in map(codec.decode, await store.rejections(room))]
        assert refused == [(r["command_id"], r["refused_at_version"])
                           for r in map(codec.decode, await expected.store.rejections(room))], room
        assert [await store.latest_snapshot(room, v) is not None for v in (2, state.version)] == [False, True]

    async def nothing_pending() -> bool:  # a command handled alone is acknowledged just after its outcome
        counts = [(await redis_client.xpending(KEYS.command_stream(shard), GROUP))["pending"]
                  for shard in {KEYS.shard(room) for room in rooms}]
        return not any(counts)

    await wait_for(nothing_pending, what="every entry acknowledged")


async def test_a_burst_decided_batch_ahead_of_batch_answers_what_one_by_one_handling_answers(
    redis_client, engines
) -> None:
    """Given a burst of commands over many rooms already waiting, and more arriving, when the engine reads
    batches long enough to read the next one in front of each write and decide it while Redis applies the
    write (small reads, so many batches), then every command has the outcome one-by-one handling gives it,
    every log verifies, and nothing stays pending."""
    rooms = [f"burst-{n}" for n in range(30)]
    records = _burst(rooms)
    half = len(records) // 2
    async with redis_client.pipeline(transaction=False) as pipe:
        for item in records[:half]:
            pipe.xadd(KEYS.command_stream(KEYS.shard(item.room)), {COMMAND_FIELD: codec.encode(item)})
        await pipe.execute()
    engines("burst", ALMANAC_BATCH_SIZE="4", ALMANAC_SNAPSHOT_EVERY="3")
    for item in records[half:]:
        await submit(redis_client, KEYS, item)
    store = RedisEventStore(redis_client)
    last = records[-1]
    await wait_for(lambda: store.outcome(last.room, last.command_id), timeout_s=30, what="the burst's last outcome")

    await assert_decided_as_one_by_one(redis_client, store, records)
    # Every command is decided by now; the counters reach Redis with the engine's next flushes (one may be
    # under way with the first batches' count only): wait for five, then read them.
    metrics = await wait_for(lambda: _when(engine_metrics(redis_client, "burst"),
                                           lambda m: m.get("batches_ahead", 0) >= 5),
                             what="five batches decided ahead")
    assert metrics["batches_ahead"] >= 5, metrics
    # Decided again only after a repeated id's write answered "dup" (its room is then reloaded): at most once
    # a room. A batch decided from the stale cache instead of the decisions before it would redo most rooms.
    assert metrics.get("rooms_redecided", 0) <= len(rooms), metrics


async def test_a_lease_taken_mid_stream_leaves_no_command_read_and_forgotten(redis_client, engines) -> None:
    """Given an engine busy on one shard, its next read always in flight, when it takes the lease of a second
    shard (the other holder's lapsed) and so takes that shard over, then the read in flight is dropped and
    its shard taken over too: every command it had delivered is decided, none waits pending for ever."""
    room = "busy-room"
    busy = KEYS.shard(room)
    other = (busy + 1) % 16
    # The other holder's lease is held until the engine runs on its one shard, however slowly it starts, then
    # lapses half a second later: mid-stream.
    await redis_client.set(lease_key(other), "someone-else|1|gone", px=120_000)
    engines("h", ALMANAC_ENGINE_SHARDS=f"{busy},{other}")
    await wait_for(lambda: _when(held_shards(redis_client, "h"), lambda held: held == [busy]), timeout_s=60,
                   what="one lease")
    await redis_client.pexpire(lease_key(other), 500)
    await send(redis_client, room, "ann", {"kind": "create_room", "ruleset": "counter"}, "create")
    await send(redis_client, room, "ann", {"kind": "join_room"}, "join")
    sent = 0
    loop = asyncio.get_running_loop()
    until = loop.time() + 3.0  # past the other lease's lapse, and the engine's next lease tick
    while loop.time() < until:
        await send_nowait(redis_client, room, "ann", {"kind": "add", "amount": 1}, f"add-{sent}")
        sent += 1
    assert sorted(await held_shards(redis_client, "h")) == sorted([busy, other])

    async def all_decided() -> bool:
        pending = (await redis_client.xpending(KEYS.command_stream(busy), GROUP))["pending"]
        return pending == 0 and await RedisEventStore(redis_client).outcome(room, f"add-{sent - 1}") is not None

    await wait_for(all_decided, timeout_s=10, what="every command decided, none left pending")
    state = await assert_log_consistent(RedisEventStore(redis_client), room)
    assert state.game.total == sent


async def test_an_engine_that_keeps_failing_steps_aside_and_a_standby_serves_its_shards(
    redis_client, redis_url, engines, tmp_path
) -> None:
    """Given an engine whose Redis user may not read the command streams (a permanent refusal, not an
    outage) holding every lease, and a healthy standby, when commands arrive, then the failing engine gives
    its leases back after STEP_ASIDE_AFTER failed rounds, and the standby takes the shards and answers."""
    from urllib.parse import urlsplit, urlunsplit  # noqa: PLC0415

    from almanac.services.engine.shard_engine import STEP_ASIDE_AFTER  # noqa: PLC0415

    try:
        await redis_client.execute_command("ACL", "SETUSER", "unread", "reset", "on", ">unread-pw", "~*", "&*",
                                           "+@all", "-xreadgroup")
    except aioredis.ResponseError as error:
        pytest.skip(f"this Redis does not let the tests create an ACL user: {error}")
    try:
        parts = urlsplit(redis_url)
        sick_url = urlunsplit(parts._replace(netloc=f"unread:unread-pw@{parts.hostname}:{parts.port}"))
        sick = EngineProcess(sick_url, "sick", tmp_path)
        try:
            await wait_for(lambda: _when(held_shards(redis_client, "sick"), lambda held: held == ALL_SHARDS),
                           what="the failing engine's leases")
            engines("standby")
            created = await send(redis_client, "aside", "ann", {"kind": "create_room", "ruleset": "counter"},
                                 "create", timeout_s=20)
            assert created.accepted
            await wait_for(lambda: _when(held_shards(redis_client, "standby"), lambda held: held == ALL_SHARDS),
                           what="the standby's leases")
            stepped = [line for line in sick.log_lines() if line.get("event") == "consume.stepping_aside"]
            assert stepped and stepped[0]["failed_rounds"] == STEP_ASIDE_AFTER and "NoPermissionError" in stepped[0]["error"]
        finally:
            sick.kill()
    finally:
        await redis_client.execute_command("ACL", "DELUSER", "unread")


async def test_leases_given_back_by_stepping_aside_are_neither_renewed_nor_taken_until_the_hold_off_ends(
    redis_client,
) -> None:
    """Given an engine's leases, when it steps aside while a tick is on its way (renewing two, taking a third
    that just lapsed), then the tick's answers make none of them its own, every lease is free for another
    engine at once, and this one takes none until the hold-off has passed."""
    from almanac.services.engine.lease import ShardLeases  # noqa: PLC0415

    await redis_client.set(lease_key(2), "another-engine|1|x", px=300)
    leases = ShardLeases(redis_client, [0, 1, 2], "aside", 5_000)
    assert await leases.tick() == ([0, 1], [])
    await asyncio.sleep(0.35)  # shard 2's lease lapsed: free
    tick = asyncio.create_task(leases.tick())
    await asyncio.sleep(0)  # renewing 0 and 1 and taking 2 are sent; the answers come after the release
    await leases.step_aside(0.3)
    assert await tick == ([], []) and leases.held == []
    assert [await redis_client.get(lease_key(shard)) for shard in (0, 1, 2)] == [None, None, None]
    assert await leases.tick() == ([], [])  # held off
    await asyncio.sleep(0.35)
    assert await leases.tick() == ([0, 1, 2], [])


async def test_the_safely_held_shards_follow_every_lease_change_and_each_margin_running_out(redis_client) -> None:
    """Given an engine's leases (its consume loop asks for the safely held ones once per batch, and is answered
    from what it was told before), when a lease is lost and another taken, then the answer changes with
    them; and when one lease's margin runs out before another's, without any tick, that one alone is left
    out, then the other too."""
    from almanac.services.engine.lease import ShardLeases  # noqa: PLC0415

    await redis_client.set(lease_key(2), "another-engine|1|x", px=60_000)
    leases = ShardLeases(redis_client, [0, 1, 2], "safe", 3_000)  # a margin of a quarter lease: 0.75 s
    assert await leases.tick() == ([0, 1], [])
    first = leases.safely_held()
    assert first == [0, 1] and leases.safely_held() is first  # unchanged: not worked out again

    await redis_client.set(lease_key(1), "another-engine|1|x", px=60_000)  # lost to another engine
    await redis_client.delete(lease_key(2))  # and shard 2 free
    assert await leases.tick() == ([2], [1])
    assert leases.safely_held() == [0, 2]

    # As a late renewal leaves them: shard 0 safely held for 0.3 s more, shard 2 for 1.5 s more.
    now = time.monotonic()
    leases._valid_until.update({0: now + 1.05, 2: now + 2.25})  # noqa: SLF001
    leases.changed()
    assert leases.safely_held() == [0, 2]
    await asyncio.sleep(0.6)
    assert leases.safely_held() == [2] and leases.held == [0, 2]
    assert [leases.holds(shard) for shard in (0, 1, 2)] == [False, False, True]
    await asyncio.sleep(1.1)
    assert leases.safely_held() == []
    assert await leases.tick() == ([], [])  # both renewed (their keys live 3 s from the last tick)
    assert leases.safely_held() == [0, 2]
    await leases.release_all()
    assert leases.safely_held() == []


async def test_kill_9_while_a_batch_is_decided_ahead_then_restart_applies_each_command_exactly_once(
    redis_client, engines
) -> None:
    """Given a burst waiting, read in small batches (each decided while the one before is written), when the
    engine is killed -9 while it decides a batch holding a slow command (others read, decided or written,
    none acknowledged), and started again, then every command has exactly the effect and outcome one-by-one
    handling gives it: nothing written twice, nothing lost, no refusal from a state never written."""
    rooms = [f"k9-{n}" for n in range(30)]
    records = _burst(rooms)
    slow = [record("k9-slow", "ann", {"kind": "create_room", "ruleset": "fragile"}, "k9-slow:c", 1_000),
            record("k9-slow", "ann", {"kind": "join_room"}, "k9-slow:j", 1_001),
            record("k9-slow", "ann", {"kind": "add", "amount": 99}, "k9-slow:add", 1_002)]
    middle = len(records) // 3
    records[middle:middle] = slow
    async with redis_client.pipeline(transaction=False) as pipe:
        for item in records:
            pipe.xadd(KEYS.command_stream(KEYS.shard(item.room)), {COMMAND_FIELD: codec.encode(item)})
        entry_ids = await pipe.execute()
    slow_entry = entry_ids[middle + 2]
    stream = KEYS.command_stream(KEYS.shard("k9-slow"))
    store = RedisEventStore(redis_client)
    first = engines("k9", ALMANAC_BATCH_SIZE="4", ALMANAC_SNAPSHOT_EVERY="3")

    async def slow_command_in_hand() -> bool:
        try:
            in_hand = await redis_client.xpending_range(stream, GROUP, min=slow_entry, max=slow_entry, count=1)
        except aioredis.ResponseError:  # NOGROUP: the engine has not taken the shard over yet
            return False
        return bool(in_hand) and await store.outcome("k9-slow", "k9-slow:add") is None

    # This wait includes the engine process's start (its import alone took 20 s on a loaded host): generous.
    await wait_for(slow_command_in_hand, timeout_s=60, what="the engine to hold the slow command")
    first.kill()
    decided_before = sum([await store.outcome(item.room, item.command_id) is not None for item in records])
    assert 0 < decided_before < len(records)

    engines("k9", ALMANAC_BATCH_SIZE="4", ALMANAC_SNAPSHOT_EVERY="3")  # the same name: it waits for the lapsed lease, then takes over
    last = records[-1]
    await wait_for(lambda: store.outcome(last.room, last.command_id), timeout_s=30, what="the burst's end")
    await assert_decided_as_one_by_one(redis_client, store, records)


async def test_an_engine_publishes_its_readiness_the_moment_it_is_ready_not_at_its_next_beat(redis_client) -> None:
    """Given an engine whose beats are 20 s apart (a lease of 60 s), when it has taken every shard over, then its
    heartbeat says so (consumed_ms) within a few seconds: whoever waits for it (a gateway's /health, `almanac
    up`, the tests' stacks) does not wait for the next beat."""
    from almanac.services.engine.shard_engine import Engine, EngineConfig  # noqa: PLC0415

    engine = Engine(redis_client, EngineConfig(name="ready", shards=list(range(16)), lease_ms=60_000))
    started = time.monotonic()
    await engine.start()
    try:
        async def ready() -> dict | None:
            beat = await heartbeat(redis_client, "ready") or {}
            return beat if len(beat.get("shards_held", [])) == 16 and beat.get("consumed_ms", 0) > 0 else None

        beat = await wait_for(ready, timeout_s=30, what="the engine's readiness in its heartbeat")
        assert time.monotonic() - started < 10, "readiness waited for the next beat (20 s after the first)"
        assert beat["consumed_ms"] > beat["redis_error_ms"]
    finally:
        await engine.stop()
