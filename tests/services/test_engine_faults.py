"""An engine meeting Redis's faults (killed, refusing writes, refusing this engine alone) or a bug of its own build.

Found by a branch-coverage run over the engine's tests (issue 29, item 7): the consume loop's Redis-unreachable,
MISCONF and step-aside branches and the lease loop's error branches were run by no story. Each story here runs an
engine in this process on a Redis of its own (killed, its disk taken away, a user's rights taken) and holds the
promise: nothing acknowledged is lost, every command is decided exactly once, and an engine that cannot serve its
shards gives them to another.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from engine_process_helper import register_test_rulesets
from engine_test_support import KEYS, engine_metrics, send, send_nowait, wait_for
from structlog.testing import capture_logs

from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.engine.lease import RELEASE_SCRIPT, ShardLeases
from almanac.services.engine.shard_engine import STEP_ASIDE_AFTER, Engine, EngineConfig
from almanac.storage.keys import engine_stats_key, engines_key, lease_key
from almanac.storage.redis_store import RedisEventStore

register_test_rulesets()
ALL_SHARDS = list(range(16))
LEASE_MS = 800
CREATE = {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["ann"]}}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test's own (AOF on), to kill and break without touching the session's."""
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def client(own_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.Redis.from_url(own_redis.url)
    yield connection
    await connection.aclose()


@contextlib.asynccontextmanager
async def running(engine: Engine) -> AsyncIterator[Engine]:
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


def engine_on(client: aioredis.Redis, name: str, lease_ms: int = LEASE_MS) -> Engine:
    return Engine(client, EngineConfig(name=name, shards=ALL_SHARDS, lease_ms=lease_ms))


async def holds_every_shard(engine: Engine) -> bool:
    return sorted(engine.leases.safely_held()) == ALL_SHARDS


async def open_room(client: aioredis.Redis, room: str) -> None:
    assert (await send(client, room, "ann", CREATE, "create")).accepted
    assert (await send(client, room, "ann", {"kind": "join_room"}, "join")).accepted


async def logged_ids(client: aioredis.Redis, room: str) -> list[str]:
    return [envelope.command_id for envelope in await RedisEventStore(client).read(room)]


def events(logs: list[dict], name: str) -> list[dict]:
    return [line for line in logs if line["event"] == name]


async def test_an_engine_outlives_its_redis_killed_and_decides_every_acknowledged_command_once(
        own_redis: EmbeddedRedis, client: aioredis.Redis) -> None:
    """Given an engine serving a room (a long lease: its shards stay safely held while Redis is away) and commands
    acknowledged by Redis (fsync on every write) whatever the engine did with them yet, when Redis is killed and
    stays away for more failed rounds than STEP_ASIDE_AFTER, and is started again on its files, then the engine
    rides it out without stepping aside (its round and its lease loop report Redis away), and every command,
    sent again with its id, is answered and in the room's log exactly once."""
    await client.config_set("appendfsync", "always")  # acknowledged = on disk: the kill loses nothing Redis said
    with capture_logs() as logs:
        async with running(engine_on(client, "survivor", lease_ms=30_000)) as engine:
            await wait_for(lambda: holds_every_shard(engine), what="the engine's leases")
            room = "killed-redis"
            await open_room(client, room)
            moves = [f"add-{n}" for n in range(5)]
            for command_id in moves:
                await send_nowait(client, room, "ann", {"kind": "add", "amount": 1}, command_id)

            own_redis.process.send_signal(signal.SIGKILL)
            own_redis.process.wait(10)
            # Safely held for 12.5 s more at least (a renewal every 10 s, a margin of 7.5 s): the rounds fail.
            await wait_for(lambda: _async(len(events(logs, "consume.redis_unreachable")) > STEP_ASIDE_AFTER),
                           timeout_s=30, what="more failed rounds than would make a failing engine step aside")
            await wait_for(lambda: _seen(logs, "lease.redis_unreachable"), timeout_s=30,
                           what="the lease loop meeting Redis away")
            own_redis.start()  # on its port and files again (the fixture stops it)

            for command_id in moves:
                outcome = await send(client, room, "ann", {"kind": "add", "amount": 1}, command_id, timeout_s=30)
                assert outcome.accepted, outcome
            assert await logged_ids(client, room) == ["create", "join", *moves]
            assert engine.metrics.totals["stepped_aside"] == 0
            assert engine.metrics.totals["dead_letters"] == 0
            assert engine._redis_error_ms > 0  # its readiness says so until a round completes after it
    assert not events(logs, "consume.stepping_aside")


async def test_an_engine_waits_out_a_redis_that_cannot_persist_and_decides_the_waiting_command_once(
        own_redis: EmbeddedRedis, client: aioredis.Redis) -> None:
    """Given an engine serving a room (a long lease), when Redis cannot persist (its directory gone, a failed save, and
    stop-writes-on-bgsave-error: MISCONF to every write, the engine's reads included), then the engine reports
    the refusal for more rounds than STEP_ASIDE_AFTER and neither steps aside nor sets a command aside; once the operator mends Redis, a command sent
    meanwhile is decided exactly once."""
    with capture_logs() as logs:
        # A long lease (as in the story above): the rounds meet the refusal for as long as it lasts.
        async with running(engine_on(client, "patient", lease_ms=30_000)) as engine:
            await wait_for(lambda: holds_every_shard(engine), what="the engine's leases")
            room = "no-disk"
            await open_room(client, room)

            await client.config_set("save", "3600 1")
            shutil.rmtree(own_redis.data_dir)
            await client.bgsave()
            await wait_for(lambda: _bgsave_failed(client), what="the save failing")
            await wait_for(lambda: _async(len(events(logs, "consume.redis_refused")) > STEP_ASIDE_AFTER),
                           timeout_s=30, what="more refused rounds than would make a failing engine step aside")
            await wait_for(lambda: _seen(logs, "lease.redis_unreachable"), timeout_s=30,
                           what="the lease loop meeting MISCONF")
            refused = events(logs, "consume.redis_refused")[0]
            assert "MISCONF" in refused["error"]

            await client.config_set("stop-writes-on-bgsave-error", "no")  # the operator's fix
            outcome = await send(client, room, "ann", {"kind": "add", "amount": 1}, "after-mend", timeout_s=30)
            assert outcome.accepted
            assert await logged_ids(client, room) == ["create", "join", "after-mend"]
            assert engine.metrics.totals["stepped_aside"] == 0
            assert engine.metrics.totals["dead_letters"] == 0


async def test_an_engine_refused_by_redis_for_itself_steps_aside_and_another_decides_its_command_once(
        own_redis: EmbeddedRedis, client: aioredis.Redis) -> None:
    """Given an engine whose Redis user may not read the command streams (a permission, refused to it alone:
    NOPERM on every takeover) holding every shard, and a command waiting, when its rounds fail STEP_ASIDE_AFTER
    times, then it gives its leases back and takes none for a while, another engine takes the shards over and
    decides the command, exactly once."""
    await client.acl_setuser("crippled", enabled=True, nopass=True, keys=["*"], channels=["*"],
                             commands=["+@all", "-xreadgroup"])
    crippled = aioredis.Redis.from_url(own_redis.url, username="crippled")
    try:
        with capture_logs() as logs:
            async with running(engine_on(crippled, "crippled")) as first:
                await wait_for(lambda: holds_every_shard(first), what="the first engine's leases")
                room = "stepped-aside"
                await send_nowait(client, room, "ann", CREATE, "create")
                await another_decides_once(client, first, room)
        assert len(events(logs, "consume.unexpected_redis_error")) >= STEP_ASIDE_AFTER
        stepped = events(logs, "consume.stepping_aside")[0]
        assert stepped["engine"] == "crippled" and "NoPermissionError" in stepped["error"]
    finally:
        await crippled.aclose()


class BrokenBuild(Engine):
    """An engine of a build that fails every batch it decides (a bug, not Redis): the round fails each time."""

    async def _decide_batch(self, batch, after=None):
        raise RuntimeError("a bug of this build")


async def test_an_engine_whose_build_fails_every_batch_steps_aside_for_another_that_decides_once(
        client: aioredis.Redis) -> None:
    """Given an engine of a build that fails every batch (not Redis's failure) holding every shard, when a
    command comes, then its rounds fail until it steps aside, and another engine (another build) takes the
    shard over and decides the command exactly once; the broken one decided nothing and set nothing aside."""
    with capture_logs() as logs:
        async with running(BrokenBuild(client, EngineConfig(name="broken", shards=ALL_SHARDS,
                                                            lease_ms=LEASE_MS))) as broken:
            await wait_for(lambda: holds_every_shard(broken), what="the broken engine's leases")
            room = "broken-build"
            await send_nowait(client, room, "ann", CREATE, "create")
            await wait_for(lambda: _seen(logs, "consume.unexpected_error"), what="a failed round")
            await another_decides_once(client, broken, room)


class StalledAtStepAside(BrokenBuild):
    """A broken build whose Redis stops (SIGSTOP) as its last failing round ends, for ``stall_s``: what it does when
    it steps aside (publish what is done, give the leases back) meets a Redis that does not answer."""

    def __init__(self, *args, redis: EmbeddedRedis, stall_s: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._redis, self._stall_s, self._rounds = redis, stall_s, 0

    async def _decide_batch(self, batch, after=None):
        self._rounds += 1
        if self._rounds == STEP_ASIDE_AFTER:
            self._redis.process.send_signal(signal.SIGSTOP)
            asyncio.get_running_loop().call_later(self._stall_s, self._redis.process.send_signal, signal.SIGCONT)
        return await super()._decide_batch(batch, after)


async def test_an_engine_stepping_aside_while_redis_is_stopped_leaves_its_leases_to_lapse_and_another_decides_once(
        own_redis: EmbeddedRedis, client: aioredis.Redis) -> None:
    """Given a broken build holding every shard, on a client with a socket timeout (as a deciding gateway's engine),
    when Redis stops answering (SIGSTOP) just as the build's last failing round makes it step aside, then giving the
    leases back fails (a timeout, logged as consume.release_failed) and the engine holds nothing all the same; once
    Redis runs again its leases are gone (the release it had sent, or their lapse) and it takes none back within its
    hold-off: another engine takes the shard over and decides the waiting command, exactly once."""
    timed = aioredis.Redis.from_url(own_redis.url, socket_timeout=0.3, socket_connect_timeout=0.3)
    try:
        with capture_logs() as logs:
            # A longer lease (hold-off 3 x 2 s): the stall and the timeouts end well inside the hold-off.
            stalled = StalledAtStepAside(timed, EngineConfig(name="stalled", shards=ALL_SHARDS, lease_ms=2_000),
                                         redis=own_redis, stall_s=1.5)
            async with running(stalled):
                await wait_for(lambda: holds_every_shard(stalled), what="the stalled engine's leases")
                held_with = stalled.leases.token
                room = "release-failed"
                await send_nowait(client, room, "ann", CREATE, "create")
                await wait_for(lambda: _seen(logs, "consume.release_failed"), timeout_s=30, what="the failed release")
                assert stalled.leases.held == [] and stalled.leases.safely_held() == []
                assert not stalled.decides_here(room)
                failed = events(logs, "consume.release_failed")[0]
                assert "Timeout" in failed["error"]
                await another_decides_once(client, stalled, room)
                assert held_with not in await _holders(client)
    finally:
        own_redis.process.send_signal(signal.SIGCONT)  # never left stopped for the fixture's stop
        await timed.aclose()


async def test_a_late_release_of_a_lease_given_back_never_takes_the_lease_taken_again(client: aioredis.Redis) -> None:
    """Given an engine's leases that stepped aside (its release sent, but not run by Redis: a stalled or cut
    connection) and that took the shard again after its hold-off, when Redis runs that release only now (replayed
    here as Redis would run it, with the token it was sent with), then the lease taken again stays the engine's: a
    lease taken after a step-aside carries a token no earlier release names."""
    leases = ShardLeases(client, [0], "late-release", lease_ms=LEASE_MS)
    assert (await leases.tick())[0] == [0]
    released_with = leases.token
    await leases.step_aside(0.0)
    assert (await leases.tick())[0] == [0]
    await client.eval(RELEASE_SCRIPT, 1, lease_key(0), released_with)  # the release, run late
    assert await leases.holder(0) == leases.token
    assert (await leases.tick())[1] == []  # renewed, not lost


async def _holders(client: aioredis.Redis) -> list[str]:
    values = await client.mget([lease_key(shard) for shard in ALL_SHARDS])
    return [value.decode() for value in values if value is not None]


class BrokenHeartbeat(Engine):
    """An engine of a build whose lease loop fails after every renewal and whose heartbeat fails every time (bugs,
    not Redis)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        renew = self.leases.tick

        async def renew_then_fail() -> tuple[list[int], list[int]]:
            await renew()
            raise RuntimeError("a bug of this build's lease loop")

        self.leases.tick = renew_then_fail

    async def _flush_metrics_and_heartbeat(self, alive: bool) -> None:
        if alive:
            raise RuntimeError("a bug of this build's heartbeat")
        await super()._flush_metrics_and_heartbeat(alive)


async def test_a_lease_loop_and_a_beat_meeting_bugs_go_on_and_the_engine_goes_on_deciding(
        client: aioredis.Redis) -> None:
    """Given an engine whose lease loop fails after each renewal and whose heartbeat fails each time (bugs), when
    several lease periods pass, then both loops have logged each failure and gone on: the engine still holds every
    shard and decides a room's commands."""
    with capture_logs() as logs:
        async with running(BrokenHeartbeat(client, EngineConfig(name="limping", shards=ALL_SHARDS,
                                                                lease_ms=LEASE_MS))) as engine:
            await wait_for(lambda: holds_every_shard(engine), what="the engine's leases")
            await wait_for(lambda: _async(len(events(logs, "lease.unexpected_error")) >= 5), timeout_s=30,
                           what="the lease loop failing more than a lease period's worth of ticks")
            assert len(events(logs, "engine.beat_unexpected_error")) >= 2
            assert await holds_every_shard(engine)
            await open_room(client, "limping-room")
            assert await logged_ids(client, "limping-room") == ["create", "join"]


async def another_decides_once(client: aioredis.Redis, failing: Engine, room: str) -> None:
    """Another engine started beside ``failing`` answers the room's waiting "create" (sent again with its id) once
    ``failing`` has stepped aside: in the log once, and ``failing`` decided nothing and set nothing aside."""
    async with running(engine_on(client, "another")) as another:
        outcome = await send(client, room, "ann", CREATE, "create", timeout_s=30)
        assert outcome.accepted
        assert failing.metrics.totals["stepped_aside"] >= 1
        assert KEYS.shard(room) in another.leases.held
        assert await logged_ids(client, room) == ["create"]
        assert failing.metrics.totals["commands"] == 0 and failing.metrics.totals["dead_letters"] == 0


async def _seen(logs: list[dict], *names: str) -> bool:
    return all(events(logs, name) for name in names)


async def _async(value: object) -> object:
    return value


async def _bgsave_failed(client: aioredis.Redis) -> bool:
    return (await client.info("persistence"))["rdb_last_bgsave_status"] == "err"


@pytest.mark.parametrize("broken", ["counters", "engines set"])
async def test_an_engine_whose_beat_cannot_be_written_answers_every_command_and_counts_each_once(
        client: aioredis.Redis, broken: str) -> None:
    """Given an engine serving a room, when a key its beat writes cannot be written (an operator's stray SET made it a
    string: WRONGTYPE), its counters' hash or the engines' set (on a Cluster another node's), then every command is
    still answered, the failed beats are logged, and once the key is mended the counters count every command decided
    meanwhile exactly once: none lost with a failed write, none counted again beside one."""
    name = f"uncounted-{broken.split()[0]}"
    key = engine_stats_key(name) if broken == "counters" else engines_key()
    with capture_logs() as logs:
        async with running(engine_on(client, name, lease_ms=30_000)) as engine:
            await wait_for(lambda: holds_every_shard(engine), what="the engine's leases")
            room = name
            await open_room(client, room)
            await wait_for(lambda: _async_metrics(client, name, lambda counts: counts.get("commands") == 2),
                           what="the two commands' counts written")
            await client.delete(key)
            await client.set(key, "not a hash nor a set")

            for n in range(5):
                assert (await send(client, room, "ann", {"kind": "add", "amount": 1}, f"add-{n}")).accepted
            await wait_for(lambda: _async(len(events(logs, "engine.beat_failed")) >= 3), what="beats refused")
            assert "WRONGTYPE" in events(logs, "engine.beat_failed")[0]["error"]
            if broken == "engines set":  # the counters' own send went through each time: counted once
                assert (await engine_metrics(client, name))["commands"] == 7

            await client.delete(key)  # the operator's fix
            # (the counters' hash made again holds what came after it was replaced: the five commands)
            counted = 5 if broken == "counters" else 7
            await wait_for(lambda: _async_metrics(client, name, lambda counts: counts.get("commands") == counted),
                           what="every command counted once the key is mended")
            await asyncio.sleep(1.5)  # three beats more: still counted once
            assert (await engine_metrics(client, name))["commands"] == counted


async def _async_metrics(client: aioredis.Redis, name: str, holds) -> bool:  # noqa: ANN001
    return holds(await engine_metrics(client, name))
