"""The shards' command streams as the engine uses them (read, acknowledge, publish outcomes), on one Redis or a Cluster.

The engine (services/engine/shard_engine.py) runs one room-step loop whatever Redis it is given; what differs
between one server and a Cluster lives here, chosen once by the client's class (``command_streams``), as the
store (storage/redis_store.py) hides the difference of its writes:

- Reading. One Redis: one XREADGROUP over every held shard, the previous batch's outcomes and acknowledgements
  in front of it in the same round trip, or the read that left with the last batch's writes on the engine's
  own connection (storage.raw_connection.BatchConnection). A Cluster refuses one XREADGROUP over streams of
  different slots: a standing read per shard (storage.cluster_command_reads.StandingReads).
- Sending what is done (outcomes to PUBLISH, entries to XACK). One Redis: one pipeline, all or nothing (kept
  for the next round trip on failure). A Cluster: one pipeline split by node; a dead node's part stays unsent.
- Failures. One Redis: Redis's failure is every shard's (``isolates`` is False; the engine's round fails and
  backs off, doubling). A Cluster: one node's failure is its shards' only (``isolates``): those shards wait out
  a backoff of their own (``ready``, ``fail``) while the others are read and answered.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from almanac.storage.cluster_command_reads import StandingReads
from almanac.storage.keys import Keys
from almanac.storage.raw_connection import BatchConnection, stream_reply
from almanac.storage.redis_errors import CLUSTER_ERRORS, redis_failure

GROUP = "engine"  # the engines' consumer group on every command stream
# A round's pause after Redis was unreachable doubles up to this (one Redis; a Cluster paces by shard).
MAX_BACKOFF_S = 5.0

Entry = tuple[int, bytes, dict]  # (shard, entry id, fields)


class CommandStreams:
    """What both kinds share: the streams' names, what is done and not yet sent, and a takeover's reads."""

    # Whether the engine may decide the commands its own process's gateway hands in (Engine.decide_here):
    # only on one Redis, where each handed-in write is one script call on the gateway's pipelined line and
    # a Redis failure is every shard's; on a Cluster they take the stream, whose failures are per shard.
    decides_in_process = True
    # Whether a shard's takeover runs apart from the loop that serves the others (Engine._take_over_apart): on a
    # Cluster, where one node's failure is its shards' only; on one Redis a failure is every shard's, and the
    # takeovers run in the loop, one after another, before the next read.
    takes_over_apart = False

    def __init__(self, client: Any, keys: Keys, consumer: str, batch_size: int, block_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.batch_size = batch_size
        self.block_ms = block_ms
        # Every shard's command stream named once, both ways: a batch of one command at a low rate used to
        # name and parse them all again (a third of the engine's Python calls per command at 500/s).
        self.names = [keys.command_stream(shard) for shard in range(keys.shard_count)]
        self._shard_of_name: dict[str | bytes, int] = {}
        for shard, name in enumerate(self.names):
            self._shard_of_name[name] = self._shard_of_name[name.encode()] = shard
        # Outcomes to publish, (shard, channel, message), and entries to acknowledge by shard: sent with the
        # next read or after the batch (``send_done``); kept after a failed send, for the next one (a repeat
        # is harmless: a late PUBLISH has no waiter, XACK is idempotent).
        self.outcomes: list[tuple[int, str, bytes]] = []
        self.acks: dict[int, list[bytes]] = defaultdict(list)
        # After each read: shards read while not asked for (what they delivered is pending; only a takeover
        # re-reads it), and shards whose read failed alone (a Cluster node), with the failure.
        self.orphaned: set[int] = set()
        self.failed: dict[int, BaseException] = {}

    def shard_of(self, stream: str | bytes) -> int:
        return self._shard_of_name[stream]  # every stream read is one of ``self.names``

    def entries(self, reply: list | None) -> list[Entry]:
        return [(self._shard_of_name[stream], entry_id, fields) for stream, entries in reply or []
                for entry_id, fields in entries]

    def publish(self, shard: int, channel: str, message: bytes) -> None:
        self.outcomes.append((shard, channel, message))

    def ack(self, shard: int, entry_id: bytes) -> None:
        self.acks[shard].append(entry_id)

    @property
    def unsent(self) -> bool:
        return bool(self.outcomes or self.acks)

    def _sent(self) -> None:
        self.outcomes, self.acks = [], defaultdict(list)

    # --- a takeover (the same on both) ----------------------------------------------------------------

    async def create_group(self, shard: int) -> None:
        """The engines' group on the shard's stream, from its start (the stream created if need be)."""
        try:
            await self.client.xgroup_create(self.names[shard], GROUP, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise

    async def stuck(self, shards: list[int], idle_ms: int) -> list[int]:
        """Those of ``shards`` whose group holds an entry delivered at least ``idle_ms`` ago and not acknowledged (to
        any consumer): a delivery nobody is deciding, which only a takeover replays."""
        found = await asyncio.gather(*(self.client.xpending_range(self.names[shard], GROUP, "-", "+", 1, idle=idle_ms)
                                       for shard in shards), return_exceptions=True)
        return [shard for shard, pending in zip(shards, found, strict=True)
                if pending and not isinstance(pending, BaseException)]

    async def claim_pending(self, shard: int) -> int:
        """Claim for this consumer every entry pending in the shard's group; how many."""
        cursor, claimed = "0-0", 0
        while True:
            # Not JUSTID: redis-py drops the cursor from a JUSTID reply.
            reply = await self.client.xautoclaim(self.names[shard], GROUP, self.consumer, 0, start_id=cursor,
                                                 count=1000)
            cursor = reply[0]
            claimed += len(reply[1])
            if cursor in (b"0-0", "0-0"):
                return claimed

    async def read_pending(self, shard: int) -> list[Entry]:
        """The next batch of this consumer's pending entries of the shard (none left: [])."""
        reply = await self.client.xreadgroup(GROUP, self.consumer, {self.names[shard]: "0"}, count=self.batch_size)
        return [(shard, entry_id, fields) for entry_id, fields in (reply[0][1] if reply else [])]

    # --- what differs ---------------------------------------------------------------------------------

    async def read(self, held: list[int]) -> list[Entry]:
        """New entries of the held shards (waits up to about ``block_ms``); sets ``orphaned`` and ``failed``."""
        raise NotImplementedError

    async def send_done(self) -> bool:
        """Send the outcomes and acknowledgements not yet sent; True when a send left some unsent (a Cluster
        node's part failed; on one Redis a failed send raises and keeps them all)."""
        raise NotImplementedError

    async def after_batch(self, read_ahead: bool) -> bool:
        """A batch was processed (``read_ahead``: the next batch was read and decided ahead of its writes): send
        what is done now if it cannot ride on the next read. As ``send_done``."""
        raise NotImplementedError

    def isolates(self, error: BaseException) -> bool:
        """Whether ``error`` fails only the shard it happened on (which then waits, ``fail``), not the round."""
        return False

    def ready(self, shard: int) -> bool:
        """False while the shard waits out the backoff of its own failure."""
        return True

    def fail(self, shard: int, error: BaseException) -> None:
        """A call for this shard failed alone (``isolates``): its reads back off."""

    def next_backoff(self, backoff: float) -> float:
        """The round's pause after the next Redis failure, given this one's."""
        return min(backoff * 2, MAX_BACKOFF_S)

    async def drop_read(self) -> tuple[int, ...]:
        """Forget the read in flight and drop the engine's connection (its state is unknown after an error):
        the shards that read was of (what it delivered stays pending: only a takeover re-reads it)."""
        return ()

    async def drop_shard_read(self, shard: int) -> None:
        """Forget the shard's own read in flight, before its takeover (a Cluster: StandingReads.drop)."""

    @property
    def reading(self) -> tuple[int, ...] | None:
        """The shards of the read that left with the last writes, its reply not yet read; or None."""
        return None

    async def close(self) -> None:
        """Drop the reads in flight and the engine's connection."""


