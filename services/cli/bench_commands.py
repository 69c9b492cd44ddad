"""`almanac bench ...`: benchmarks that print figures and the ratio to a baseline measured in the same run.

The benchmarks themselves are the ``almanac-bench`` distribution (the repository's ``bench/`` folder), never in
the runtime wheel: each command imports its module when run, and says how to install it when it is missing.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import typer

from almanac.events import registry
from almanac.services import bootstrap
from almanac.services.cli import app
from almanac.services.cli.common import bootstrapped, fail, settings_or_exit
from almanac.services.supervisor import StackError

BENCH_RATE = "1000/second"  # the limits' defaults before they became a deployment's (2026-12-06): figures compare
INSTALL_HINT = ("the benchmarks are not installed (they are not part of the almanac wheel): from a checkout of the "
                "repository, pip install -e ./bench")

bench_app = typer.Typer(help="Benchmarks: figures with a baseline measured in the same run (pip install -e ./bench).",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.callback()
def bench_rate_limits() -> None:
    """A benchmark's load comes from one address and offers each seat far more than a person sends: its stacks count
    the rate limits as a deployment does (the seat's window in the submit script) but at 1,000 a second, which it
    never reaches, unless the environment names them (ALMANAC_RATE_ANON, ALMANAC_RATE_COMMANDS)."""
    for name in ("ALMANAC_RATE_ANON", "ALMANAC_RATE_COMMANDS"):
        if not os.environ.get(name):  # unset or empty (which the settings read as unset)
            os.environ[name] = BENCH_RATE


def bench_module(name: str) -> ModuleType:
    """``almanac.bench.<name>``, or one line saying how to install the benchmarks."""
    try:
        return importlib.import_module(f"almanac.bench.{name}")
    except ModuleNotFoundError as error:
        if error.name not in ("almanac.bench", f"almanac.bench.{name}"):
            raise
        raise fail(INSTALL_HINT) from None


def run_on_redis(name: str, *args: object, pass_settings: bool = False) -> None:
    """``almanac.bench.<name>``'s ``main`` on a Redis it may fill and flush (``bootstrap.scratch_redis_url``: REDIS_URL,
    else a throwaway one, never a deployment's), given its URL, or (``pass_settings``) the settings pointed at it,
    then ``args``."""
    main = bench_module(name).main
    settings = settings_or_exit(own_data_dir=True)
    with contextlib.ExitStack() as scratch:
        url = bootstrapped(lambda: scratch.enter_context(bootstrap.scratch_redis_url(settings)))
        main(settings.model_copy(update={"redis_url": url}) if pass_settings else url, *args)


@contextlib.contextmanager
def stack_errors() -> Iterator[None]:
    """A benchmark's own stack that does not start: one line (the child's log tail), not a traceback."""
    try:
        yield
    except StackError as error:
        raise fail(str(error)) from None


@bench_app.command("store")
def bench_store(events: int = typer.Option(100_000, min=1_000, help="Events to append and replay.")) -> None:
    """Raw pipelined XADD (baseline) against our batched and single appends, reads and replay."""
    run_on_redis("store", events)


@bench_app.command("clock")
def bench_clock(
    pending: int = typer.Option(100_000, min=1_000, help="Deadlines pending in the shards' sets."),
    due: int = typer.Option(5_000, min=100, help="How many of them fall due during the run."),
    seconds: float = typer.Option(10.0, min=1.0, help="Over how long they fall due."),
) -> None:
    """Deadline lateness (p50/p99) and the clock's CPU per deadline sent, against pipelined XADD."""
    run_on_redis("clock", pending, due, seconds)


@bench_app.command("idle")
def bench_idle(seconds: float = typer.Option(60.0, min=1.0, help="Length of each measured window."),
               runs: int = typer.Option(3, min=1, max=50, help="Windows measured, one after another.")) -> None:
    """An idle default stack's CPU per second, per process (embedded Redis), against idle Python processes."""
    main = bench_module("idle").main

    with stack_errors():
        main(settings_or_exit(own_data_dir=True), seconds, runs)


