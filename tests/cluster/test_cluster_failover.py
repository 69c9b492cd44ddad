"""Failover under load on a six-node Redis Cluster (3 primaries + 3 replicas): nothing acknowledged lost or doubled.

Given the whole stack (REDIS_URL naming all six nodes as seeds) and a steady command load over 20 lanes of rooms, when one primary is killed with SIGKILL, and later the node the
gateway's outcome subscription sits on, then: every shard takes commands again within twice the promotion time,
no answer is a 5xx other than 503, every acknowledged command's events are in the log exactly once, no command
is left pending in the engine's group, every room verifies, and the read models equal a rebuild.

Replication is asynchronous: without WAIT a write acknowledged in the instant before its primary dies may be
missing on the promoted replica, so the asynchronous run bounds the lost count (LOSS_WINDOW_ALLOWED; it was 0
in every run here). The durability-replica run (ALMANAC_DURABILITY=replica: each node's appends are followed
by WAIT for one replica on that node) asserts that nothing acknowledged is lost; there the promoted primary
takes writes only once it has a replica again (the killed node, started again, rejoins as one), and that time
replaces the promotion time in the bound. Both runs print the typical acknowledgement before any failover.

Every story runs on both documented layouts (``LAYOUTS``): the default, a gateway that holds the shards and
decides their commands itself (ALMANAC_ENGINE_SHARDS=all; on a Cluster its commands still go through the
shard's stream, Engine.decides_here) beside a projector; and a gateway that holds no shard beside an `almanac engine`
process (the gateway's ALMANAC_ENGINE_SHARDS=none).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cluster_support import ReplicatedCluster
from projection_games import dump_models
from test_cluster_stack import CHILD, ClusterStack

from almanac.bench.e2e import CHALLENGE, _script, script_ruleset
from almanac.bench.redis_cluster import ClusterDown
from almanac.services.forensics.verify import verify_room
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.redis_client import connect
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

pytestmark = [
    pytest.mark.slow,
    # the longest files start first, and these two Cluster stacks one after the other (a second one starting
    # beside a failover would slow the nodes past their 2 s timeout): tests/conftest.py
    pytest.mark.xdist_group("clusters"),
    pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                       reason="the six-node cluster needs redis-server and redis-cli on PATH"),
]

LANES = 20  # rooms played at once, one command in flight each
RATE = 60  # commands per second offered, in total
WARMUP_S = 3.0
SETTLE_S = 4.0  # load kept on after a recovery, so "recovered" is seen to hold
LOSS_WINDOW_ALLOWED = 3  # without WAIT: acknowledged writes lost to asynchronous replication, at most
SHARDS = 16
COMMAND_TIMEOUT_S = 5.0
# The processes of each documented layout, and its gateway's ALMANAC_ENGINE_SHARDS.
LAYOUTS = {"deciding-gateway": (("projector", "gateway"), "all"),
           "http-gateway-and-engine": (("engine", "projector", "gateway"), "none")}


@dataclass
class Load:
    """What the client saw: every acknowledged command, every answer's status, when each shard last took one."""

    acked: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # internal id -> (room, first, last)
    # internal id -> (when the request that was answered 200 was sent, when its answer came)
    answered: dict[str, tuple[float, float]] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    codes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    acks_by_shard: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[tuple[float, float, int]] = field(default_factory=list)  # (answered at, seconds, status)
    rooms: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    name: str = "fo"  # its rooms' prefix: a second load in one story plays rooms of its own


