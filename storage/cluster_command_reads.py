"""The shards' command streams read on a Redis Cluster: one standing XREADGROUP per shard (ClusterStreams).

A Cluster refuses one XREADGROUP over streams in different slots, so each shard is read on its own.
Waiting for all of those blocking reads would add the idle shards' BLOCK time to every batch (a
command on a busy shard would wait for the quiet ones to time out); instead each shard keeps one
read in flight, and a batch is whatever has answered as soon as any has. Nothing a read delivers is
dropped: it is returned by this call or the next one. Entries of a read still in flight when the
engine stops (or loses the shard) stay pending in the group, and the next holder claims them.

A read that answers while its shard is not among those asked for (the lease was not safely held at that
moment: a renewal late during a failover) is not processed, but what it delivered is now pending under
this consumer, and a ``>`` read never delivers it again: the shard is reported in ``orphaned`` and the
engine takes it over before reading it again (its takeover replays the pending entries). Seen in
failovers: commands delivered that way sat pending, unanswered, until their client resent them.

A failed read (its node died, the slot moved, a failover is under way) fails its shard only: the read
is dropped, the shard is reported in ``failed`` (the engine takes it over again, since a lost answer
leaves delivered entries pending), and its next read waits a per-shard backoff, while the other
shards' reads go on. redis-py's cluster client refreshes its slot map after such an error, so the
re-created read goes to the promoted replica once the Cluster has one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.exceptions import TimeoutError as RedisTimeoutError

# A failed shard's next read waits this long, doubling per consecutive failure up to the cap: a dead
# node refuses at once, and retrying it in a tight loop would only disturb the live shards' reads.
RETRY_FIRST_S = 0.05
RETRY_CAP_S = 1.0
# A read still unanswered this long after its BLOCK ended is given up (cancelled) and its shard fails as
# above. Seen in failovers: a read sent while the slot moved to the promoted replica went unanswered, and
# its shard took no command until the test ended (the other shards' reads answered meanwhile).
OVERDUE_S = 1.0


class StandingReads:
    def __init__(self, client: Any, group: str, consumer: str, stream_of: Any, count: int, block_ms: int) -> None:
        self.client = client
        self.group = group
        self.consumer = consumer
        self.stream_of = stream_of
        self.count = count
        self.block_ms = block_ms
        self._reads: dict[int, asyncio.Task] = {}
        self._started: dict[int, float] = {}  # shard -> monotonic time its read in flight was sent
        self._retry_at: dict[int, float] = {}  # shard -> monotonic time its next read may start
        self._failures: dict[int, int] = {}  # shard -> consecutive failed reads
        self.failed: dict[int, BaseException] = {}  # shards whose read failed in the last call, and why
        # Shards whose read answered in the last call while not asked for: it may have delivered entries
        # (now pending under this consumer) that were not returned; they need a takeover before a read.
        self.orphaned: set[int] = set()

    async def read(self, shards: list[int]) -> list:
        """[(stream, entries)] of the shards' reads that answered; waits up to about ``block_ms``.

        Shards whose read failed are in ``failed`` after the call; the others' replies are returned.
        """
        self.failed = {}
        self.orphaned = set()
        now = time.monotonic()
        for shard in shards:
            if shard not in self._reads and self._retry_at.get(shard, 0.0) <= now:
                self._reads[shard] = asyncio.ensure_future(self.client.xreadgroup(
                    self.group, self.consumer, {self.stream_of(shard): ">"}, count=self.count, block=self.block_ms
                ))
                self._started[shard] = now
        waiting = [self._reads[shard] for shard in shards if shard in self._reads]
        if waiting:
            overdue_at = min(self._started[shard] for shard in shards if shard in self._reads) + self.block_ms / 1000 \
                + OVERDUE_S
            await asyncio.wait(waiting, timeout=max(0.0, overdue_at - time.monotonic()),
                               return_when=asyncio.FIRST_COMPLETED)
            self._give_up_overdue(shards)
        else:  # every shard is waiting out its backoff
            await asyncio.sleep(max(0.0, min(self._retry_at[shard] for shard in shards) - now) if shards else 0)
        replies: list = []
        for shard, task in list(self._reads.items()):
            if not task.done():
                continue
            del self._reads[shard]
            if shard not in shards:
                # Not ours to process now. What it delivered stays pending (for another holder's takeover,
                # or ours): unless it surely delivered nothing, the shard is taken over before its next read.
                if task.cancelled() or task.exception() is not None or task.result():
                    self.orphaned.add(shard)
                continue
            error = task.exception()
            if error is None:
                self._failures.pop(shard, None)
                self._retry_at.pop(shard, None)
                replies += task.result() or []
            else:
                self._shard_failed(shard, error)
        return replies

    def _give_up_overdue(self, shards: list[int]) -> None:
        """Cancel the reads unanswered OVERDUE_S past their BLOCK: each fails its shard with a timeout (a
        delivered entry whose reply is lost stays pending, and the shard's takeover re-reads it)."""
        late = time.monotonic() - self.block_ms / 1000 - OVERDUE_S
        for shard in shards:
            task = self._reads.get(shard)
            if task is not None and not task.done() and self._started[shard] <= late:
                task.cancel()
                del self._reads[shard]
                self._shard_failed(shard, RedisTimeoutError(f"the read of shard {shard} went unanswered"))

    def _shard_failed(self, shard: int, error: BaseException) -> None:
        """Drop the shard's read; its next one starts after a backoff that grows with consecutive failures."""
        count = self._failures.get(shard, 0) + 1
        self._failures[shard] = count
        delay = 0.0 if count == 1 else min(RETRY_FIRST_S * 2 ** (count - 2), RETRY_CAP_S)
        self._retry_at[shard] = time.monotonic() + delay
        self.failed[shard] = error

    async def drop(self, shard: int) -> None:
        """Forget the shard's read in flight, if any (cancelled, or answered and not yet returned): what it
        delivered stays pending, for the shard's takeover, which drops it first. Left standing while the takeover
        runs apart (Engine._take_over_apart), it could answer after the takeover's last pending read and be
        reported ``orphaned`` while the takeover is still under way: its entries then pending, unread, with
        the shard taken over."""
        task = self._reads.pop(shard, None)
        self._started.pop(shard, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def fail(self, shard: int, error: BaseException) -> None:
        """Another call for this shard failed (e.g. its takeover): back its reads off like a failed read."""
        self._shard_failed(shard, error)

    def ready(self, shard: int) -> bool:
        """False while the shard waits out the backoff of a failure."""
        return self._retry_at.get(shard, 0.0) <= time.monotonic()

    async def close(self) -> None:
        reads = list(self._reads.values())
        self._reads.clear()
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
