"""The collector: what a ready service leaves out of it, how long each collection stopped the process, and a
load generator that does not stop to collect while it measures."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import weakref

from game_modules import game_package

from almanac.bench.e2e import _no_collection_while_offering
from almanac.services.engine.metrics import EngineMetrics
from almanac.services.gateway.metrics import GatewayMetrics
from almanac.services.heap import PAUSE_BUCKETS_S, freeze_startup_heap, pauses


class _Node:
    """A weak-referenceable object to build a reference cycle with."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_ready_service_leaves_its_start_up_heap_out_of_every_later_collection():
    assert gc.get_freeze_count() == 0
    built_at_start = _Node()
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 1_000  # modules, functions, schemas: everything this process built so far
        assert not any(item is built_at_start for item in gc.get_objects())  # no collection walks it again
        # What comes later is collected as always: a cycle made now is freed by the next collection.
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        alive = weakref.ref(first)
        del first, second
        gc.collect()
        assert alive() is None
    finally:
        gc.unfreeze()


def test_each_collection_is_counted_with_its_pause_in_its_generation():
    counted = pauses()
    before = (counted.cumulative((2,))[-1], counted.seconds[2], counted.cumulative()[-1])
    gc.collect()
    assert counted.cumulative((2,))[-1] == before[0] + 1
    assert counted.seconds[2] > before[1]
    assert counted.cumulative()[-1] >= before[2] + 1  # every generation's
    assert len(counted.buckets[2]) == len(PAUSE_BUCKETS_S) + 1  # the last bucket: longer than a second


def test_the_gateway_exports_the_pauses_as_a_histogram_and_the_frozen_heap_as_a_gauge():
    metrics = GatewayMetrics()
    gc.collect()
    text = metrics.render()
    count = float(re.search(r'^almanac_gc_pause_seconds_count\{generation="2"\} (\S+)$', text, re.M).group(1))
    infinite = float(re.search(r'^almanac_gc_pause_seconds_bucket\{generation="2",le="\+Inf"\} (\S+)$', text,
                               re.M).group(1))
    assert count >= 1 and infinite == count
    assert re.search(r"^almanac_gc_frozen_objects 0\.0$", text, re.M)  # nothing frozen in this test process


def test_the_engine_flushes_its_own_pauses_as_counter_deltas():
    pauses()  # counting in this process from now on
    gc.collect()  # a pause of this process before the engine was made: not the engine's to report
    metrics = EngineMetrics()
    first = metrics.pending_deltas()  # every series declared at 0, none of the earlier pause counted
    assert first["gc_collections_gen2"] == 0 and first["gc_pause_le_1000ms"] == 0 and first["latency_le_5"] == 0
    assert not any(amount for field, amount in first.items() if field.startswith("gc_"))
    gc.collect()
    gc.collect()
    deltas = metrics.pending_deltas()
    assert deltas["gc_collections_gen2"] >= 2  # and any the collector started on its own meanwhile
    assert deltas["gc_pause_us_gen2"] > 0
    # cumulative buckets: every pause under a second is in the 1,000 ms one (on a loaded machine the scheduler can
    # stretch a collection past a second of wall time: then it is only in +Inf, and its microseconds show it)
    assert deltas.get("gc_pause_le_1000ms", 0) >= 2 or deltas["gc_pause_us_gen2"] >= 1_000_000
    assert "gc_collections_gen2" not in metrics.pending_deltas()  # flushed once, then only what changed


def test_the_load_generator_does_not_collect_while_it_offers_the_load_and_collects_after():
    assert gc.isenabled()
    with _no_collection_while_offering():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0  # what existed before the load is not walked by a later collection
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_load_generator_leaves_the_collector_as_it_found_it():
    gc.disable()
    try:
        with _no_collection_while_offering():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: still off
    finally:
        gc.enable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _no_collection_while_offering():
            assert gc.get_freeze_count() == frozen  # frozen by someone else: not frozen again
        assert gc.get_freeze_count() == frozen  # nor unfrozen
    finally:
        gc.unfreeze()


def test_a_ready_service_has_loaded_every_installed_rule_set_before_it_froze_its_heap():
    """Given a fresh process that has loaded no rule-set yet, when it freezes its start-up heap, then every
    installed rule-set is loaded and its tables (board's placements) are frozen, not left to the young
    generation of the first commands."""
    board_rules = f"{game_package('board@1')}.rules"
    probe = (
        "import gc, sys\n"
        "from importlib import import_module\n"
        "from almanac.services.heap import freeze_startup_heap\n"
        f"assert {board_rules!r} not in sys.modules\n"
        "freeze_startup_heap()\n"
        f"assert {board_rules!r} in sys.modules\n"
        f"rules = import_module({board_rules!r})\n"
        "table = next(iter(rules._IN_MAP.values()))\n"
        "assert not any(item is table for item in gc.get_objects())\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
