"""The cyclic garbage collector of a long-running service process: its start-up heap frozen out of view."""

from __future__ import annotations

import gc

# Net allocations of container objects between two collections of the young generation (CPython's default:
# 700). A batch of commands allocates thousands that live until the batch is answered: at 700 the collector
# ran several times a batch, found nothing to free and moved the batch's objects to the older generations,
# whose collections then walked them again.
YOUNG_COLLECTION_AT = 50_000


def settle_heap() -> None:
    """Called by a service's command (``almanac engine``, ``gateway``, ``projector``) once its modules are
    loaded, never by library code: it changes the whole process (a test's too).

    Once a process has started (modules, rule-sets, schemas, clients), freeze that heap out of the cyclic
    collector's view: it lives as long as the process and holds no garbage, yet each full collection walked
    all of it again; and collect the young generation less often (``YOUNG_COLLECTION_AT``). An engine
    draining a backlog spent 0.3-0.4 s in the collector per 40,000 commands, freeing nothing; 0.01 s after
    this (docs/capacity.md, eighth pass)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_AT, *gc.get_threshold()[1:])
