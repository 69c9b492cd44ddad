"""How an almanac process collects cyclic garbage: how often, what it leaves out, and how long each collection stops it."""

from __future__ import annotations

import bisect
import gc
import time

import structlog

from almanac.events import registry

# CPython's defaults (700, 10, 10) start a collection every few commands: a batch allocates thousands of
# objects that live until it is answered, each young collection frees nothing and promotes them, and the
# full collections then walk every module, rule-set and schema of the process again. Reference counting
# frees almost everything here; the collector is left for cycles, far less often.
THRESHOLDS = (50_000, 20, 100)

# Upper bounds (seconds) of the pause buckets: a young collection of 50,000 objects stopped a gateway for
# 20-46 ms on this project's VMs, a full one over the start-up heap for 160-215 ms.
PAUSE_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


def collect_less_often() -> None:
    """Set ``THRESHOLDS``: the CLI's ``main`` for every ``almanac`` process, and the benchmarks' own children
    (started by multiprocessing or ``python -m``, not through ``main``), so that they measure what runs.

    Measured: ``almanac bench e2e --rate 1000 --seconds 8``, alternated, four runs each: p99 39-90 ms and
    16-162 commands shed with the defaults, 10-52 ms and none shed with these, at the same CPU. An engine
    draining 40,000 commands spent 0.28-0.40 s in the collector with the defaults, 0.01 s with a young
    generation of 50,000 (docs/capacity.md, eighth pass).
    """
    gc.set_threshold(*THRESHOLDS)


def freeze_startup_heap() -> None:
    """Leave what the process built to start (modules, schemas, rule-sets, the app: ~110,000 objects in a
    gateway) out of every later collection: a service calls this once, when it is ready to serve.

    Those objects live as long as the process, yet each older-generation collection walked them all again:
    a full collection of a gateway after a load took 160-215 ms, 21.6 ms with them frozen (docs/capacity.md,
    ninth pass). It saves no CPU worth measuring (collections are rare at ``THRESHOLDS``); it shortens the
    pauses, and a pause is every in-flight command's latency.
    """
    load_installed_rulesets()
    gc.collect()
    gc.freeze()


def load_installed_rulesets() -> None:
    """Import every installed rule-set version now, with its tables, so that they are part of the start-up heap.

    The registry loads a rule-set when it is first asked for it: in a gateway that was its first command, after
    the freeze. Board's placement table alone is ~37,000 tuples, which then sat in the young generation and
    were walked by the next collections (a young collection of 43,500 objects after the freeze; docs/capacity.md,
    tenth pass). A rule-set that fails to load is logged and left to fail where it is used, as it did before:
    the service still serves the others.
    """
    log = structlog.get_logger("almanac.heap")
    try:
        names = registry.installed()
    except Exception as error:  # noqa: BLE001 - reported again, to the request, where the registry is used
        log.warning("rulesets_not_loaded_at_start", error=f"{type(error).__name__}: {error}")
        return
    for name in names:
        try:
            registry.versions(name)
        except Exception as error:  # noqa: BLE001 - as above, for this rule-set only
            log.warning("ruleset_not_loaded_at_start", ruleset=name, error=f"{type(error).__name__}: {error}")


class CollectorPauses:
    """Every collection of this process and how long it stopped it, by generation: counted by one
    ``gc.callbacks`` hook installed on first use (``pauses()``), read by the services' metrics."""

    def __init__(self) -> None:
        generations = range(3)
        # Per generation: pauses per bucket (the last: longer than the longest bound), and their total length.
        self.buckets = {generation: [0] * (len(PAUSE_BUCKETS_S) + 1) for generation in generations}
        self.seconds = dict.fromkeys(generations, 0.0)
        self._started = 0.0

    def cumulative(self, generations: range | tuple[int, ...] = range(3)) -> list[int]:
        """Pauses up to each bound of ``PAUSE_BUCKETS_S`` and in all (the last), over ``generations``: the
        cumulative buckets Prometheus histograms want."""
        running, counts = 0, []
        for hits in zip(*(self.buckets[generation] for generation in generations), strict=True):
            running += sum(hits)
            counts.append(running)
        return counts

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        paused = time.perf_counter() - self._started
        generation = info["generation"]
        self.buckets[generation][bisect.bisect_left(PAUSE_BUCKETS_S, paused)] += 1
        self.seconds[generation] += paused


_PAUSES: CollectorPauses | None = None


def pauses() -> CollectorPauses:
    """This process's collector pauses, counted from the first call on."""
    global _PAUSES  # noqa: PLW0603 - one hook per process: the collector is the process's
    if _PAUSES is None:
        _PAUSES = CollectorPauses()
        gc.callbacks.append(_PAUSES._callback)  # noqa: SLF001 - installed once, here
    return _PAUSES
