"""Waiting for command outcomes on ONE pattern subscription per gateway process (the bus contract's channels).

``services.bus.submit_and_wait`` opens a pub/sub connection and sends SUBSCRIBE and UNSUBSCRIBE for each
command; on these 2-core machines every socket write is expensive, and those round trips made the
gateway the busiest process of the stack. One PSUBSCRIBE to ``alm:outcome:*`` at start costs nothing per
command and cannot race the engine's PUBLISH. The price: every gateway process receives every outcome
(and drops those it is not waiting for), which is right for one to a few gateways.

On a Redis Cluster the asyncio cluster client of redis-py (5.3) has no pub/sub; but a Cluster
broadcasts every PUBLISH to all its nodes, so a plain client subscribed on any one node receives
every outcome, wherever the engine published it. The waiter takes the cluster's default node.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection

from almanac.services import bus
from almanac.services.gateway.errors import overloaded
from almanac.services.logging import get_logger
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.keys import Keys

log = get_logger("almanac.gateway.outcomes")
OUTCOME_PATTERN = bus.outcome_channel("*")


class OutcomeWaiter:
    def __init__(self, client: aioredis.Redis, keys: Keys, max_waiters: int = 1_024) -> None:
        self.client = client
        self.keys = keys
        self.max_waiters = max_waiters  # command ids waited for at once; past it, 503 overloaded
        self._node_client: aioredis.Redis | None = None  # a Cluster: a plain client on one node, for pub/sub
        self.pubsub = None if isinstance(client, RedisCluster) else client.pubsub()
        self._waiting: dict[bytes, _InFlight] = {}
        self._reader: asyncio.Task | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        if self.pubsub is None:
            self._node_client = await node_client(self.client)  # type: ignore[arg-type]
            self.pubsub = self._node_client.pubsub()
        await self.pubsub.psubscribe(OUTCOME_PATTERN)
        self._reader = asyncio.create_task(self._read_forever())
        # Commands wait for the confirmation: an outcome published before it would be lost.
        await asyncio.wait_for(self._ready.wait(), 10)

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        with contextlib.suppress(Exception):
            if self.pubsub is not None:
                await self.pubsub.aclose()
        if self._node_client is not None:
            with contextlib.suppress(Exception):
                await self._node_client.aclose()

    async def _read_forever(self) -> None:
        while True:
            try:
                message = await self.pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a dropped connection: redis-py reconnects and subscribes again
                log.warning("outcomes.read_failed", error=str(error))
                await asyncio.sleep(0.1)
                continue
            if message is None:
                continue
            if message["type"] == "pmessage":
                entry = self._waiting.get(message["channel"])
                if entry is not None and not entry.future.done():
                    entry.future.set_result(message["data"])
            elif message["type"] == "psubscribe":
                self._ready.set()

    async def submit_and_wait(self, record: CommandRecord, timeout_s: float, admit: bool = True) -> Outcome | None:
        """The command's outcome, or None when none came within ``timeout_s`` (check by command id).

        Past ``max_waiters`` waits a new command is refused (503 ``overloaded``) before it is submitted,
        unless ``admit`` is False (the follow-up of a request whose first command already counted).

        Requests carrying the same command id while it is in flight here share one submission and one
        future, but each waits on its own clock (``asyncio.wait`` never cancels the shared future: one
        waiter's timeout must not end another's wait). A waiter that did not submit receives the outcome
        marked ``duplicate``: its own request was never decided, it is a replay of the first. So is the
        submitter's, when the events answering it were decided from an earlier record of the same id (the
        engine publishes each record's outcome on the id's channel; the first message may be the earlier's).
        """
        channel = bus.outcome_channel(record.command_id).encode()
        entry = self._waiting.get(channel)
        submitter = entry is None
        if entry is None:
            if admit and len(self._waiting) >= self.max_waiters:  # refused before submitting: nothing was done
                raise overloaded(f"{len(self._waiting)} outcomes awaited in this gateway process")
            entry = self._waiting[channel] = _InFlight(asyncio.get_running_loop().create_future())
        entry.waiters += 1
        try:
            if submitter:
                await bus.submit(self.client, self.keys, record)
            done, _ = await asyncio.wait((entry.future,), timeout=timeout_s)
            if not done:
                return None
            outcome = bus.decode_outcome(entry.future.result())
            if outcome.duplicate or (submitter and decided_from(outcome, record)):
                return outcome
            return msgspec.structs.replace(outcome, duplicate=True)
        finally:
            entry.waiters -= 1
            if entry.waiters == 0 and self._waiting.get(channel) is entry:
                del self._waiting[channel]


def decided_from(outcome: Outcome, record: CommandRecord) -> bool:
    """True unless the outcome's events were appended for another record of the same command id (their
    server time is the record's stamp). A refusal carries no events: it grants nothing, so it counts as ours."""
    if not outcome.accepted or not outcome.envelopes:
        return True
    first = outcome.envelopes[0]
    return first.command_id == record.command_id and first.server_time_ms == record.server_time_ms


class _InFlight:
    """One command id in flight in this process: the future its outcome resolves, and how many wait on it."""

    __slots__ = ("future", "waiters")

    def __init__(self, future: asyncio.Future) -> None:
        self.future = future
        self.waiters = 0


async def node_client(cluster: RedisCluster) -> aioredis.Redis:
    """A plain client on the Cluster's default node, with the cluster client's connection settings."""
    await cluster.initialize()
    node = cluster.get_default_node()
    accepted = inspect.signature(aioredis.Redis.__init__).parameters
    settings = {key: value for key, value in node.connection_kwargs.items() if key in accepted}
    if issubclass(node.connection_class, SSLConnection):
        settings["ssl"] = True
    return aioredis.Redis(**settings)
