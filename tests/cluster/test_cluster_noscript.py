"""Cluster nodes that know no script (promoted replicas, flushed caches): every script path still answers."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from cluster_support import ReplicatedCluster
from suite_settings import suite_settings
from test_cluster_stack import ClusterStack

from almanac.bench.e2e import CHALLENGE, _script, script_ruleset
from almanac.events.envelope import GENESIS_HASH
from almanac.projections.model_writes import COMMIT_SCRIPT, ShardWrites, commit_shard
from almanac.services.engine.dead_letters import DeadLetters
from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.logging import get_logger
from almanac.services.redis_client import connect
from almanac.storage.base import AppendRequest, AppendResult, RejectRequest
from almanac.storage.keys import DEFAULT_PREFIX, Keys, shard_tag
from almanac.storage.redis_store import RedisEventStore, ReplicaWaitError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("clusters"),  # a second Cluster stack beside a failover slows the nodes past their timeout
    pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                       reason="the replicated cluster needs redis-server and redis-cli on PATH"),
]

SHARDS = 16
AT_ONCE = 2  # calls of each path sent together: the second MOVED for a slot is the one that broke the map


def envelopes_for(room: str, first: int, count: int):  # noqa: ANN201 - the store contract's envelopes
    from store.test_store_contract import make_envelopes  # noqa: PLC0415 - the store contract's helper

    return make_envelopes(room, first, count, GENESIS_HASH)


async def new_rooms_written(store: RedisEventStore, keys: Keys, shards: list[int] | range,
                            label: str) -> dict[str, object]:
    """One write batch of a new room on each of ``shards`` (the engine's shape: one call per shard): each room's result."""
    rooms = [next(room for n in range(10_000) if keys.shard(room := f"{label}-{n}") == shard) for shard in shards]
    appended, _ = await store.write_many([AppendRequest(room=room, expected_version=0, command_id=f"c-{room}",
                                                        envelopes=envelopes_for(room, 1, 1)) for room in rooms], [])
    return dict(zip(rooms, appended, strict=True))


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicatedCluster]:
    cluster = ReplicatedCluster(tmp_path_factory.mktemp("noscript-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def every_replica_takes_over(cluster: ReplicatedCluster) -> None:
    """CLUSTER FAILOVER on every replica (the graceful kind: no write is lost), then every node forgets its scripts
    (a Redis that did replicate SCRIPT LOAD to its replicas would otherwise hide the promoted node's empty cache)."""
    roles = cluster.roles()
    for primary in roles["master"]:
        cluster.wait_replicated(primary)  # a manual failover needs the replica in sync
    # A manual failover that does not complete in Redis's own time (its primary slow to answer on a loaded machine)
    # is given up by Redis, the replica left a replica: ask again, up to three times, before waiting for the state.
    waiting = set(roles["slave"])
    for _ in range(3):
        for port in waiting:
            node = redis.Redis(host="127.0.0.1", port=port)
            try:
                node.execute_command("CLUSTER FAILOVER")
            finally:
                node.close()
        asked = time.monotonic()
        while waiting and time.monotonic() - asked < 10:
            waiting -= set(cluster.roles()["master"])
            time.sleep(0.1)
        if not waiting:
            break
    for port in roles["slave"]:
        cluster.wait_promoted(port)
    every_node_forgets_its_scripts(cluster)


def every_node_forgets_its_scripts(cluster: ReplicatedCluster) -> None:
    for port in cluster.alive():
        node = redis.Redis(host="127.0.0.1", port=port)
        try:
            node.script_flush()
        finally:
            node.close()


class ScriptPaths:
    """The product's script-using paths, each on a client of its own (as each runs in its own process: the engine,
    the projector, the gateway, each with its own node map), each run AT_ONCE times together on every node."""

    def __init__(self, url: str) -> None:
        self.clients = {path: connect(url, cluster=True) for path in
                        ("store write", "projector commit", "dead-letter count", "rate limit")}
        self.keys = Keys(SHARDS)
        self.store = RedisEventStore(self.clients["store write"], SHARDS)
        self.commit = self.clients["projector commit"].register_script(COMMIT_SCRIPT)
        self.dead_letters = DeadLetters(self.clients["dead-letter count"], self.keys, DEFAULT_PREFIX, "e1",
                                        get_logger("test"))
        settings = suite_settings(redis_url=url, redis_cluster=True, rate_anon="1000/minute")
        self.limits = RateLimits(settings, self.clients["rate limit"], self.keys)
        self.round = 0

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    async def run(self, shards: list[int] | range, limits: bool = True) -> dict[str, list]:
        """Each path's results on ``shards`` (an exception where a call failed): every key a path touches for a
        shard is in that shard's slot; ``limits`` False leaves out the rate limit (its keys are the addresses')."""
        self.round += 1

        async def write(shard: int) -> object:
            # A new room each round, in the shard (the calls at once: one append, then its duplicates).
            room = next(room for n in range(10_000) if self.keys.shard(room := f"noscript-{self.round}-{n}") == shard)
            request = AppendRequest(room=room, expected_version=0, command_id=f"c-{room}",
                                    envelopes=envelopes_for(room, 1, 1))
            appended, _ = await self.store.write_many([request], [])
            return appended[0]

        async def commit(shard: int) -> None:
            writes = ShardWrites()
            writes.hset(self.keys.versions(shard), f"noscript-{shard}", self.round)
            await commit_shard(self.commit, self.keys.checkpoint(shard), writes, expected=None, new_checkpoint=None,
                               keep_checkpoint=True)

        async def count(shard: int) -> int:
            return await self.dead_letters.attempt(shard, f"{self.round}-0".encode(), "boom")

        async def limit(shard: int) -> None:
            await self.limits.check_address(f"10.0.0.{shard}")

        async def together(call) -> list:  # noqa: ANN001 - an async call of one shard
            return list(await asyncio.gather(*(call(shard) for shard in shards for _ in range(AT_ONCE)),
                                             return_exceptions=True))

        results = {"store write": await together(write), "projector commit": await together(commit),
                   "dead-letter count": await together(count)}
        if limits:
            results["rate limit"] = await together(limit)
        return results


def failures(results: dict[str, list]) -> dict[str, list[str]]:
    return {path: [repr(result) for result in answers if isinstance(result, Exception)]
            for path, answers in results.items() if any(isinstance(result, Exception) for result in answers)}


async def test_every_script_path_survives_promoted_nodes_that_know_no_script(replicated: ReplicatedCluster) -> None:
    """A Cluster replicates no script cache: a replica promoted by a failover knows none of the scripts run by SHA,
    and the clients' node maps still name the old primaries. Two calls for one slot at once each come back MOVED,
    and redis-py 5.3 took the second redirection (to the node it already routed the slot to) for a failover away
    from that node: it marked the promoted node a replica, so its reload (SCRIPT LOAD to the primaries its map
    names) missed exactly that node and every script call there kept failing with NoScriptError (on the old code:
    the dead-letter count here; the rate limiter's too without its own EVAL fallback)."""
    paths = ScriptPaths(replicated.url)
    try:
        assert failures(await paths.run(range(SHARDS))) == {}
        every_replica_takes_over(replicated)
        # Each client's node map still names the old primaries: a path meets a promoted node through MOVED. A path
        # that sends little (one shard's calls here) does not reach redis-py's map refresh (every fifth MOVED).
        assert failures(await paths.run(range(1))) == {}
        # Nor does any client's map now take the node it sends shard 0 to for a replica: redis-py's reload (SCRIPT
        # LOAD to the primaries it names) and every other command for all primaries would miss that node.
        for client in paths.clients.values():
            assert client.get_node_from_key(shard_tag(0)) in client.get_primaries()
        assert failures(await paths.run(range(SHARDS))) == {}  # and every path keeps working on every node
    finally:
        await paths.aclose()


async def test_the_gateway_answers_rate_counted_requests_and_commands_after_the_failover(
        replicated: ReplicatedCluster, tmp_path: Path) -> None:
    """A real gateway (and projector) whose node maps were loaded before every replica took over and every node
    forgot its scripts: anonymous requests (counted by the rate limiter) and commands all succeed, none answered
    5xx but the gateway's load shedding (503 "overloaded", nothing done, sent again)."""
    ruleset = script_ruleset()
    moves = await _script(ruleset)
    stack = ClusterStack(replicated.url, tmp_path)
    for name in ("projector", "gateway"):  # the product's shape: the gateway holds the shards and decides
        stack.start(name)
    statuses: list[tuple[str, int, str]] = []
    try:
        await asyncio.to_thread(stack.wait_healthy)
        async with httpx.AsyncClient(base_url=stack.url, timeout=20) as http:

            async def post(room: str, path: str, body: dict, token: str | None = None) -> httpx.Response:
                """Send until the answer is not the gateway's load shedding (503 "overloaded", which did nothing:
                this shared machine's CPU, not Redis); every answer is kept."""
                while True:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    answer = await http.post(path, json=body, headers=headers)
                    statuses.append((room, answer.status_code, answer.text[:200]))
                    if answer.status_code != 503 or answer.json().get("code") != "overloaded":
                        return answer
                    await asyncio.sleep(0.1)

            async def play(room: str) -> None:
                """Create the room (an anonymous request: the rate limiter counts it), then two of its moves."""
                created = await post(room, "/rooms", {"ruleset": ruleset, "player": "p", "challenge": CHALLENGE,
                                                      "room": room, "command_id": f"create-{room}"})
                if created.status_code == 201:
                    for move in range(2):
                        await post(room, f"/rooms/{room}/commands", {"command": moves[move], "command_id": f"m{move}"},
                                   created.json()["token"])

            await asyncio.gather(*(play(f"before-{index}") for index in range(SHARDS)))
            assert sum(status in (200, 201) for _, status, _ in statuses) == 3 * SHARDS, statuses
            statuses.clear()
            await asyncio.to_thread(every_replica_takes_over, replicated)
            started = time.monotonic()
            await asyncio.gather(*(play(f"after-{index}") for index in range(SHARDS)))
        errors = [line for line in (tmp_path / "gateway.log").read_text(errors="replace").splitlines()
                  if '"level": "error"' in line]
        answered = {(room, status) for room, status, _ in statuses}
        assert [entry for entry in statuses if entry[1] >= 500 and "overloaded" not in entry[2]] == [], errors
        # Every room created and both its moves accepted: three successes each, whatever was shed on the way.
        assert sum(status in (200, 201) for _, status, _ in statuses) == 3 * SHARDS, statuses
        assert {room for room, status in answered if status == 201} == {f"after-{index}" for index in range(SHARDS)}
        assert time.monotonic() - started < 10
    finally:
        stack.stop()


async def test_a_script_whose_node_lost_it_runs_while_another_primary_is_down(replicated: ReplicatedCluster) -> None:
    """redis-py's reload sends SCRIPT LOAD to every primary its map names: while one of them is down (killed, its
    replica not promoted yet) the reload fails, and with it every script call on the live nodes that had lost their
    scripts (restarted without persistence, or promoted earlier): ConnectionError for the whole promotion time (on
    the old code: the store's write, the projector's commit and the dead-letter count). Last in this file: it leaves
    a primary dead."""
    paths = ScriptPaths(replicated.url)
    try:
        assert failures(await paths.run(range(SHARDS), limits=False)) == {}
        every_node_forgets_its_scripts(replicated)  # as after a restart without persistence, or a promotion
        client = paths.clients["dead-letter count"]
        dead = client.get_node_from_key(shard_tag(0)).port
        replicated.kill(dead)
        live = [shard for shard in range(SHARDS) if client.get_node_from_key(shard_tag(shard)).port != dead]
        assert failures(await paths.run(live, limits=False)) == {}
    finally:
        await paths.aclose()


async def test_a_durable_write_runs_where_its_nodes_lost_their_scripts_while_another_primary_is_down(
        tmp_path: Path) -> None:
    """ALMANAC_DURABILITY=replica on a Cluster: each node's writes and their WAIT go in that node's part of one
    pipeline, outside FailoverCluster's fallback (a call resent by its text after the WAIT would not be covered by
    it). On NOSCRIPT the store reloaded its scripts on every primary: while one primary is down (killed, its replica
    not promoted yet) that reload failed, and the whole batch with it, the live nodes' shards included (on the old
    code: ConnectionError). Now those nodes alone load the scripts, run the calls again and WAIT: every write on a
    live node is answered, and is on that node's replica. A Cluster of its own: it leaves a primary dead."""
    cluster = ReplicatedCluster(tmp_path)
    cluster.start()
    client = connect(cluster.url, cluster=True)
    store = RedisEventStore(client, SHARDS, wait_replicas=1)
    keys = Keys(SHARDS)

    try:
        for primary in cluster.roles()["master"]:
            cluster.wait_replicated(primary)
        before = await new_rooms_written(store, keys, range(SHARDS), "durable-before")  # the scripts loaded, every node's WAIT confirmed
        assert [result for result in before.values() if isinstance(result, Exception)] == []
        every_node_forgets_its_scripts(cluster)  # as after a restart without persistence, or a promotion
        dead = client.get_node_from_key(shard_tag(0)).port
        cluster.kill(dead)
        live = [shard for shard in range(SHARDS) if client.get_node_from_key(shard_tag(shard)).port != dead]
        after = await new_rooms_written(store, keys, live, "durable-after")
        assert [result for result in after.values() if isinstance(result, Exception)] == []
        # Each write resent after NOSCRIPT was covered by its own node's WAIT: its replica has it already.
        replica_of = {primary: replica for replica, primary in cluster.roles()["slave"].items()}
        for room in after:
            replica = redis.Redis(host="127.0.0.1", port=replica_of[client.get_node_from_key(keys.events(room)).port],
                                  single_connection_client=True)
            try:
                replica.execute_command("READONLY")  # a Cluster replica answers its primary's keys only so
                assert replica.xlen(keys.events(room)) == 1
            finally:
                replica.close()
    finally:
        await client.aclose()
        cluster.stop()


async def test_a_store_started_while_a_primary_is_down_writes_the_live_nodes_shards(tmp_path: Path) -> None:
    """A new store (an engine or gateway started, or restarted, while a primary is down: killed, its replica not
    promoted yet) loaded its scripts before its first batch with SCRIPT LOAD to every primary its map names: that
    load failed on the dead one, and the whole batch with it, every live node's shards included (on the old code:
    ConnectionError, with ALMANAC_DURABILITY=replica and without). Now nothing is loaded up front on a Cluster:
    each live node that does not know a script loads it alone (or runs it by its text). A Cluster of its own: it
    leaves a primary dead."""
    cluster = ReplicatedCluster(tmp_path)
    cluster.start()
    keys = Keys(SHARDS)
    clients = []

    try:
        for primary in cluster.roles()["master"]:
            cluster.wait_replicated(primary)
        clients.append(mapped := connect(cluster.url, cluster=True))
        await mapped.initialize()
        dead = mapped.get_node_from_key(shard_tag(0)).port
        live = [shard for shard in range(SHARDS) if mapped.get_node_from_key(shard_tag(shard)).port != dead]
        replica = next(port for port, primary in cluster.roles()["slave"].items() if primary == dead)
        cluster.kill(dead)
        for label, wait_replicas in (("durable", 1), ("plain", 0)):
            every_node_forgets_its_scripts(cluster)  # no live node knows them: each must load them (or run the text)
            clients.append(client := connect(cluster.url, cluster=True))  # started after the kill
            store = RedisEventStore(client, SHARDS, wait_replicas=wait_replicas)
            first = await new_rooms_written(store, keys, live, f"fresh-{label}")
            assert [result for result in first.values() if isinstance(result, Exception)] == [], label
            again = await new_rooms_written(store, keys, live, f"fresh-{label}-again")  # and on, as any store's (scripts known now)
            assert [result for result in again.values() if isinstance(result, Exception)] == [], label
        assert replica in cluster.roles()["slave"]  # the story's premise: the dead primary's replica not promoted yet
    finally:
        for client in clients:
            await client.aclose()
        cluster.stop()


async def test_a_resend_whose_wait_fails_leaves_the_writes_its_first_wait_confirmed_answered(tmp_path: Path) -> None:
    """ALMANAC_DURABILITY=replica on a Cluster: a node that knows one script but not another (its cache flushed, one
    loaded again) writes the first batch's appends, refuses its refusal with NOSCRIPT, and WAIT confirms the appends;
    the refusal is sent again with the scripts and WAIT again. When that second WAIT fails (its replica stopped
    between the two sends), only the refusal is unconfirmed: the appends, which the first WAIT confirmed, are answered
    (on the old code: ReplicaWaitError too, the second WAIT judging every call of the node)."""
    cluster = ReplicatedCluster(tmp_path)
    cluster.start()
    client = connect(cluster.url, cluster=True)
    store = RedisEventStore(client, SHARDS, wait_replicas=1, wait_timeout_ms=300)
    keys = Keys(SHARDS)
    stopped: list[int] = []
    try:
        for primary in cluster.roles()["master"]:
            cluster.wait_replicated(primary)
        await client.initialize()
        node = client.get_node_from_key(shard_tag(0))
        shards = [shard for shard in range(SHARDS) if client.get_node_from_key(shard_tag(shard)) is node]
        rooms = [next(room for n in range(10_000) if keys.shard(room := f"judged-{n}") == shard) for shard in shards]
        replica = next(port for port, primary in cluster.roles()["slave"].items() if primary == node.port)
        primary_node = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            primary_node.script_flush()
            primary_node.script_load(store._append_many.script)  # the appends' script known, the refusals' not
        finally:
            primary_node.close()
        send = store._send_waited

        async def replica_stops_before_the_resend(calls, nodes, load=False):  # noqa: ANN001, ANN202 - as wrapped
            if load:  # the resend (the scripts loaded first): its WAIT finds no replica answering
                os.kill(cluster.processes[replica].pid, signal.SIGSTOP)
                stopped.append(replica)
            return await send(calls, nodes, load)

        store._send_waited = replica_stops_before_the_resend  # type: ignore[method-assign]
        refused_room = next(room for n in range(10_000) if keys.shard(room := f"judged-refused-{n}") == shards[0])
        refused = RejectRequest(room=refused_room, command_id="no", error={"code": "x", "message": "no"},
                                record=b"refused")
        appended, rejected = await store.write_many(
            [AppendRequest(room=room, expected_version=0, command_id=f"c-{room}", envelopes=envelopes_for(room, 1, 1))
             for room in rooms], [refused])
        assert stopped == [replica]  # the resend happened, its replica stopped
        assert isinstance(rejected[0], ReplicaWaitError)  # the second WAIT's call: unconfirmed
        assert [type(result) for result in appended] == [AppendResult] * len(rooms)  # the first WAIT's calls
    finally:
        for port in stopped:
            os.kill(cluster.processes[port].pid, signal.SIGCONT)
        await client.aclose()
        cluster.stop()
