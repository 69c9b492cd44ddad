"""Waiting for command outcomes on ONE subscription per gateway process (the bus contract's channels).

A wait per command (the tests' ``outcome_bus.submit_and_wait``) opens a pub/sub connection and sends SUBSCRIBE and UNSUBSCRIBE for each
command; on these 2-core machines every socket write is expensive, and those round trips made the
gateway the busiest process of the stack. Here each gateway process subscribes once, at start, to its own
reply channel (``alm:reply:<random id>``) and names it in every command it submits (``bus.submit(reply=)``):
the engine publishes each outcome there, so a gateway receives its own commands' outcomes and no others,
however many gateways share the store (with one pattern subscription to every outcome, N gateways each
received and dropped the outcomes of the other N-1). The pattern subscription to ``alm:outcome:*`` stays
beside it for entries without a reply channel (an engine of an earlier release during a rolling upgrade);
it receives nothing otherwise.

On a Redis Cluster the asyncio cluster client of redis-py (5.3) has no pub/sub; but a Cluster
broadcasts every PUBLISH to all its nodes, so a plain client subscribed on any one node receives
every outcome, wherever the engine published it. The waiter takes the cluster's default node.

The subscription can die with its node (a Cluster node killed, even a replica while the Cluster stays
healthy; or the one server restarting). A failed read, or a PING unanswered for ``PING_TIMEOUT_S``,
marks it lost: every command waiting here is told at once (``SubscriptionLost``: the gateway then polls
the stored outcome instead of waiting out its timeout), and the waiter subscribes again, on a Cluster on
another node that answers. ``subscribed`` and ``node`` are what ``/health`` reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import time

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.exceptions import ResponseError

from almanac.services import bus
from almanac.services.gateway.errors import overloaded
from almanac.services.gateway.pipelined_connection import PipelinedConnection
from almanac.services.logging import get_logger
from almanac.services.redis_client import refuses_writes
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.keys import Keys, outcome_channel, reply_channel

log = get_logger("almanac.gateway.outcomes")
OUTCOME_PATTERN = outcome_channel("*")
_OUTCOME_PREFIX = outcome_channel("").encode()
# The subscription is pinged after this long without traffic, and counted lost when nothing (not even
# the PONG) arrived for PING_TIMEOUT_S: a node that hangs instead of closing the socket.
PING_AFTER_S = 1.0
PING_TIMEOUT_S = 3.0
RESUBSCRIBE_CAP_S = 1.0


class SubscriptionLost(Exception):
    """The outcome subscription died while a command waited: its outcome must be read from the store."""


class OutcomeWaiter:
    def __init__(self, client: aioredis.Redis, keys: Keys, max_waiters: int = 1_024) -> None:
        self.client = client
        self.keys = keys
        self.max_waiters = max_waiters  # command ids waited for at once; past it, 503 overloaded
        self._node_client: aioredis.Redis | None = None  # a Cluster: a plain client on one node, for pub/sub
        self.pubsub = None if isinstance(client, RedisCluster) else client.pubsub()
        # Submits on one Redis share one pipelined connection (pipelined_connection.PipelinedConnection); a Cluster routes each by its keys.
        single = isinstance(client, aioredis.Redis)
        timeout_s = client.connection_pool.connection_kwargs.get("socket_timeout") if single else None
        self.line = PipelinedConnection(client, timeout_s or 5.0) if single else None
        self.call: bus.Call = self.line.call if self.line is not None else client.execute_command
        self.reply = reply_channel(secrets.token_hex(8), keys.prefix)  # this process's own outcomes arrive here
        self._waiting: dict[str, _InFlight] = {}  # by command id
        self._confirmed: set[str] = set()  # "psubscribe", "subscribe": both make the subscription live
        self.received = 0  # outcome messages received (each answers a command of this process, or a stale one)
        self._reader: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self.subscribed = False  # both subscriptions confirmed, on a connection not known to be dead
        self.node: str | None = None  # host:port of the subscription's node
        self._last_traffic = 0.0

    async def start(self) -> None:
        await self._subscribe()
        self._reader = asyncio.create_task(self._read_forever())
        # Commands wait for the confirmation: an outcome published before it would be lost.
        await asyncio.wait_for(self._ready.wait(), 10)

    async def _subscribe(self, avoid: str | None = None) -> None:
        """PSUBSCRIBE on the one server, or on a live Cluster node (another than ``avoid`` when one answers)."""
        if isinstance(self.client, RedisCluster):
            old = self._node_client
            self._node_client = await live_node_client(self.client, avoid)
            self.pubsub = self._node_client.pubsub()
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.aclose()
            kwargs = self._node_client.connection_pool.connection_kwargs
            self.node = f"{kwargs.get('host')}:{kwargs.get('port')}"
        elif self.node is None:
            kwargs = self.client.connection_pool.connection_kwargs
            self.node = f"{kwargs.get('host', kwargs.get('path'))}:{kwargs.get('port', '')}"
        self._confirmed.clear()
        await self.pubsub.psubscribe(OUTCOME_PATTERN)
        await self.pubsub.subscribe(self.reply)
        self._last_traffic = time.monotonic()
        log.info("outcomes.subscribing", node=self.node)

    async def close(self) -> None:
        """Stop reading outcomes and close the pipelined connection (the gateway stops)."""
        await self.stop()
        if self.line is not None:
            await self.line.close()

    async def stop(self) -> None:
        """Stop reading outcomes (commands can still be submitted: their waits then read the store)."""
        self.subscribed = False  # no outcome message will come: a wait polls the store at once
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
                message = await self.pubsub.get_message(timeout=PING_AFTER_S)
                if message is None:
                    await self._check_alive()
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a dropped connection, a dead node, an unanswered PING
                await self._recover(error)
                continue
            self._last_traffic = time.monotonic()
            kind = message["type"]
            if kind == "message":  # on this process's reply channel: one of its own commands
                self._deliver(None, message["data"])
            elif kind == "pmessage":  # on a command id's own channel: an entry that named no reply channel
                self._deliver(message["channel"][len(_OUTCOME_PREFIX):].decode(errors="replace"), message["data"])
            elif kind in ("psubscribe", "subscribe"):
                self._confirmed.add(kind)
                if len(self._confirmed) == 2:
                    self.subscribed = True
                    self._ready.set()

    def _deliver(self, command_id: str | None, data: bytes) -> None:
        """Resolve the wait for an outcome message (``command_id``: known from its channel, else read from it)."""
        if command_id is not None and command_id not in self._waiting:
            return  # another gateway's command, or one whose wait ended: not even decoded
        self.received += 1
        try:
            outcome = bus.decode_outcome(data)
        except Exception as error:  # noqa: BLE001 - a garbled message must not stop the reader
            log.warning("outcomes.undecodable", error=f"{type(error).__name__}: {error}")
            return
        entry = self._waiting.get(outcome.command_id if command_id is None else command_id)
        if entry is not None and not entry.future.done():
            entry.future.set_result(outcome)

    async def _check_alive(self) -> None:
        """PING a quiet subscription; raise when it stayed silent past PING_TIMEOUT_S (a hung node)."""
        if time.monotonic() - self._last_traffic > PING_TIMEOUT_S:
            raise TimeoutError(f"the outcome subscription on {self.node} answered nothing for {PING_TIMEOUT_S} s")
        try:
            await self.pubsub.ping()
        except ResponseError as error:
            if not refuses_writes(error):
                raise
            self._last_traffic = time.monotonic()  # MISCONF or BUSY: an answer, so the connection is alive

    async def _recover(self, error: BaseException) -> None:
        """The subscription is lost: tell the waiting commands, then subscribe again until it works."""
        self._lost(error)
        delay = 0.05
        while True:
            try:
                await self._subscribe(avoid=self.node)
                return
            except asyncio.CancelledError:
                raise
            except Exception as again:  # noqa: BLE001 - keep trying: commands are answered from the store meanwhile
                log.warning("outcomes.resubscribe_failed", error=f"{type(again).__name__}: {again}", retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RESUBSCRIBE_CAP_S)

    def _lost(self, error: BaseException) -> None:
        self.subscribed = False
        log.warning("outcomes.subscription_lost", node=self.node, error=f"{type(error).__name__}: {error}",
                    waiting=len(self._waiting))
        for entry in self._waiting.values():
            _fail(entry.future)

    def _unless_subscribed(self, future: asyncio.Future) -> None:
        """A command submitted while no subscription is live would wait for nothing: it reads the store."""
        if not self.subscribed:
            _fail(future)

    async def submit_and_wait(self, record: CommandRecord, timeout_s: float, admit: bool = True,
                              limit: bus.RateLimit | None = None) -> Outcome | None:
        """The command's outcome, or None when none came within ``timeout_s`` (check by command id).

        Past ``max_waiters`` waits a new command is refused (503 ``overloaded``) before it is submitted,
        unless ``admit`` is False (the follow-up of a request whose first command already counted).

        Requests carrying the same command id while it is in flight here share one submission and one
        future, but each waits on its own clock (``asyncio.wait`` never cancels the shared future: one
        waiter's timeout must not end another's wait). A waiter that did not submit receives the outcome
        marked ``duplicate``: its own request was never decided, it is a replay of the first. So is the
        submitter's, when the events answering it were decided from an earlier record of the same id (the
        engine publishes each record's outcome, and the first message for the id may be the earlier's).

        With a ``limit`` the submit counts the request against it (``bus.submit``); a request that shares
        another's submission is counted on its own (``bus.count``). ``bus.RateLimited``: nothing submitted,
        and whoever shares the refused submission is refused with it. ``bus.AlreadyDecided``: a resend of a decided
        command, neither counted nor submitted; whoever shares it gets the same stored outcome.
        """
        command_id = record.command_id
        entry = self._waiting.get(command_id)
        submitter = entry is None
        if entry is None:
            if admit and len(self._waiting) >= self.max_waiters:  # refused before submitting: nothing was done
                raise overloaded(f"{len(self._waiting)} outcomes awaited in this gateway process")
            entry = self._waiting[command_id] = _InFlight(asyncio.get_running_loop().create_future())
        entry.waiters += 1
        try:
            if submitter:
                try:
                    await bus.submit(self.client, self.keys, record, limit, reply=self.reply, call=self.call)
                except (bus.RateLimited, bus.AlreadyDecided) as refused:
                    # No outcome will come: the sharers are refused too, or answered the stored outcome too.
                    if not entry.future.done():
                        entry.future.set_exception(refused)
                        entry.future.exception()
                    raise
            elif limit is not None:
                await bus.count(self.client, self.keys, record.room, limit, call=self.call)
            self._unless_subscribed(entry.future)  # raises SubscriptionLost below: poll the stored outcome
            done, _ = await asyncio.wait((entry.future,), timeout=timeout_s)
            if not done:
                return None
            outcome: Outcome = entry.future.result()
            if outcome.duplicate or (submitter and decided_from(outcome, record)):
                return outcome
            return msgspec.structs.replace(outcome, duplicate=True)
        finally:
            entry.waiters -= 1
            if entry.waiters == 0 and self._waiting.get(command_id) is entry:
                del self._waiting[command_id]


def _fail(future: asyncio.Future) -> None:
    """End a wait with SubscriptionLost (marked retrieved: a waiter that left already need not read it)."""
    if not future.done():
        future.set_exception(SubscriptionLost())
        future.exception()


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


async def node_client(cluster: RedisCluster, node=None) -> aioredis.Redis:  # noqa: ANN001 - a ClusterNode
    """A plain client on one Cluster node (the default node unless named), with the cluster client's settings."""
    if node is None:
        await cluster.initialize()
        node = cluster.get_default_node()
    accepted = inspect.signature(aioredis.Redis.__init__).parameters
    settings = {key: value for key, value in node.connection_kwargs.items() if key in accepted}
    if issubclass(node.connection_class, SSLConnection):
        settings["ssl"] = True
    return aioredis.Redis(**settings)


async def live_node_client(cluster: RedisCluster, avoid: str | None = None) -> aioredis.Redis:
    """A plain client on a Cluster node that answers PING: the default node first, ``avoid`` (host:port) last.

    Any node will do, replica or primary: the Cluster bus broadcasts every PUBLISH to all of them.
    """
    with contextlib.suppress(Exception):  # refresh the node list; while a primary is down (slots not covered)
        await cluster.initialize()       # that fails, and the known nodes are tried as they are
    default = cluster.get_default_node()
    nodes = cluster.get_nodes() or list(cluster.nodes_manager.startup_nodes.values())
    nodes = sorted(nodes, key=lambda node: (node.name == avoid, node is not default, node.name))
    for node in nodes:
        client = await node_client(cluster, node)
        try:
            await asyncio.wait_for(client.ping(), 1.0)
            return client
        except Exception as error:  # noqa: BLE001 - try the next node
            log.info("outcomes.node_unavailable", node=node.name, error=type(error).__name__)
            with contextlib.suppress(Exception):
                await client.aclose()
    raise ConnectionError("no node of the Cluster answers for the outcome subscription")
