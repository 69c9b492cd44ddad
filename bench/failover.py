"""`almanac bench failover`: a primary of a 3+3 Redis Cluster killed under load with ALMANAC_DURABILITY=replica.

It starts a Redis Cluster of three primaries each with a replica (``redis_cluster.ReplicatedCluster``: node timeout
2 s, AOF, as the suite's failover stories run it), the stack on it (``supervisor.Stack``, as `almanac up` with
REDIS_URL naming the six nodes and REDIS_CLUSTER=true) with ALMANAC_DURABILITY=replica (each node's appends wait
for one replica's WAIT before a command is acknowledged), and offers ``rate`` commands/s over rooms on every
shard (two lanes a shard, one command in flight each, a 503 sent again with the same command id as a client
does). Once every shard has taken commands it kills -9 one primary (neither the node the gateway's outcome
subscription is on nor that node's replica), keeps it down ``outage_s`` and starts it again (it rejoins as the
promoted replica's replica); ``outage_s`` 0: it never comes back (gone for good). The load goes on ``after_s``
after the restarted node is the promoted one's replica, online (gone for good: after the kill).

Printed: per shard, the commands accepted per second in each ``bucket_s`` window (the windows before the kill are
the same-run baseline), its longest stretch without an acknowledgement from the kill to the end, and that stretch
less the seconds a live node answered ``cluster_state:fail`` (the Cluster's own failure detection and election:
every node refuses every key, CLUSTERDOWN, whatever the engine does); the shards on the killed node apart from the
others. Then the suite's bound (tests/cluster/test_cluster_failover.py: a shard on a live node stalls at most 5 s
beyond the Cluster's down window), whether the killed node's shards took commands again (after the promotion, after
the node's return), the acknowledged commands lost and doubled in the log (both must be 0), rooms that do not
verify, and entries left pending in the engine's group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from redis.cluster import RedisCluster as SyncCluster
from rich.table import Table

from almanac.bench.common import output_console
from almanac.bench.e2e import CHALLENGE, _script, script_ruleset
from almanac.bench.redis_cluster import ClusterDown, ReplicatedCluster
from almanac.services import bootstrap
from almanac.services.forensics.verify import verify_room
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack
from almanac.storage.keys import DEFAULT_PREFIX, Keys

LANES_PER_SHARD = 2  # rooms in play at once on each shard, one command in flight each
RESEND_PAUSE_S = 0.1  # a client answered 503 (or 202: still deciding) sends the same command id again this much later
COMMAND_TIMEOUT_MS = 5_000  # the gateway's outcome wait (the suite's failover stories use the same)
OTHERS_STALL_BOUND_S = 5.0  # the suite's bound: a live node's shard stalls at most this long beyond the Cluster down
# The stack's settings, in this process's environment while it runs (its children inherit them)
ENV = {"ALMANAC_DURABILITY": "replica", "ALMANAC_COMMAND_TIMEOUT_MS": str(COMMAND_TIMEOUT_MS),
       "ALMANAC_LOG_FORMAT": "json"}


class BenchError(Exception):
    """The benchmark cannot run here (no redis-server or redis-cli): one line."""


@dataclass
class Load:
    """What the clients saw: every acknowledged command, every answer, when each shard acknowledged one."""

    shards: int
    acked: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # internal id -> (room, first, last)
    acks_by_shard: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    codes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (answered at, seconds) of each 200
    rooms: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def _room_on(keys: Keys, shard: int, name: str) -> str:
    """``name`` with the first suffix that puts the room on ``shard``."""
    return next(room for room in (f"{name}-{n}" for n in range(10_000)) if keys.shard(room) == shard)


async def _drive(url: str, rate: int, keys: Keys, load: Load) -> None:
    """Two lanes a shard, each playing the scripted game room after room at ``rate`` / lanes commands/s."""
    ruleset = script_ruleset()
    script = await _script(ruleset)
    lanes = LANES_PER_SHARD * load.shards
    period = lanes / rate
    # Idle connections are dropped well before uvicorn's 5 s keep-alive: a request sent on a connection the server
    # is closing at that instant fails with ReadError, the client's race and not an answer of the gateway.
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(keepalive_expiry=1.0)) as http:

        async def post(path: str, body: dict, token: str | None = None) -> httpx.Response | None:
            """Sent again with the same command id until an answer that is neither 503 nor 202 (None: stopped)."""
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            while not load.stop.is_set():
                started = time.monotonic()
                try:
                    answer = await http.post(path, json=body, headers=headers)
                except httpx.TransportError as error:
                    load.codes[f"transport {type(error).__name__}"] += 1
                    await asyncio.sleep(RESEND_PAUSE_S)
                    continue
                load.statuses[answer.status_code] += 1
                if answer.status_code >= 400:
                    load.codes[f"{answer.status_code} {answer.json().get('code')}"] += 1
                if answer.status_code == 200:
                    load.latencies.append((time.monotonic(), time.monotonic() - started))
                if answer.status_code not in (202, 503):
                    return answer
                await asyncio.sleep(RESEND_PAUSE_S)
            return None

        async def lane(number: int) -> None:
            shard = number % load.shards
            game = 0
            while not load.stop.is_set():
                room = _room_on(keys, shard, f"fo-{os.getpid()}-{number}-{game}")
                game += 1
                created = await post("/rooms", {"ruleset": ruleset, "player": "p", "challenge": CHALLENGE,
                                                "room": room, "command_id": f"create-{room}"})
                if created is None or created.status_code != 201:
                    continue
                load.rooms.append(room)
                token = created.json()["token"]
                for move, command in enumerate(script):
                    due = time.monotonic() + period
                    answer = await post(f"/rooms/{room}/commands", {"command": command, "command_id": f"m{move}"},
                                        token)
                    if answer is None:
                        return
                    if answer.status_code == 200:
                        result = answer.json()
                        load.acked[internal_command_id(room, "p", f"m{move}")] = (
                            room, result["first_version"], result["version"])
                        load.acks_by_shard[shard].append(time.monotonic())
                    await asyncio.sleep(max(0.0, due - time.monotonic()))

        await asyncio.gather(*(lane(number) for number in range(lanes)))


def _stall(times: list[float], start: float, end: float, down: ClusterDown) -> tuple[float, float, float]:
    """In [start, end]: the longest stretch without an acknowledgement, when it began (after ``start``), and the
    longest stretch less the seconds the Cluster was seen down within it."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    gaps = list(zip(inside, inside[1:], strict=False))
    earlier, later = max(gaps, key=lambda gap: gap[1] - gap[0])
    return later - earlier, earlier - start, max(b - a - down.within(a, b) for a, b in gaps)