@bench_app.command("rules")
def bench_rules(
    name: str = typer.Argument(..., help="Rule-set name (see GET /rulesets); its manifest's bench scenario is played."),
    seconds: float = typer.Option(None, min=0.01, help="How long to play games (default: the scenario's)."),
) -> None:
    """Pure rule speed of one rule-set (no Redis), from the bench scenario its manifest offers."""
    rules = bench_module("rules")

    if name not in registry.names():
        raise fail(f"unknown rule-set {name!r}; choose one of {', '.join(registry.names())}")
    try:
        rules.main(name, seconds)
    except rules.BenchError as error:
        raise fail(str(error)) from None


@bench_app.command("engine")
def bench_engine(
    rooms: int = typer.Option(200, min=1, help="Rooms to spread commands over."),
    commands: int = typer.Option(20_000, min=100, help="Commands to send in all."),
) -> None:
    """Commands per second through the engine and projector, against raw pipelined XADD."""
    run_on_redis("engine", rooms, commands)


@bench_app.command("e2e")
def bench_e2e(
    rate: int = typer.Option(500, min=1, help="Offered load, commands per second."),
    seconds: int = typer.Option(10, min=1, help="How long to offer it."),
    engines: int = typer.Option(
        0, min=0, max=16,
        help="0 (the product's shape): the gateways decide the commands of the shards they hold. N: gateways that "
             "hold no shard (ALMANAC_ENGINE_SHARDS=none) and N `almanac engine` processes (shard groups), to compare."),
    gateways: int = typer.Option(1, min=1, max=16, help="Gateway processes to start (connections spread over them)."),
    route_by_shard: bool = typer.Option(
        False, "--route-by-shard",
        help="Send each command to the gateway holding its room's shard (with --engines 0), not in turn."),
    out_of_step: bool = typer.Option(
        False, "--out-of-step",
        help="Spread the rooms over the game's moves, as in real play (rooms played partway before the clock), "
             "instead of every room on the same move."),
    overload: float = typer.Option(
        0.0, "--overload", min=0.0,
        help="Then offer this many times the achieved rate (the capacity, when --rate is at or past it) on the "
             "same stack, in windows interleaved with capacity windows, and print each one's goodput against the "
             "capacity measured on either side of it, with the CPU and load of each window (e.g. 3)."),
    deadline_ms: int = typer.Option(
        1_000, "--deadline-ms", min=1,
        help="With --overload: goodput counts the commands accepted within this long of their scheduled send."),
    pin: bool | None = typer.Option(
        None, "--pin/--no-pin",
        help="Run the stack it starts and its own load generator on disjoint CPUs (with 2 or more); by default with "
             "--overload only, where the generator's flood would otherwise take its CPU from the stack."),
    peer: bool = typer.Option(
        False, "--peer",
        help="Then offer the same schedule to boardgame.io's server (needs node and npm: installs its pinned "
             "version from the npm registry once) and print its latency and CPU per move beside Almanac's."),
) -> None:
    """HTTP -> engine -> events -> answer round trips at a fixed offered load, against a bare PING."""
    main = bench_module("e2e").main

    with stack_errors():
        main(rate=rate, seconds=seconds, engines=engines, gateways=gateways, route_by_shard=route_by_shard,
             out_of_step=out_of_step, peer=peer, overload=overload, deadline_ms=deadline_ms,
             pin=pin)


@bench_app.command("refusal")
def bench_refusal(
    seconds: float = typer.Option(4.0, min=0.5, help="Length of each server's window."),
    rounds: int = typer.Option(3, min=1, max=50, help="Rounds: each server measured once a round, in turn."),
    connections: int = typer.Option(64, min=1, max=1_024, help="Keep-alive connections, one request at a time each."),
    against: str | None = typer.Option(
        None, "--against",
        help="Also the guard of another checkout, alternated with this one: a folder holding it as almanac/ "
             "(e.g. git archive main | tar -x -C PATH/almanac), put on the server's PYTHONPATH."),
    pin: bool = typer.Option(True, "--pin/--no-pin", help="Servers and the load on disjoint CPUs (with 2 or more)."),
    rate: int = typer.Option(0, min=0, help="0: each connection a closed loop. N: N requests/s on schedule, open loop "
                                            "(every server offered the same arrivals)."),
) -> None:
    """The gateway's CPU per command the connection guard refuses as overloaded, against bare uvicorn and a floor."""
    bench_module("refusal").main(seconds=seconds, rounds=rounds, connections=connections, against=against, pin=pin,
                                 rate=rate)