class OneRedisStreams(CommandStreams):
    """One Redis server: one read over every held shard, the writes and the next read in one send."""

    def __init__(self, client: aioredis.Redis, keys: Keys, consumer: str, batch_size: int, block_ms: int) -> None:
        super().__init__(client, keys, consumer, batch_size, block_ms)
        self._connection = BatchConnection(client)
        # The read's stream arguments for the last set of shards read (it changes with the leases only).
        self._read_for: tuple[list[int], dict[str, str], tuple] = ([], {}, ())

    @property
    def reading(self) -> tuple[int, ...] | None:
        return self._connection.reading

    async def read(self, held: list[int]) -> list[Entry]:
        # One read over every held shard: bigger batches, fewer round trips. The previous batch's outcomes
        # and acknowledgements travel in front of it, in the same round trip: Redis publishes them the
        # moment it reads them, so no client waits longer for its answer.
        self.orphaned = set()
        if self._connection.reading is not None:
            # The read that left with the last batch's last write: its reply is all that is awaited.
            return await self.read_in_flight(held)
        streams = self._read_streams(held)[0]
        if self.unsent:
            async with self.client.pipeline(transaction=False) as pipe:
                self._queue_done(pipe)
                pipe.xreadgroup(GROUP, self.consumer, streams, count=self.batch_size, block=self.block_ms)
                reply = (await pipe.execute())[-1]
            self._sent()
        else:
            # Nothing to carry (the append scripts published and acknowledged): no pipeline machinery.
            reply = await self.client.xreadgroup(GROUP, self.consumer, streams, count=self.batch_size,
                                                 block=self.block_ms)
        return self.entries(reply)

    async def read_in_flight(self, held: list[int]) -> list[Entry]:
        """The reply of the read in flight, without the entries of shards not in ``held`` (set in ``orphaned``:
        what was read of them stays pending for their next holder, which may be this engine again, its lease
        renewed late: then only a takeover re-reads it)."""
        reply = stream_reply(await self._connection.reply())
        self._connection.reading = None
        shard_of = self._shard_of_name
        self.orphaned = {shard_of[stream] for stream, entries in reply if entries} - set(held)
        return self.entries([(stream, entries) for stream, entries in reply if shard_of[stream] in held])

    def _read_streams(self, held: list[int]) -> tuple[dict[str, str], tuple]:
        """XREADGROUP's streams for ``held``: as redis-py takes them ({stream: ">"}) and as arguments."""
        shards, streams, arguments = self._read_for
        if held != shards:
            names = [self.names[shard] for shard in held]
            streams = dict.fromkeys(names, ">")
            arguments = ("STREAMS", *names, *[">"] * len(names))
            self._read_for = (list(held), streams, arguments)
        return streams, arguments

    async def send_with_read(self, commands: list[tuple], shards: list[int], ahead: bool) -> None:
        """Send ``commands`` (a batch's last writes) and, when ``shards``, the next read of them in ONE send on
        the engine's own connection: in front of the writes without BLOCK when ``ahead`` (its batch is decided
        while Redis applies them), else behind them with BLOCK. The read's reply: ``read_in_flight``."""
        if shards:
            wait = () if ahead else ("BLOCK", self.block_ms)
            read = ("XREADGROUP", "GROUP", GROUP, self.consumer, "COUNT", self.batch_size, *wait,
                    *self._read_streams(shards)[1])
            commands.insert(0 if ahead else len(commands), read)
        await self._connection.send(*commands)
        if shards:
            self._connection.reading = tuple(shards)

    async def write_replies(self, count: int) -> list:
        """The replies of ``count`` script calls sent on the engine's connection (an error reply kept as such)."""
        replies: list = []
        for _ in range(count):  # every reply is read, errors too, so the read's reply comes next
            try:
                replies.append(await self._connection.reply())
            except ResponseError as error:  # NOSCRIPT among them: the store writes it again
                replies.append(error)
        return replies

    def _queue_done(self, pipe: Any) -> None:
        for _, channel, message in self.outcomes:
            pipe.execute_command("PUBLISH", channel, message)
        for shard, ids in self.acks.items():
            pipe.xack(self.names[shard], GROUP, *ids)

    async def _send_pipeline(self) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            self._queue_done(pipe)
            await pipe.execute()
        self._sent()

    async def send_done(self) -> bool:
        if self.unsent:
            await self._send_pipeline()
        return False

    async def after_batch(self, read_ahead: bool) -> bool:
        if (self._connection.reading is not None or read_ahead) and self.unsent:
            # The next read already left (with the last write): what the scripts did not publish goes now.
            await self._send_pipeline()
        return False

    async def drop_read(self) -> tuple[int, ...]:
        shards = self._connection.reading or ()
        await self._connection.reset()
        return shards

    async def close(self) -> None:
        await self._connection.reset()


