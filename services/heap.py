"""How often an almanac process collects cyclic garbage: one setting for every process that serves or loads."""

from __future__ import annotations

import gc

# CPython's defaults (700, 10, 10) start a collection every few commands: a batch allocates thousands of
# objects that live until it is answered, each young collection frees nothing and promotes them, and the
# full collections then walk every module, rule-set and schema of the process again. Reference counting
# frees almost everything here; the collector is left for cycles, far less often.
THRESHOLDS = (50_000, 20, 100)


def collect_less_often() -> None:
    """Set ``THRESHOLDS``: the CLI's ``main`` for every ``almanac`` process, and the benchmarks' own children
    (started by multiprocessing or ``python -m``, not through ``main``), so that they measure what runs.

    Measured: ``almanac bench e2e --rate 1000 --seconds 8``, alternated, four runs each: p99 39-90 ms and
    16-162 commands shed with the defaults, 10-52 ms and none shed with these, at the same CPU. An engine
    draining 40,000 commands spent 0.28-0.40 s in the collector with the defaults, 0.01 s with a young
    generation of 50,000 (docs/capacity.md, eighth pass). Freezing the start-up heap as well (``gc.freeze``) measured no gain
    beyond these thresholds, so it is not done.
    """
    gc.set_threshold(*THRESHOLDS)