@bench_app.command("scaling")
def bench_scaling(
    rate: int = typer.Option(1_500, min=1, help="Offered load, commands per second, in every layout."),
    seconds: int = typer.Option(6, min=1, help="How long to offer it in each layout."),
) -> None:
    """The same load through 1 and 2 engine processes and 1 and 2 gateways, side by side."""
    main = bench_module("scaling").main

    with stack_errors():
        main(rate=rate, seconds=seconds)


@bench_app.command("errors")
def bench_errors(count: int = typer.Option(2_000, min=100, help="Requests of each kind.")) -> None:
    """What a bad request (400, 404, 422, 500) costs the gateway's event loop, against GET /rulesets."""
    run_on_redis("bad_requests", count, pass_settings=True)


@bench_app.command("bots")
def bench_bots(moves: int = typer.Option(2_000, min=10, max=1_000_000, help="Moves timed per rule-set.")) -> None:
    """A seat bot's decision time per move from the seat's view, against the full-state policy (same run)."""
    bench_module("bots").main(moves)


@bench_app.command("webhooks")
def bench_webhooks(rooms: int = typer.Option(2_000, min=100, help="Deliveries of the backlog (throughput)."),
                   rate: int = typer.Option(100, min=1, help="Rooms ending per second while latency is measured."),
                   seconds: int = typer.Option(5, min=1, help="How long rooms end at that rate."),
                   slow_s: float = typer.Option(0.0, min=0, max=60, help="Then, if above 0: a second subscriber "
                                                "answering after this many seconds, and a healthy one's latency."),
                   slow_rooms: int = typer.Option(100, min=1, help="Rooms ended at once with the slow subscriber."),
                   ) -> None:
    """The notifier's deliveries/s against bare POSTs to the same receiver (same run), and latency p50/p99."""
    run_on_redis("webhooks", rooms, rate, seconds, slow_s, slow_rooms, pass_settings=True)


@bench_app.command("live")
def bench_live(feeds: int = typer.Option(1_000, min=10, help="Live feeds (distinct seats) to hold open."),
               requests: int = typer.Option(300, min=100, help="Another client's requests, with and without.")) -> None:
    """Open live feeds: another client's GET p50/p99 against none open (same run), Redis clients, gateway RSS."""
    main = bench_module("live").main

    with stack_errors():
        main(settings_or_exit(own_data_dir=True), feeds, requests)


@bench_app.command("signing")
def bench_signing(rounds: int = typer.Option(3, min=1, max=50, help="Pairs of windows (unsigned, signed), alternated."),
                  rooms: int = typer.Option(16, min=1, max=1_000, help="Realm rooms played to the end per window."),
                  clients: int = typer.Option(8, min=1, max=256, help="Closed-loop clients per window.")) -> None:
    """Signed seats against unsigned seats end to end: commands/s and CPU per command, alternated in one run."""
    main = bench_module("signing").main

    with stack_errors():
        main(settings_or_exit(own_data_dir=True), rounds, rooms, clients)


@bench_app.command("forensics-tools")
def bench_forensics_tools(
    events: int = typer.Option(10_000, min=200, help="Versions of the realm room to build."),
    snapshot_every: int = typer.Option(100, min=1, help="Snapshot interval while building (bisect loads from them)."),
) -> None:
    """explain, bisect (binary, linear, --against), fork and diff on one realm room, against folding it once."""
    run_on_redis("forensics_tools", events, snapshot_every)


@bench_app.command("forensics")
def bench_forensics(events: int = typer.Option(10_000, min=100, help="Events in the room.")) -> None:
    """Dispute bundle export and offline verification of a long room, against folding it once (no Redis)."""
    main = bench_module("dispute_bundles").main

    main(events)


@bench_app.command("commitments")
def bench_commitments(
    events: int = typer.Option(400, min=20, help="Events of each rule-set's bench game (or its natural end)."),
    seconds: float = typer.Option(3.0, min=0.1, help="CPU seconds of alternating rounds per rule-set."),
) -> None:
    """Commitment head per event, scheme v2 (now and as first landed) against v1, per rule-set (no Redis)."""
    bench_module("commitments").main(events, seconds)


