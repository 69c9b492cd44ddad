"""Reading the shard command streams on a Redis Cluster: one standing XREADGROUP per shard.

A Cluster refuses one XREADGROUP over streams in different slots, so each shard is read on its own.
Waiting for all of those blocking reads would add the idle shards' BLOCK time to every batch (a
command on a busy shard would wait for the quiet ones to time out); instead each shard keeps one
read in flight, and a batch is whatever has answered as soon as any has. Nothing a read delivers is
dropped: it is returned by this call or the next one. Entries of a read still in flight when the
engine stops (or loses the shard) stay pending in the group, and the next holder claims them.
"""

from __future__ import annotations

import asyncio
from typing import Any


class StandingReads:
    def __init__(self, client: Any, group: str, consumer: str, stream_of: Any, count: int, block_ms: int) -> None:
        self.client = client
        self.group = group
        self.consumer = consumer
        self.stream_of = stream_of
        self.count = count
        self.block_ms = block_ms
        self._reads: dict[int, asyncio.Task] = {}

    async def read(self, shards: list[int]) -> list:
        """[(stream, entries)] of the shards' reads that answered; waits up to about ``block_ms``."""
        for shard in shards:
            if shard not in self._reads:
                self._reads[shard] = asyncio.ensure_future(self.client.xreadgroup(
                    self.group, self.consumer, {self.stream_of(shard): ">"}, count=self.count, block=self.block_ms
                ))
        waiting = [self._reads[shard] for shard in shards]
        if waiting:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        replies: list = []
        for shard, task in list(self._reads.items()):
            if not task.done():
                continue
            del self._reads[shard]
            if shard not in shards:
                continue  # no longer ours to process: its entries stay pending for the shard's holder
            replies += task.result() or []  # an error (NOGROUP, connection) goes to the consume loop
        return replies

    async def close(self) -> None:
        reads = list(self._reads.values())
        self._reads.clear()
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
