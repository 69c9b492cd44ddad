"""Engine counters and a latency histogram, flushed as deltas into a Redis hash the gateway reads."""

from __future__ import annotations

import bisect
from collections import defaultdict

from almanac.services.heap import PAUSE_BUCKETS_S, pauses

# Upper bounds (ms) of the latency buckets, from the command's server stamp to its published outcome.
LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# Upper bounds (ms) of a room's trip back from the archive (an idle room's first command waits for it).
RESTORE_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class EngineMetrics:
    """Counts in memory; ``pending_deltas()`` hands what changed since the last flush."""

    def __init__(self) -> None:
        # defaultdicts, not Counters: counted several times per command, and half the cost.
        self._unflushed: defaultdict[str, int] = defaultdict(int)
        self.totals: defaultdict[str, int] = defaultdict(int)
        self._bucket_hits = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self._restore_hits = [0] * (len(RESTORE_BUCKETS_MS) + 1)
        # The process's collector pauses (services.heap), flushed as deltas of what was flushed before.
        self._pauses = pauses()
        self._pauses_flushed: dict[str, int] = self._pause_totals()  # from here on: not the process's earlier ones
        # Every bucket and collector series is one from the first flush on (at 0), as Prometheus histograms are: a series that
        # appears only once something lands in it breaks rate() and makes two engines' label sets differ by
        # chance (a collector pause in one of them).
        self._buckets_declared = False

    def count(self, field: str, amount: int = 1) -> None:
        self._unflushed[field] += amount
        self.totals[field] += amount

    def observe_latency(self, latency_ms: int) -> None:
        latency_ms = max(latency_ms, 0)
        self.count("latency_ms_sum", latency_ms)
        self.count("latency_count")
        self._bucket_hits[bisect.bisect_left(LATENCY_BUCKETS_MS, latency_ms)] += 1

    def observe_restore(self, latency_ms: float) -> None:
        """A room brought back from the archive (storage.restore) and how long its command waited for it."""
        latency_ms = max(latency_ms, 0.0)
        self.count("rooms_restored")
        self.count("restore_us_sum", round(latency_ms * 1000))
        self._restore_hits[bisect.bisect_left(RESTORE_BUCKETS_MS, latency_ms)] += 1

    def pending_deltas(self) -> dict[str, int]:
        # Cumulative buckets, as Prometheus expects them: latency_le_5 counts every observation up to 5 ms.
        running = 0
        for index, bound in enumerate(LATENCY_BUCKETS_MS):
            running += self._bucket_hits[index]
            self.count(f"latency_le_{bound}", running)
        self._bucket_hits = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        running = 0
        for index, bound in enumerate(RESTORE_BUCKETS_MS):
            running += self._restore_hits[index]
            self.count(f"restore_le_{bound}", running)
        self._restore_hits = [0] * (len(RESTORE_BUCKETS_MS) + 1)
        self.count("rooms_restored", 0)
        self.count("restore_us_sum", 0)
        for field, total in self._pause_totals().items():
            self.count(field, total - self._pauses_flushed.get(field, 0))
            self._pauses_flushed[field] = total
        declare, self._buckets_declared = not self._buckets_declared, True
        deltas = {field: amount for field, amount in self._unflushed.items() if amount or declare}
        self._unflushed.clear()
        return deltas

    def unsent(self, deltas: dict[str, int]) -> None:
        """``deltas`` (from ``pending_deltas``) could not be written: they go with the next flush (which declares
        every field again, in case these were the first)."""
        for field, amount in deltas.items():
            self._unflushed[field] += amount
        self._buckets_declared = False

    def _pause_totals(self) -> dict[str, int]:
        """Collections by generation, their pauses in microseconds, and cumulative pause buckets (ms), so far."""
        totals: dict[str, int] = {}
        for generation, seconds in self._pauses.seconds.items():
            totals[f"gc_collections_gen{generation}"] = self._pauses.cumulative((generation,))[-1]
            totals[f"gc_pause_us_gen{generation}"] = round(seconds * 1_000_000)
        for bound, count in zip(PAUSE_BUCKETS_S, self._pauses.cumulative(), strict=False):
            totals[f"gc_pause_le_{bound * 1000:g}ms"] = count
        return totals