class ClusterStreams(CommandStreams):
    """A Redis Cluster: a standing read per shard, what is done sent per node, one node's failure its shards'."""

    decides_in_process = False
    takes_over_apart = True

    def __init__(self, client: Any, keys: Keys, consumer: str, batch_size: int, block_ms: int) -> None:
        super().__init__(client, keys, consumer, batch_size, block_ms)
        self._reads = StandingReads(client, GROUP, consumer, self.names.__getitem__, batch_size, block_ms)

    async def read(self, held: list[int]) -> list[Entry]:
        reply = await self._reads.read(held)
        self.orphaned, self.failed = self._reads.orphaned, self._reads.failed
        return self.entries(reply)

    async def drop_shard_read(self, shard: int) -> None:
        await self._reads.drop(shard)

    def isolates(self, error: BaseException) -> bool:
        # Not the command's failure (no attempt counted): its node is down, or refuses writes.
        return redis_failure(error)

    def ready(self, shard: int) -> bool:
        return self._reads.ready(shard)

    def fail(self, shard: int, error: BaseException) -> None:
        self._reads.fail(shard, error)

    def next_backoff(self, backoff: float) -> float:
        # A failed write is one node's (the others answer): the per-shard takeovers and read backoffs pace
        # the retries, so no growing pause for every shard.
        return backoff

    async def after_batch(self, read_ahead: bool) -> bool:
        return await self.send_done()  # reads are per shard (no pipeline to ride on): send them now

    async def send_done(self) -> bool:
        """One Cluster pipeline; what fails (a dead node's part) stays unsent, the rest is sent.

        Each outcome is published on the node of its room's shard, which has just taken the append: a
        channel named by the command id would hash to any node, and a dead one would hold back the
        answers of rooms on live nodes (a Cluster forwards a PUBLISH to every node's subscribers).
        """
        if not self.unsent:
            return False
        outcomes, acks = self.outcomes, self.acks
        self._sent()
        async with self.client.pipeline(transaction=False) as pipe:
            for shard, channel, message in outcomes:
                try:
                    node = self.client.get_node_from_key(self.names[shard])
                except CLUSTER_ERRORS:
                    node = None  # the slot has no known primary: routed by the channel's own slot
                pipe.execute_command("PUBLISH", channel, message, **({"target_nodes": node} if node is not None else {}))
            for shard, ids in acks.items():
                pipe.xack(self.names[shard], GROUP, *ids)
            results = await pipe.execute(raise_on_error=False)
        for sent, result in zip(outcomes, results, strict=False):
            if isinstance(result, Exception):
                self.outcomes.append(sent)
        for (shard, ids), result in zip(acks.items(), results[len(outcomes):], strict=False):
            if isinstance(result, Exception):
                self.acks[shard].extend(ids)
        return self.unsent

    async def close(self) -> None:
        await self._reads.close()


def command_streams(client: Any, keys: Keys, consumer: str, batch_size: int, block_ms: int) -> CommandStreams:
    """The command streams on ``client`` (built by services.bootstrap: one Redis, or a Cluster with REDIS_CLUSTER)."""
    kind = OneRedisStreams if isinstance(client, aioredis.Redis) else ClusterStreams
    return kind(client, keys, consumer, batch_size, block_ms)