async def _drive(url: str, load: Load, keys: Keys) -> None:
    ruleset = script_ruleset()
    script = await _script(ruleset)
    period = LANES / RATE
    # Idle connections are dropped well before uvicorn's 5 s keep-alive timeout: otherwise a request sent on
    # a connection the server is closing at that instant fails with ReadError (seen once in a quiet stretch
    # of a failover), which is the client's race, not an answer of the gateway.
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(keepalive_expiry=1.0)) as http:

        async def post(path: str, body: dict, token: str | None = None) -> tuple[httpx.Response, float]:
            """Send until an answer that is not a 503 (resent with the same command id: idempotent); the answer
            and when the request that got it was sent."""
            while True:
                started = time.monotonic()
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                answer = await http.post(path, json=body, headers=headers)
                load.statuses[answer.status_code] += 1
                if answer.status_code >= 400:
                    load.codes[f"{answer.status_code} {answer.json().get('code')}"] += 1
                load.latencies.append((time.monotonic(), time.monotonic() - started, answer.status_code))
                if answer.status_code not in (202, 503) or load.stop.is_set():
                    return answer, started
                await asyncio.sleep(0.1)

        async def lane(number: int) -> None:
            game = 0
            while not load.stop.is_set():
                # Lane n plays on shard n % SHARDS: every shard has a room in play at every moment, so a
                # shard's longest stretch without an acknowledgement is its stall, not a lull in its load.
                room = _room_on(keys, number % SHARDS, f"{load.name}-{os.getpid()}-{number}-{game}")
                game += 1
                created, _ = await post("/rooms", {"ruleset": ruleset, "player": "p", "challenge": CHALLENGE,
                                                "room": room, "command_id": f"create-{room}"})
                if created.status_code != 201:
                    continue
                load.rooms.append(room)
                token = created.json()["token"]
                for move, command in enumerate(script):
                    due = time.monotonic() + period
                    client_id = f"m{move}"
                    answer, sent = await post(f"/rooms/{room}/commands",
                                              {"command": command, "command_id": client_id}, token)
                    if answer.status_code == 200:
                        result = answer.json()
                        command_id = internal_command_id(room, "p", client_id)
                        load.acked[command_id] = (room, result["first_version"], result["version"])
                        load.answered[command_id] = (sent, time.monotonic())
                        load.acks_by_shard[keys.shard(room)].append(time.monotonic())
                    if load.stop.is_set():
                        return
                    await asyncio.sleep(max(0.0, due - time.monotonic()))

        await asyncio.gather(*(lane(number) for number in range(LANES)))


def _room_on(keys: Keys, shard: int, name: str) -> str:
    """``name`` with the first suffix that puts the room on ``shard``."""
    return next(room for room in (f"{name}-{n}" for n in range(10_000)) if keys.shard(room) == shard)


def _until_every_shard_acked(load: Load, shards: set[int] | range, since: float, deadline: float) -> None:
    """Wait until each of ``shards`` has an acknowledgement at or after ``since`` (monotonic), or ``deadline``:
    a recovery is waited for as it happens, never for a fixed time. A shard still silent at the deadline is
    left for the caller's bound to report."""
    while time.monotonic() < deadline:
        if all(any(at >= since for at in list(load.acks_by_shard[shard])) for shard in shards):
            return
        time.sleep(0.05)


def _longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch in [start, end] without an acknowledgement."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    return max(later - earlier for earlier, later in zip(inside, inside[1:], strict=False))


def _host_gap(load: Load, killed_at: float, cap: float) -> float:
    """The longest stretch without an acknowledgement on any shard in the WARMUP_S before the kill, when every
    shard had taken one (``_kill_under_load`` waits for that): what the host alone made a lane wait before anything
    failed. At most ``cap`` (the promotion): a stall the product itself makes before the kill must not buy a longer
    one after it."""
    start = killed_at - WARMUP_S
    gaps = [_longest_gap(inside, max(start, min(inside)), killed_at) for inside in
            ([t for t in list(load.acks_by_shard[shard]) if start <= t <= killed_at] for shard in range(SHARDS))
            if inside]
    return min(cap, max(gaps, default=cap))


def _figures(gaps: dict[int, float]) -> str:
    ordered = sorted(gaps.values())
    return f"max {ordered[-1]:.2f} s, median {ordered[len(ordered) // 2]:.2f} s"