@bench_app.command("faststream")
def bench_faststream(
    count: int = typer.Option(20_000, min=100, help="Messages per run."),
    rounds: int = typer.Option(3, min=1, help="Runs of each path, alternated."),
) -> None:
    """A FastStream subscriber's CPU per message on an outcome channel and a shard feed, against redis-py's reads."""
    run_on_redis("faststream", count, rounds)


@bench_app.command("layouts")
def bench_layouts(
    rooms: int = typer.Option(20_000, min=10, help="Rooms of two seats for the seat keys' layouts."),
) -> None:
    """Redis bytes per seat-key room and per command id of each key layout, in the same run."""
    run_on_redis("layouts", rooms)


@bench_app.command("streams")
def bench_streams(
    runs: int = typer.Option(3, min=1, help="Runs; the settings take turns within each (the order rotates)."),
    short: int = typer.Option(1_000, min=1, help="Short rooms (realm@1: created, joined, a move, a refusal) an arm."),
    typical: int = typer.Option(400, min=1, help="Typical rooms (realm@1 played to its end) an arm."),
    long: int = typer.Option(4, min=1, help="Long rooms (the trivial rule-set) an arm."),
    long_commands: int = typer.Option(2_000, min=10, help="Commands in each long room."),
    entries: int = typer.Option(20_000, min=1_000, help="XADDs an arm for the cost figures."),
) -> None:
    """Redis bytes per room and XADD/XRANGE cost at each stream-node-max-bytes (4096, 2048, 1024, 512), one run."""
    run_on_redis("streams", runs, short, typical, long, long_commands, entries)


@bench_app.command("lifecycle")
def bench_lifecycle(
    rooms: int = typer.Option(20_000, min=10, help="Rooms to play to their end (20,000: the soak; fewer to be quick)."),
    wave: int = typer.Option(500, min=1, help="Rooms played at once before the projector and the archiver run."),
    max_connections: int = typer.Option(64, min=0, help="The bench's Redis connections at most (0: unbounded, as "
                                        "redis-py's default pool; each open connection holds buffers in Redis)."),
) -> None:
    """Rooms to their end with the archiver on: Redis memory, bytes per command, archive rate, archived reads."""
    run_on_redis("lifecycle", rooms, wave, max_connections)


@bench_app.command("failover")
def bench_failover(
    outage_s: float = typer.Option(60.0, "--outage-s", min=0.0, max=600.0,
                                   help="Seconds the killed primary stays down before it is started again "
                                        "(0: never: gone for good)."),
    after_s: float = typer.Option(None, "--after-s", min=1.0, max=600.0,
                                  help="Seconds of load after the restarted node is a replica again, online (gone "
                                       "for good: after the kill); "
                                       "default 20, or 60 with --outage-s 0."),
    rate: int = typer.Option(100, min=16, max=2_000, help="Commands per second offered over all 16 shards."),
    engines: int = typer.Option(0, min=0, max=4, help="0 (the product's shape): the gateway decides the commands; N: "
                                "N `almanac engine` processes and a gateway that holds no shard."),
    bucket_s: float = typer.Option(5.0, "--bucket-s", min=0.5, max=60.0,
                                   help="Width of the accepted-per-second windows printed per shard."),
    warmup_s: float = typer.Option(10.0, "--warmup-s", min=1.0, max=600.0,
                                   help="Seconds of load before the kill: the baseline's windows."),
    logs: str = typer.Option(None, "--logs",
                              help="Copy the stack's and the nodes' logs to this folder at the end (ALMANAC_LOG_LEVEL "
                                   "says how much they hold; warning unless set)."),
) -> None:
    """A primary of a 3+3 Redis Cluster killed -9 under load, ALMANAC_DURABILITY=replica: per shard stalls and rates."""
    failover = bench_module("failover")

    try:
        with stack_errors():
            failover.main(outage_s=outage_s, after_s=after_s, rate=rate, engines=engines, bucket_s=bucket_s,
                          warmup_s=warmup_s, logs=Path(logs) if logs else None)
    except failover.BenchError as error:
        raise fail(str(error)) from None