async def _check_log(settings: Settings, load: Load) -> tuple[int, int, int]:
    """Acknowledged commands missing from the log, acknowledged commands in it more than once, rooms that do not
    verify. Read as the stack reads them: the rooms played to their end a minute ago are in the archive by now."""
    client = bootstrap.redis_client(settings, bootstrap.Role.TOOL)
    store = bootstrap.tool_store(client, settings.shard_count, DEFAULT_PREFIX, archive=bootstrap.archive_store(settings))
    try:
        counts: dict[str, int] = defaultdict(int)
        unverified = 0
        for room in load.rooms:
            for envelope in await store.read(room):
                counts[envelope.command_id] += 1
            if not (await verify_room(store, room)).ok:
                unverified += 1
        lost = sum(1 for command_id in load.acked if counts[command_id] == 0)
        doubled = sum(1 for command_id, (_, first, last) in load.acked.items()
                      if counts[command_id] > last - first + 1)
        return lost, doubled, unverified
    finally:
        await client.aclose()


async def _pending(settings: Settings, keys: Keys, shards: int) -> dict[int, int]:
    """Per shard, the entries of its command stream delivered to the engine and not acknowledged (if any)."""
    client = bootstrap.redis_client(settings, bootstrap.Role.TOOL)
    try:
        counts = {shard: (await client.xpending(keys.command_stream(shard), "engine"))["pending"]
                  for shard in range(shards)}
        return {shard: count for shard, count in counts.items() if count}
    finally:
        await client.aclose()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for the block (the stack's children inherit it)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _victim(subscription: int, replicas: dict[int, int | None]) -> tuple[int, int]:
    """The primary to kill and its replica: neither the outcome subscription's node nor that node's replica (the
    gateway's own failover is another story: tests/cluster/test_cluster_failover.py)."""
    victim = next(primary for replica, primary in replicas.items() if subscription not in (primary, replica))
    return victim, next(replica for replica, primary in replicas.items() if primary == victim)  # type: ignore[misc]


def main(outage_s: float = 60.0, after_s: float | None = None, rate: int = 100, engines: int = 0,
         bucket_s: float = 5.0, warmup_s: float = 10.0, logs: Path | None = None,
         sync_delay_s: int | None = None) -> dict[str, Any]:
    """Run the failover (see the module's docstring), print its figures, return them. ``warmup_s``: load before the
    kill (and on until every shard has taken a command), the baseline's windows; ``logs``: a folder the stack's
    logs and the nodes' are copied to at the end (ALMANAC_LOG_LEVEL, warning unless set, says how much they hold),
    to find where a stall came from; ``sync_delay_s``: the nodes' replica sync delay (``ReplicatedCluster``; None:
    Redis's default, as a deployment has it)."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        raise BenchError("the six-node Redis Cluster needs redis-server and redis-cli on PATH")
    after = after_s if after_s is not None else (60.0 if outage_s <= 0 else 20.0)
    console = output_console()
    env = {**ENV, "ALMANAC_LOG_LEVEL": os.environ.get("ALMANAC_LOG_LEVEL", "warning")}
    with tempfile.TemporaryDirectory(prefix="almanac-bench-failover-") as scratch, _environment(env):
        cluster = ReplicatedCluster(Path(scratch) / "nodes", sync_delay_s=sync_delay_s)
        console.print("starting a Redis Cluster of 3 primaries + 3 replicas (cluster-node-timeout 2000 ms) ...")
        try:
            cluster.start()
            settings = bootstrap.settings().model_copy(update={
                "redis_url": cluster.url, "redis_cluster": True, "data_dir": str(Path(scratch) / "stack"),
                "http_port": 0, "durability": "replica"})
            console.print(f"starting the stack on it ({engines or 'no'} engine process(es); the gateway "
                          f"{'holds no shard' if engines else 'decides the commands of the shards it holds'}), "
                          "ALMANAC_DURABILITY=replica ...")
            with Stack(settings, engines=engines, say=console.print) as stack:
                stack.start(timeout_s=90)
                figures = _failover(cluster, stack, settings, outage_s, after, rate, warmup_s)
        finally:
            cluster.stop()
            if logs is not None:
                for log in Path(scratch).rglob("*.log"):
                    target = Path(logs) / log.relative_to(scratch)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(log, target)
    _print(console, figures, bucket_s)
    return figures


def _failover(cluster: ReplicatedCluster, stack: Stack, settings: Settings, outage_s: float, after_s: float,
              rate: int, warmup_s: float) -> dict[str, Any]:
    shards = settings.shard_count
    keys = bootstrap.process_keys(shards)
    health = httpx.get(f"{stack.url}/health", timeout=5).json()
    subscription = int(health["outcomes"]["node"].rsplit(":", 1)[1])
    victim, promoted = _victim(subscription, cluster.roles()["slave"])
    nodes = SyncCluster(host="127.0.0.1", port=promoted)
    try:
        on_victim = sorted(shard for shard in range(shards)
                           if nodes.get_node_from_key(keys.command_stream(shard)).port == victim)
    finally:
        nodes.close()

    load = Load(shards)
    driver = threading.Thread(target=lambda: asyncio.run(_drive(stack.url, rate, keys, load)), daemon=True)
    started = time.monotonic()
    driver.start()
    time.sleep(warmup_s)
    deadline = time.monotonic() + 60
    while not all(load.acks_by_shard[shard] for shard in range(shards)) and time.monotonic() < deadline:
        time.sleep(0.05)
    down = ClusterDown(subscription)  # a node that stays up all along (``_victim``)
    figures: dict[str, Any] = {"victim": victim, "promoted": promoted, "on_victim": on_victim, "shards": shards,
                               "outage_s": outage_s, "after_s": after_s, "rate": rate}
    try:
        killed_at = time.monotonic()
        cluster.kill(victim)
        figures["promotion_s"] = cluster.wait_promoted(promoted, timeout_s=60)
        back_at = replicated_at = None
        if outage_s > 0:
            time.sleep(max(0.0, killed_at + outage_s - time.monotonic()))
            back_at = time.monotonic()
            cluster.restart(victim)
            cluster.wait_replicated(promoted, timeout_s=60)
            replicated_at = time.monotonic()
        time.sleep(max(0.0, (replicated_at or killed_at) + after_s - time.monotonic()))
    finally:
        # The end of the measured time: the load stops being offered now. Its clients then finish the requests in
        # flight, those of a shard that cannot be written waiting out the outcome wait (5 s) while the others send
        # nothing more: that tail would count as every shard's stall (seen: 5.1 s for every live shard).
        ended_at = time.monotonic()
        load.stop.set()
        down.stop()
        driver.join(COMMAND_TIMEOUT_MS / 1000 + 30)
    if driver.is_alive():
        raise RuntimeError("the load's clients did not stop")

    figures["down"] = [(a - killed_at, b - killed_at) for a, b in down.windows]
    figures["stalls"] = {shard: _stall(load.acks_by_shard[shard], killed_at, ended_at, down) for shard in range(shards)}
    figures["timeline"] = {shard: [at - killed_at for at in load.acks_by_shard[shard]] for shard in range(shards)}
    figures["started"], figures["ended"] = started - killed_at, ended_at - killed_at
    figures["back"] = None if back_at is None else back_at - killed_at
    figures["replicated"] = None if replicated_at is None else replicated_at - killed_at
    promoted_at = figures["promotion_s"]
    figures["resumed_after_promotion"] = {
        shard: min((at for at in figures["timeline"][shard] if at >= promoted_at), default=None) for shard in on_victim}
    if back_at is not None:
        figures["resumed_after_return"] = {
            shard: min((at - figures["back"] for at in figures["timeline"][shard] if at >= figures["back"]),
                       default=None) for shard in on_victim}
    steady = sorted(seconds for at, seconds in load.latencies if at < killed_at)
    figures["steady_p50_ms"] = 1000 * statistics.median(steady) if steady else None
    # From the kill until the Cluster is seen down only the live nodes' shards can acknowledge: how late their
    # answers came while the killed node's shards were retried (issue 28 item 17: bunches 1.1-2.2 s late).
    down_at = killed_at + (figures["down"][0][0] if figures["down"] else figures["promotion_s"])
    figures["before_down_s"] = down_at - killed_at
    figures["before_down"] = _percentiles([seconds for at, seconds in load.latencies if killed_at <= at < down_at])
    figures["steady"] = _percentiles(steady)
    figures["statuses"], figures["codes"] = dict(load.statuses), dict(load.codes)
    figures["acked"], figures["rooms"] = len(load.acked), len(load.rooms)
    figures["lost"], figures["doubled"], figures["unverified"] = asyncio.run(_check_log(settings, load))
    # Entries still pending once the engine has had a few seconds: gone for good, the killed node's shards keep
    # their last commands waiting (unanswered, unwritten) for a replica to confirm them.
    deadline = time.monotonic() + 10
    while (pending := asyncio.run(_pending(settings, keys, shards))) and time.monotonic() < deadline:
        time.sleep(0.5)
    figures["pending"] = pending
    # a child that exited: its code and the end of its log (the stack's folder is deleted after the run)
    figures["crashed"] = {name: (child.returncode, (stack.data_dir / f"{name}.log").read_text(errors="replace")[-800:])
                          for name, child in stack.children.items() if child.poll() is not None}
    return figures


def _percentiles(seconds: list[float]) -> str:
    """'n, p50/p90/p99/max ms' of acknowledgement latencies (or '-')."""
    if not seconds:
        return "-"
    ordered = sorted(seconds)
    cut = [ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000 for q in (0.5, 0.9, 0.99, 1.0)]
    return f"{len(ordered)} answers, p50/p90/p99/max {'/'.join(f'{ms:.0f}' for ms in cut)} ms"


def _print(console: Any, figures: dict[str, Any], bucket_s: float) -> None:
    on_victim = set(figures["on_victim"])
    shards = figures["shards"]
    first = -bucket_s * max(1, int(-figures["started"] // bucket_s))
    edges = [edge for n in range(int((figures["ended"] - first) // bucket_s) + 1)
             if (edge := first + bucket_s * n) < figures["ended"] - 0.05]
    table = Table(title=f"Commands accepted per second, per shard, in {bucket_s:g} s windows from the kill "
                        "(the windows before 0 are the baseline)")
    table.add_column("shard", justify="right")
    table.add_column("node")
    for edge in edges:
        table.add_column(f"{edge:+.0f}", justify="right")
    table.add_column("longest stall", justify="right")
    table.add_column("from", justify="right")
    table.add_column("beyond down", justify="right")
    for shard in range(shards):
        times = figures["timeline"][shard]
        # per second of the window the load covered (the last one is cut short where the load stopped)
        cells = [f"{sum(1 for t in times if edge <= t < edge + bucket_s) / covered:.1f}"
                 for edge in edges
                 if (covered := min(edge + bucket_s, figures["ended"]) - max(edge, figures["started"])) > 0]
        stall, began, beyond = figures["stalls"][shard]
        table.add_row(str(shard), "killed" if shard in on_victim else "live", *cells, f"{stall:.2f} s",
                      f"+{began:.2f} s", f"{beyond:.2f} s")
    console.print(table)

    others = {shard: figures["stalls"][shard] for shard in range(shards) if shard not in on_victim}
    own = {shard: figures["stalls"][shard] for shard in on_victim}
    worst = max(others, key=lambda shard: others[shard][2])
    beyond = others[worst][2]
    outage = ("never restarted (gone for good)" if figures["back"] is None else
              f"restarted at +{figures['back']:.1f} s, the promoted node's replica online at "
              f"+{figures['replicated']:.1f} s")
    lines = [
        f"ALMANAC_DURABILITY=replica, {figures['rate']} commands/s offered over {shards} shards "
        f"({LANES_PER_SHARD} rooms in play on each); acknowledgement before the kill p50 "
        + ("-" if figures["steady_p50_ms"] is None else f"{figures['steady_p50_ms']:.1f} ms"),
        f"primary 127.0.0.1:{figures['victim']} killed (-9) at 0 (shards {sorted(on_victim)}); its replica "
        f"127.0.0.1:{figures['promoted']} promoted at +{figures['promotion_s']:.2f} s; {outage}; load to "
        f"+{figures['ended']:.1f} s",
        "the Cluster seen down (cluster_state:fail, every key refused) "
        + (", ".join(f"+{a:.2f}..+{b:.2f} s" for a, b in figures["down"]) or "never"),
        f"acknowledgements before the kill: {figures['steady']}; from the kill to the Cluster down (+0..+"
        f"{figures['before_down_s']:.2f} s, the live nodes' shards only): {figures['before_down']}",
        f"longest stall, shards on live nodes: max {max(s for s, _, _ in others.values()):.2f} s, median "
        f"{statistics.median(s for s, _, _ in others.values()):.2f} s; beyond the Cluster down: max {beyond:.2f} s "
        f"(shard {worst}) -> {'within' if beyond <= OTHERS_STALL_BOUND_S else 'PAST'} the suite's bound "
        f"({OTHERS_STALL_BOUND_S:g} s)",
        f"longest stall, shards on the killed node: max {max(s for s, _, _ in own.values()):.2f} s, min "
        f"{min(s for s, _, _ in own.values()):.2f} s",
    ]
    resumed = figures["resumed_after_promotion"]
    after_promotion = [at for at in resumed.values() if at is not None]
    lines.append(
        f"the killed node's shards after the promotion: {len(after_promotion)} of {len(resumed)} took a command again"
        + (f" (first at +{min(after_promotion):.2f} s, last shard at +{max(after_promotion):.2f} s)"
           if after_promotion else " (no replica can confirm a write on the promoted node until one joins it)"))
    if "resumed_after_return" in figures:
        returned = figures["resumed_after_return"]
        seen = [at for at in returned.values() if at is not None]
        lines.append(f"after the node's return: {len(seen)} of {len(returned)} took a command again"
                     + (f", the last {max(seen):.2f} s after the restart "
                        f"({max(seen) - (figures['replicated'] - figures['back']):.2f} s after its replica was online)"
                        if seen else ""))
    lines += [
        f"answers {figures['statuses']} {figures['codes']}; acknowledged {figures['acked']} in {figures['rooms']} rooms",
        f"acknowledged then lost {figures['lost']}, doubled {figures['doubled']} (both must be 0); rooms that do not "
        f"verify {figures['unverified']}; entries left pending in the engine's group "
        f"{figures['pending'] or 'none'}; processes that exited "
        + (", ".join(f"{name} (code {code}; its log ends: {tail!r})" for name, (code, tail) in figures["crashed"].items())
           or "none"),
    ]
    for line in lines:
        console.print(line, soft_wrap=True)