def _health(url: str) -> dict:
    try:
        return httpx.get(f"{url}/health", timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return {}


@contextlib.contextmanager
def _stack_on_six_nodes(tmp_path: Path, durable: bool, layout: str) -> Iterator[tuple[ReplicatedCluster, ClusterStack, int,
                                                                         dict[int, int | None]]]:
    """A six-node cluster and the whole stack on it (``layout``, ALMANAC_DURABILITY=replica if ``durable``), healthy: the
    cluster, the stack, the port of the node the gateway's outcome subscription is on, and the replicas' primaries
    (``ReplicatedCluster.roles``). Stopped after."""
    cluster = ReplicatedCluster(tmp_path / "nodes")
    cluster.start()
    (tmp_path / "stack").mkdir()
    stack = ClusterStack(cluster.url, tmp_path / "stack")
    stack.env["ALMANAC_COMMAND_TIMEOUT_MS"] = str(int(COMMAND_TIMEOUT_S * 1000))
    if durable:
        stack.env["ALMANAC_DURABILITY"] = "replica"
    try:
        processes, gateway_shards = LAYOUTS[layout]
        for name in processes:
            if name == "gateway":  # started last: the engine process (if any) holds every shard
                stack.env["ALMANAC_ENGINE_SHARDS"] = gateway_shards
            stack.start(name)
        health = stack.wait_healthy(60)
        yield cluster, stack, int(health["outcomes"]["node"].rsplit(":", 1)[1]), cluster.roles()["slave"]
    finally:
        stack.stop()
        cluster.stop()


def _start_load(stack: ClusterStack, keys: Keys, load: Load) -> threading.Thread:
    """The load driven on the stack from a thread of its own (stopped by ``load.stop``)."""
    driver = threading.Thread(target=lambda: asyncio.run(_drive(stack.url, load, keys)), daemon=True)
    driver.start()
    return driver


def _kill_under_load(cluster: ReplicatedCluster, stack: ClusterStack, keys: Keys, load: Load, victim: int,
                     promoted: int) -> tuple[threading.Thread, float, float]:
    """Start the load (its thread), warm up, kill -9 ``victim``: when it was killed, and the seconds until
    ``promoted`` (its replica) was promoted."""
    driver = _start_load(stack, keys, load)
    time.sleep(WARMUP_S)
    # and on, on a slow host, until every shard has taken a command: the stalls are measured from a shard's
    # acknowledgements, and a shard with none before the kill would only say the host was slow.
    _until_every_shard_acked(load, range(SHARDS), 0.0, deadline=time.monotonic() + 60)
    killed_at = time.monotonic()
    cluster.kill(victim)
    return driver, killed_at, cluster.wait_promoted(promoted)


def _victim(subscription: int, roles: dict[int, int | None]) -> tuple[int, int]:
    """The primary to kill and its replica: neither the subscription's node nor its replica (that replica may be
    killed later, and a promoted replica has no replica of its own)."""
    victim = next(primary for replica, primary in roles.items() if subscription not in (primary, replica))
    return victim, next(replica for replica, primary in roles.items() if primary == victim)  # type: ignore[misc]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("durable", [False, True], ids=["asynchronous", "durability-replica"])
def test_a_primary_and_the_subscription_node_die_under_load_and_nothing_acknowledged_is_lost(
        tmp_path: Path, durable: bool, layout: str) -> None:
    keys = Keys(SHARDS)
    load = Load()
    with _stack_on_six_nodes(tmp_path, durable, layout) as (cluster, stack, subscription, roles):
        try:
            _failovers(cluster, stack, subscription, roles, durable, keys, load)
        finally:
            load.stop.set()


def _failovers(cluster: ReplicatedCluster, stack: ClusterStack, subscription: int, roles: dict[int, int | None],
               durable: bool, keys: Keys, load: Load) -> None:
    victim, promoted = _victim(subscription, roles)
    # 1. kill -9 a primary.
    driver, killed_at, promotion_s = _kill_under_load(cluster, stack, keys, load, victim, promoted)
    # With durability=replica the promoted primary takes no write until it has a replica of its own:
    # the killed node is started again and rejoins as that replica. Its shards recover from then on.
    recovered_s = promotion_s
    if durable:
        cluster.restart(victim)
        cluster.wait_replicated(promoted)
        recovered_s = time.monotonic() - killed_at
    # Until every shard has taken a command since its node took writes again, then SETTLE_S more. A shard still
    # stalled at twice that time fails the bound below as it did when this was a fixed wait of that length.
    _until_every_shard_acked(load, range(SHARDS), killed_at + recovered_s,
                             deadline=killed_at + 2 * recovered_s + _host_gap(load, killed_at, recovered_s))
    time.sleep(SETTLE_S)
    first_end = time.monotonic()
    if durable:  # one failover is enough to show that nothing acknowledged is lost
        load.stop.set()
        driver.join(60)
        assert not driver.is_alive(), "the load driver did not stop"

    lost_at = second_end = time.monotonic()
    moved_s = second_promotion_s = None
    was_primary = False
    if not durable:
        # 2. kill -9 the node the gateway's outcome subscription is on: the gateway subscribes on another node
        # (when that node was a primary, its replica is promoted as in 1.).
        lost_at = time.monotonic()
        was_primary = subscription in cluster.roles()["master"]
        cluster.kill(subscription)
        moved_s = None
        while time.monotonic() - lost_at < 15:
            outcomes = _health(stack.url).get("outcomes") or {}
            if outcomes.get("subscribed") and outcomes.get("node") != f"127.0.0.1:{subscription}":
                moved_s = time.monotonic() - lost_at
                break
            time.sleep(0.05)
        second_promotion_s = None
        if was_primary:
            cluster.wait_promoted(next(r for r, p in roles.items() if p == subscription))
            second_promotion_s = time.monotonic() - lost_at
        time.sleep(max(0.0, lost_at + (second_promotion_s or 0.0) + SETTLE_S - time.monotonic()))
        load.stop.set()
        driver.join(60)
        assert not driver.is_alive(), "the load driver did not stop"
        second_end = time.monotonic()

    # Figures: the promotions, and per shard the longest stretch without an acknowledgement.
    host_gap = _host_gap(load, killed_at, promotion_s)
    first_gaps = {shard: _longest_gap(load.acks_by_shard[shard], killed_at, first_end) for shard in range(SHARDS)}
    slowest = max((seconds for at, seconds, _ in load.latencies if at >= killed_at), default=0.0)
    # The cost of the durability level: the typical acknowledgement before any failover (same load).
    steady = sorted(seconds for at, seconds, status in load.latencies if at < killed_at and status == 200)
    print(f"\ndurability {'replica (WAIT for one replica)' if durable else 'aof (asynchronous replication)'}: "
          f"acknowledgement before the failovers p50 {1000 * steady[len(steady) // 2]:.1f} ms, "
          f"p90 {1000 * steady[int(len(steady) * 0.9)]:.1f} ms\n"
          f"failover 1 (primary {victim}): promotion {promotion_s:.2f} s"
          f"{f'; the killed node rejoined as its replica at {recovered_s:.2f} s' if durable else ''}; "
          f"longest stall per shard {_figures(first_gaps)}; before it, the longest stretch without one {host_gap:.2f} s")
    if not durable:
        second_gaps = {shard: _longest_gap(load.acks_by_shard[shard], lost_at, second_end)
                       for shard in range(SHARDS)}
        # While the subscription is down (and moving), commands are answered from the stored outcome: the
        # typical acknowledgement stays quick instead of taking the whole outcome wait.
        answered = sorted(seconds for at, seconds, status in load.latencies
                          if lost_at <= at <= lost_at + (moved_s or 15.0) and status == 200)
        typical_s = answered[len(answered) // 2] if answered else float("inf")
        print(f"failover 2 (subscription node {subscription}, {'a primary' if was_primary else 'a replica'}): "
              f"promotion {'-' if second_promotion_s is None else f'{second_promotion_s:.2f} s'}; subscription "
              f"moved in {'never' if moved_s is None else f'{moved_s:.2f} s'}; longest stall per shard "
              f"{_figures(second_gaps)}; median acknowledgement while it moved {typical_s:.2f} s")
    print(f"slowest answer {slowest:.2f} s; answers {dict(load.statuses)} {dict(load.codes)}; "
          f"acknowledged {len(load.acked)} in {len(load.rooms)} rooms")
    assert all(load.acks_by_shard[shard] for shard in range(SHARDS)), "a shard had no load"
    # Every shard takes commands again within twice the time its node needed to take writes again: the
    # promotion (with durability=replica: until the promoted primary had a replica again), plus the longest stretch
    # without an acknowledgement the host showed before anything failed (a loaded host's lanes wait their turn:
    # one suite run had acknowledgements at p50 247 ms, p90 705 ms before the kill, and a live shard's 8.35 s
    # against a bound of 7.80 s).
    assert max(first_gaps.values()) <= 2 * recovered_s + host_gap, first_gaps
    if not durable:
        assert max(second_gaps.values()) <= 2 * (second_promotion_s or promotion_s) + host_gap, second_gaps
        assert moved_s is not None, "the outcome subscription did not move to a live node"
        # A window with no 200 at all (every command refused 503 while the cluster promoted) waited for
        # nothing; otherwise the typical acknowledgement must not have waited out the outcome timeout.
        if answered:
            assert typical_s < COMMAND_TIMEOUT_S, "acknowledgements waited out the outcome timeout"
    assert load.statuses.get(202, 0) <= len(load.rooms), "answers waited out the outcome wait"
    assert not [status for status in load.statuses if status >= 500 and status != 503], dict(load.statuses)

    # Nothing acknowledged lost or doubled; every room verifies.
    lost, doubled, unverified = asyncio.run(_check_log(cluster.url, load))
    print(f"acknowledged {len(load.acked)}, lost {len(lost)}, doubled {len(doubled)}")
    assert not doubled, doubled
    assert not unverified, unverified
    assert len(lost) <= (0 if durable else LOSS_WINDOW_ALLOWED), lost

    # Every command that reached a command stream was decided: none is left pending in the engine's group
    # (an entry delivered to a read the engine did not process stays pending until a takeover).
    deadline = time.monotonic() + 10
    while (pending := asyncio.run(_pending(cluster.url, keys))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pending, _left_pending(cluster, keys, pending)

    # The read models equal a rebuild.
    deadline = time.monotonic() + 30
    while not (_health(stack.url).get("projector") or {}).get("caught_up") and time.monotonic() < deadline:
        time.sleep(0.2)
    live = asyncio.run(_models(cluster.url))
    rebuilt = subprocess.run([sys.executable, "-c", CHILD, "projections", "rebuild"], env=stack.env,
                             capture_output=True, text=True, timeout=60)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert asyncio.run(_models(cluster.url)) == live
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} died: {stack.log(name)}"


async def _check_log(url: str, load: Load) -> tuple[list[str], list[str], list[str]]:
    client = connect(url, cluster=True)
    store = RedisEventStore(client, SHARDS)
    try:
        counts: dict[str, int] = defaultdict(int)
        unverified = []
        for room in load.rooms:
            for envelope in await store.read(room):
                counts[envelope.command_id] += 1
            report = await verify_room(store, room)
            if not report.ok:
                unverified.append(room)
        lost = [command_id for command_id in load.acked if counts[command_id] == 0]
        doubled = [command_id for command_id, (_, first, last) in load.acked.items()
                   if counts[command_id] > last - first + 1]
        return lost, doubled, unverified
    finally:
        await client.aclose()


async def _written_after(url: str, keys: Keys, acked: dict[str, tuple[str, int, int]], killed_ms: int
                         ) -> dict[str, int | None]:
    """Of the acknowledged commands ``acked``, those whose write the shard's feed (a refusal: the room's stream of
    refusals) dates after ``killed_ms`` (the entry id's milliseconds, the node's clock), or does not hold (None):
    their ms after the kill."""
    if not acked:
        return {}
    client = connect(url, cluster=True)
    try:
        written: dict[tuple[bytes, int], int] = {}
        for shard in {keys.shard(room) for room, _, _ in acked.values()}:
            for entry_id, fields in await client.xrange(keys.feed(shard)):
                written[(fields[b"r"], int(fields[b"v"]))] = int(entry_id.split(b"-", 1)[0])
        late: dict[str, int | None] = {}
        for command_id, (room, first, _) in acked.items():
            at = written.get((room.encode(), first))
            if at is None:  # a recorded refusal: in the room's stream of refusals
                at = next((int(entry_id.split(b"-", 1)[0]) for entry_id, fields in await client.xrange(
                    keys.rejected(room)) if fields[b"c"] == command_id.encode()), None)
            if at is None or at > killed_ms:
                late[command_id] = None if at is None else at - killed_ms
        return late
    finally:
        await client.aclose()


async def _pending(url: str, keys: Keys) -> dict[int, int]:
    """Per shard, the entries of its command stream delivered to the engine and not acknowledged (if any)."""
    client = connect(url, cluster=True)
    try:
        counts = {shard: (await client.xpending(keys.command_stream(shard), "engine"))["pending"]
                  for shard in range(SHARDS)}
        return {shard: count for shard, count in counts.items() if count}
    finally:
        await client.aclose()


async def _models(url: str) -> dict:
    client = connect(url, cluster=True)
    try:
        return await dump_models(client)
    finally:
        await client.aclose()


OUTAGE_S = 20.0  # the killed primary stays away this long after its replica's promotion
# The longest stretch a shard on a live node may go without an acknowledgement while the primary is away, less
# the time the live nodes refused every key themselves (``ClusterDown``: the Cluster's own failure detection and
# election, 0.7-1.1 s of it here, which a loaded host stretches). Before the fix of issue 28 the other shards took
# nothing from the promotion until the node came back (~20 s); quiet, they stall 1.5-2.5 s, and each stretch
# of a starved host adds to that (a CI host at load 12 saw 5.15 s and 5.9 s with the Cluster's part and a WAIT
# sat out on the promoted node counted in: RedisEventStore._in_doubt now refuses that one at once).
OTHERS_STALL_ALLOWED_S = 5.0
RECOVERY_ALLOWED_S = 10.0  # from the promoted primary's new replica online to each of its shards' next acknowledgement


def _stall_beyond_down(times: list[float], start: float, end: float, down: ClusterDown) -> tuple[float, float, float]:
    """The longest stretch in [start, end] without an acknowledgement less the time the Cluster was seen down in
    it; the longest stretch; when that one began after ``start``."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    gaps = list(zip(inside, inside[1:], strict=False))
    earlier, later = max(gaps, key=lambda gap: gap[1] - gap[0])
    return (max(b - a - down.within(a, b) for a, b in gaps), later - earlier, earlier - start)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_with_durability_replica_a_dead_primary_stalls_its_own_shards_only(tmp_path: Path, layout: str) -> None:
    """Issue 28, item 17. Given ALMANAC_DURABILITY=replica and load on all 16 shards, when a primary is killed and
    stays away (its replica is promoted, and has no replica of its own, so no write of its shards can be
    confirmed): its shards take no command, while every shard on the live nodes keeps taking commands as before
    (the engine used to replay the dead node's pending entries in a tight loop that served no other shard, for as
    long as the node was away: for ever if it never came back). With the node still away (as if gone for good)
    the load stops: the live nodes' shards served to its end and the engine is not stuck, nothing acknowledged
    is lost or doubled, nothing is left pending on the shards that can be written, every room verifies. Then
    the node comes back (here ~25 s after the kill, shorter than the issue's 45-60 s to keep the test bounded;
    the engine's state is steady after a few seconds of outage) and rejoins as the replica, under a second
    load: its shards take commands again, the commands left waiting for a replica are decided (nothing pending
    on any shard), and again nothing acknowledged is lost or doubled. (Both endings in one story: the one
    outage is what they share, and a Cluster and stack started once instead of twice.)"""
    keys = Keys(SHARDS)
    load = Load()
    again = Load(name="back")
    with _stack_on_six_nodes(tmp_path, durable=True, layout=layout) as (cluster, stack, subscription, roles):
        try:
            _a_primary_away(cluster, stack, subscription, roles, keys, load, again)
        finally:
            load.stop.set()
            again.stop.set()


def _a_primary_away(cluster: ReplicatedCluster, stack: ClusterStack, subscription: int,
                    roles: dict[int, int | None], keys: Keys, load: Load, again: Load) -> None:
    from redis.cluster import RedisCluster as SyncCluster  # noqa: PLC0415

    victim, promoted = _victim(subscription, roles)
    nodes = SyncCluster(host="127.0.0.1", port=promoted)
    try:
        on_victim = {shard for shard in range(SHARDS)
                     if nodes.get_node_from_key(keys.command_stream(shard)).port == victim}
    finally:
        nodes.close()
    others = set(range(SHARDS)) - on_victim
    assert on_victim and others

    down = ClusterDown(subscription)  # a primary that stays up (``_victim``)
    try:
        driver, killed_at, promotion_s = _kill_under_load(cluster, stack, keys, load, victim, promoted)
        killed_ms = int(1000 * (time.time() - (time.monotonic() - killed_at)))  # the kill on the nodes' clock
        time.sleep(OUTAGE_S)
    finally:
        down.stop()
    back_at = time.monotonic()

    # 1. The node still away, as if for good: the load stops.
    load.stop.set()
    driver.join(60)
    assert not driver.is_alive(), "the load driver did not stop"
    stalls = {shard: _stall_beyond_down(load.acks_by_shard[shard], killed_at, back_at, down) for shard in others}
    # The dead node's shards' commands answered 200 while it was away, (sent, answered) after the kill. Such an
    # answer is right only for a write the node took, and a replica confirmed, before it died: its outcome's
    # PUBLISH, sent to the dying node, failed and went again once the slot had moved to the promoted replica
    # (seen: two answers 0.25 s after the promotion, their requests sent before the kill). A write taken after
    # the kill could not be confirmed by any replica: none may be answered.
    answered_late = {command_id: (round(sent - killed_at, 2), round(at - killed_at, 2))
                     for command_id, (sent, at) in load.answered.items()
                     if keys.shard(load.acked[command_id][0]) in on_victim and killed_at + 1 < at < back_at}
    confirmed_late = asyncio.run(_written_after(cluster.url, keys, {command_id: load.acked[command_id]
                                                                   for command_id in answered_late}, killed_ms))
    worst = max(stalls, key=lambda shard: stalls[shard][0])
    print(f"\nprimary {victim} killed (shards {sorted(on_victim)}), promotion {promotion_s:.2f} s, away "
          f"{back_at - killed_at:.1f} s; the Cluster seen down (cluster_state:fail) "
          f"{[(round(a - killed_at, 2), round(b - killed_at, 2)) for a, b in down.windows]} s after the kill; "
          f"longest stall of the other shards while it was away "
          f"{_figures({shard: stall for shard, (_, stall, _) in stalls.items()})}, beyond the Cluster down "
          f"{_figures({shard: beyond for shard, (beyond, _, _) in stalls.items()})} (shard {worst}: "
          f"{stalls[worst][1]:.2f} s from {stalls[worst][2]:.2f} s after the kill); answers {dict(load.statuses)} "
          f"{dict(load.codes)}; answered after the kill on its shards, written before it: {len(answered_late)}")
    assert all(load.acks_by_shard[shard] for shard in range(SHARDS)), "a shard had no load"
    # The live nodes' shards kept serving throughout (before the fix: no acknowledgement on any shard from
    # the promotion until the node was back), apart from the seconds every node refused every key.
    assert max(beyond for beyond, _, _ in stalls.values()) <= OTHERS_STALL_ALLOWED_S, stalls
    # The dead node's shards acknowledged nothing no replica could confirm.
    assert not confirmed_late, (confirmed_late, answered_late)
    assert not [status for status in load.statuses if status >= 500 and status != 503], dict(load.statuses)
    lost, doubled, unverified = asyncio.run(_check_log(cluster.url, load))
    print(f"acknowledged {len(load.acked)}, lost {len(lost)}, doubled {len(doubled)}")
    assert not lost and not doubled and not unverified, (lost, doubled, unverified)
    # Nothing is left pending on the shards that can be written (its shards' last commands wait, unanswered
    # and unwritten, for a replica to confirm them).
    _until_none_pending(cluster, keys, others)
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} died: {stack.log(name)}"

    # 2. The node comes back and rejoins as the promoted primary's replica, under a second load.
    again_driver = _start_load(stack, keys, again)
    cluster.restart(victim)
    cluster.wait_replicated(promoted, timeout_s=60)
    replicated_at = time.monotonic()
    # Until each of its shards has taken a command again (at most RECOVERY_ALLOWED_S), then SETTLE_S more.
    _until_every_shard_acked(again, on_victim, replicated_at, deadline=replicated_at + RECOVERY_ALLOWED_S)
    time.sleep(SETTLE_S)
    again.stop.set()
    again_driver.join(60)
    assert not again_driver.is_alive(), "the second load's driver did not stop"
    recovered = {shard: min((at for at in again.acks_by_shard[shard] if at >= replicated_at), default=float("inf"))
                 - replicated_at for shard in on_victim}
    print(f"its replica online {replicated_at - back_at:.1f} s after its return; its shards' first "
          f"acknowledgement after that max {max(recovered.values()):.2f} s; answers {dict(again.statuses)} "
          f"{dict(again.codes)}")
    assert max(recovered.values()) <= RECOVERY_ALLOWED_S, recovered
    assert not [status for status in again.statuses if status >= 500 and status != 503], dict(again.statuses)
    for played in (load, again):
        lost, doubled, unverified = asyncio.run(_check_log(cluster.url, played))
        assert not lost and not doubled and not unverified, (played.name, lost, doubled, unverified)
    print(f"acknowledged after its return {len(again.acked)}, nothing lost or doubled")
    _until_none_pending(cluster, keys, set(range(SHARDS)))
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} died: {stack.log(name)}"


def _until_none_pending(cluster: ReplicatedCluster, keys: Keys, shards: set[int]) -> None:
    """Wait up to 10 s until none of ``shards`` has an entry pending in the engine's group; assert it."""
    deadline = time.monotonic() + 10
    while ((pending := {shard: count for shard, count in asyncio.run(_pending(cluster.url, keys)).items()
                        if shard in shards}) and time.monotonic() < deadline):
        time.sleep(0.2)
    assert not pending, _left_pending(cluster, keys, pending)


def _left_pending(cluster: ReplicatedCluster, keys: Keys, pending: dict[int, int]) -> str:
    """The failure's message for entries left pending: per shard its count, and each entry's id, consumer, idle time
    and deliveries, with its room and command id (the one CI failure said only ``{shard: 1}``)."""
    return f"entries left pending in the engine's group: {pending}; " \
           f"{asyncio.run(_pending_entries(cluster.url, keys, set(pending)))}"


async def _pending_entries(url: str, keys: Keys, shards: set[int]) -> list[dict]:
    client = connect(url, cluster=True)
    try:
        entries = []
        for shard in sorted(shards):
            stream = keys.command_stream(shard)
            for row in await client.xpending_range(stream, "engine", min="-", max="+", count=20):
                found = await client.xrange(stream, row["message_id"], row["message_id"])
                command = (found[0][1] if found else {}).get(b"__data__", b"")
                entries.append({"shard": shard, **row, "command": command[:160]})
        return entries
    finally:
        await client.aclose()
