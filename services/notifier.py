"""The notifier: webhooks from the rooms' events, through an outbox in Redis, with retries, signatures and dead letters.

Two loops in one process (`almanac notifier`, started by `almanac up`); the first has two duties:

* **notice**: reads every shard's feed from its cursor (``Keys.notifier_cursor``), loads the appended events,
  and turns each into notices: ``room_ended`` for a ``room.ended`` of any rule-set, and whatever the rule-set's
  manifest says (``RuleSet.notices``: realm's ``your_turn`` when a season ends, ``trade_offered`` to the city
  an offer is made to). Each notice is matched against the subscriptions (a deployment's, a room's, a
  player's) and put in the outbox under a delivery id derived from (subscription, room, version, kind,
  player): a feed entry noticed twice (a crash before the cursor moved) enqueues nothing new.
* **deliver** (the second loop): claims due deliveries (a lease: a notifier killed mid-delivery leaves them due again when it
  runs out), POSTs each, removes it on a 2xx, else retries with a doubling back-off up to
  ALMANAC_WEBHOOK_BACKOFF_MAX_S, and after ALMANAC_WEBHOOK_MAX_ATTEMPTS moves it to the dead-letter list.
  A delivery is sent again only under its own id (``X-Almanac-Delivery``): a receiver deduplicates by it.
  Attempts run concurrently with no batch barrier: at most ALMANAC_WEBHOOK_CONCURRENCY in all and an eighth of it
  per endpoint (``endpoint_in_flight``); the loop claims again as each ends, so a slow or down endpoint holds only
  its own slots and delays only its own deliveries (issue 32: one answering after 9 s made every receiver wait).
* **warn** (in the notice loop, every ``WARN_EVERY_S``): ``deadline_soon``. The clock (services/clock.py) keeps
  each room's earliest pending deadline per shard (``Keys.deadlines``: room -> due ms, ``Keys.deadline_commands``
  its key); the notifier reads those due within ALMANAC_WEBHOOK_DEADLINE_WARNING_S and tells the players it waits
  for (``Deadline.concerns``: realm's season waits for the cities that have not ended their turn; a rule-set that
  names none means every seat), each player's subscription addressed to its player, a room's or deployment's once
  for the room, under a delivery id derived from (subscription, room, deadline key, player). The id goes into ``Keys.webhook_warned`` in the same script
  that enqueues it: a deadline is warned of once per subscription, ever, however many notifiers run or restart.
  The notice carries the deadline's key and due time only (never the command the clock will send).

What is delivered: a player's subscription gets the event as that player may see it (the rule-set's
redaction, as on their live feed); a room's or deployment's subscription the event as nobody seated may see
it (every secret hidden). Each POST is signed: ``X-Almanac-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of
"<t>.<body>" under the subscription's secret>`` (``almanac.client.verify_webhook`` checks it). Notices come from the
shard feeds, which are trimmed ALMANAC_STREAM_RETAIN_S after the projector applied them: a notifier stopped for
longer than that misses what was trimmed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from typing import Any, Literal, get_args

import httpx
import msgspec

from almanac.events import codec, registry
from almanac.events.envelope import Envelope
from almanac.events.room import RoomEnded
from almanac.events.shown import PUBLIC as PUBLIC_READER, shown_to
from almanac.services import bootstrap, clock
from almanac.services.logging import get_logger
from almanac.services.settings import Settings
from almanac.storage.keys import Keys

log = get_logger("almanac.notifier")
NoticeKind = Literal["your_turn", "trade_offered", "room_ended", "deadline_soon"]
Scope = Literal["deployment", "room", "player"]  # every room; one room; one seat of one room (what it may see)
KINDS: tuple[str, ...] = get_args(NoticeKind)
SCOPES: tuple[str, ...] = get_args(Scope)
START = "0-0"
LEASE_MS = 30_000  # a claimed delivery is due again after this if its notifier died holding it
LATENCY_SAMPLES = 10_000
DEAD_KEPT = 10_000
FIRST_BACKOFF_S = 0.5
# A delivery due for an endpoint at its in-flight bound, with other endpoints' deliveries due behind it, waits this
# long (no attempt counted): each claim looks past it instead of at it again.
DEFER_MS = 500
CLAIM_SCAN = 4  # a claim looks at up to this many due ids per free slot
# The delivery loop, with nothing due, sleeps until the outbox's earliest due time (a retry, a lapsed lease), woken at
# once when this process enqueues; at most this long, for what another notifier enqueued (it delivers its own too).
# It used to look every 50 ms: 20 claim scripts a second for an empty outbox, the notifier's largest idle cost.
DELIVER_IDLE_S = 1.0
WARN_EVERY_S = 0.5  # how often the notifier looks at the clock's pending deadlines
# After a read that filled no shard's read, wait this long so feed entries gather (the projector's gather wait,
# projections/projector.py): each read woke for the one or two entries appended since the last, three round trips
# each (read, subscriptions, cursors), and the notifier cost 10-20% of the stack's CPU at 500 commands/s with no
# subscriber. Webhooks leave up to this much later; a full read (behind) reads again at once.
NOTICE_GATHER_S = 0.1
# The same wait while no subscription exists (as of the last read): there is nothing to enqueue, only the cursors to
# move, so the reads come five times less often (bench e2e runs with no subscriber). A subscription made meanwhile
# hears its first notices up to this long after their events (its later ones within NOTICE_GATHER_S again).
NOTICE_IDLE_GATHER_S = 0.5
FEED_READ_COUNT = 200
WARNED_KEPT_MS = 3_600_000  # a warning's record outlives its deadline by this (notifiers' clocks may differ)
SIGNATURE_HEADER = "X-Almanac-Signature"
DELIVERY_HEADER = "X-Almanac-Delivery"

# KEYS: deliveries hash, outbox zset, stats hash. ARGV: id, json, due_ms. Enqueued once per id.
_ENQUEUE = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'enqueued', 1)
  return 1
end
return 0
"""
# KEYS: deliveries hash, outbox zset, stats hash, warned zset. ARGV: id, json, due_ms, the deadline's due ms.
# A deadline_soon: enqueued once per id ever (the warned set outlives the delivery, which is removed once sent).
_WARN = """
if redis.call('ZADD', KEYS[4], 'NX', ARGV[4], ARGV[1]) == 1 then
  redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'enqueued', 1)
  return 1
end
return 0
"""
# KEYS: outbox, deliveries. ARGV: now_ms, lease_until_ms, count, scan, defer_until_ms, then (endpoint, room) pairs.
# Due ids in due order, each leased, while its endpoint (the URL's scheme://host:port) has room: an endpoint not
# named has ``ENDPOINT_IN_FLIGHT`` (ARGV[6]); a named one what the caller said. A due id whose endpoint is full stays
# due, unleased, unless a claimable id lies behind it, or the look (at most ``scan`` ids) found nothing more to take:
# then it is deferred to ``defer_until_ms`` (not an attempt), so a slow endpoint's backlog at the outbox's head
# does not hide other endpoints' deliveries from later claims. Returns id, JSON, endpoint triples, then the count of ids left due for a full endpoint.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
local room = {}
for i = 7, #ARGV, 2 do room[ARGV[i]] = tonumber(ARGV[i + 1]) end
local default = tonumber(ARGV[6])
local out, waiting, claimed, want = {}, {}, 0, tonumber(ARGV[3])
for _, id in ipairs(ids) do
  if claimed >= want then break end
  local body = redis.call('HGET', KEYS[2], id)
  if not body then
    redis.call('ZREM', KEYS[1], id)
  else
    local decoded, record = pcall(cjson.decode, body)  -- (a body that is not JSON: claimed, and failed by the caller)
    local url = (decoded and type(record) == 'table' and type(record['url']) == 'string') and record['url'] or ''
    local endpoint = string.match(url, '^[%a][%w+.-]*://[^/?#]+') or url
    local left = room[endpoint] or default
    if left > 0 then
      room[endpoint] = left - 1
      redis.call('ZADD', KEYS[1], ARGV[2], id)
      table.insert(out, id); table.insert(out, body); table.insert(out, endpoint)
      claimed = claimed + 1
      for _, held in ipairs(waiting) do redis.call('ZADD', KEYS[1], ARGV[5], held) end
      waiting = {}
    else
      table.insert(waiting, id)
    end
  end
end
if claimed < want and #ids >= tonumber(ARGV[4]) then
  -- the whole look was taken by full endpoints: what lies behind it is seen at the next claim
  for _, held in ipairs(waiting) do redis.call('ZADD', KEYS[1], ARGV[5], held) end
end
table.insert(out, #waiting)
return out
"""
# KEYS: outbox, deliveries, stats, latency. ARGV: id, latency_ms, samples kept.
_DONE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'delivered', 1)
  redis.call('LPUSH', KEYS[4], ARGV[2])
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[3]) - 1)
end
return 1
"""
# KEYS: outbox, deliveries, stats. ARGV: id, json, due_ms. A failed attempt: due again later.
_RETRY = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'failed_attempts', 1)
end
return 1
"""
# KEYS: outbox, deliveries, stats, dead. ARGV: id, dead json, kept. The last attempt failed: set aside.
_DEAD = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[3], 'failed_attempts', 1)
  redis.call('HINCRBY', KEYS[3], 'dead', 1)
  redis.call('LPUSH', KEYS[4], ARGV[2])
  redis.call('LTRIM', KEYS[4], 0, tonumber(ARGV[3]) - 1)
end
return 1
"""


class Subscription(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    url: str
    secret: str
    scope: Scope
    room: str | None = None
    player: str | None = None
    kinds: tuple[NoticeKind, ...] = ()  # empty: every kind
    created_ms: int = 0

    def wants(self, room: str, kind: str, player: str | None) -> bool:
        if self.kinds and kind not in self.kinds:
            return False
        if self.scope == "deployment":
            return True
        if self.room != room:
            return False
        return self.scope == "room" or player is None or player == self.player


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    kind: NoticeKind
    room: str
    version: int
    player: str | None  # whom it concerns; None: everyone seated


def signature(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def delivery_id(subscription: str, notice: Notice) -> str:
    text = f"{subscription}|{notice.room}|{notice.version}|{notice.kind}|{notice.player or ''}"
    return "d_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def warning_id(subscription: str, room: str, deadline_key: str, player: str | None) -> str:
    """The id of a deadline_soon: one per (subscription, room, deadline key, player), whoever computes it."""
    text = f"{subscription}|{room}|deadline_soon|{deadline_key}|{player or ''}"
    return "d_" + hashlib.sha256(text.encode()).hexdigest()[:32]


def notices_of(envelope: Envelope, event: Any) -> list[Notice]:
    """What one event tells the players: the room's end (any rule-set), and the rule-set's own notices."""
    found: list[tuple[str, str | None]] = []
    if isinstance(event, RoomEnded):
        found.append(("room_ended", None))
    else:
        manifest = registry.stored(envelope.ruleset)
        if manifest.notices is not None:
            found += list(manifest.notices(event))
    return [Notice(kind=kind, room=envelope.room, version=envelope.version, player=player) for kind, player in found]


def shown_event(envelope: Envelope, event: Any, viewer: str | None) -> dict[str, Any]:
    """The event as ``viewer`` may see it (None: as nobody seated may, every secret hidden): ``events.shown``, what
    the gateway sends that reader."""
    return shown_to(envelope, viewer if viewer is not None else PUBLIC_READER, event)


def new_subscription(url: str, scope: str, room: str | None, player: str | None, kinds: tuple[str, ...],
                     secret: str | None, now_ms: int) -> Subscription:
    return Subscription(id="wh_" + secrets.token_hex(8), url=url, secret=secret or secrets.token_hex(32),
                        scope=scope, room=room, player=player, kinds=kinds, created_ms=now_ms)


class Notifier:
    def __init__(self, client: Any, store: Any, settings: Settings, *, keys: Keys | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.client = client
        self.store = store
        self.settings = settings
        self.keys = keys or store.keys  # the process's one set (its store's: services.bootstrap)
        self.now_ms = clock_ms
        self.subscriptions: list[Subscription] = []
        self.http = httpx.AsyncClient(timeout=settings.webhook_timeout_s, follow_redirects=False)
        self._scripts = {name: client.register_script(text) for name, text in
                         (("enqueue", _ENQUEUE), ("claim", _CLAIM), ("done", _DONE), ("retry", _RETRY),
                          ("dead", _DEAD), ("warn", _WARN))}
        self._cursors: dict[int, str] = {}
        # notifier cursor key -> entry id: moved by a read that enqueued nothing, written by the next read's round trip
        self._unwritten: dict[str, str] = {}
        self._warned: set[str] = set()  # warning ids this process enqueued or found enqueued (saves a script call)
        self._rulesets: dict[str, str] = {}  # room -> its rule-set (never changes)
        self._next_warn = 0.0
        self._seen: dict[str, int] = {}  # room -> the due time of the deadline warned of (for ``_seen_for``)
        self._seen_for: frozenset[str] = frozenset()
        # The last feed read brought entries, none of its shards' reads full: the next read waits NOTICE_GATHER_S.
        self.gather_next = False
        self._enqueued = asyncio.Event()  # set by an enqueue here: the delivery loop wakes (no polling)
        self.deliver_idle_s = DELIVER_IDLE_S

    async def aclose(self) -> None:
        await self.http.aclose()

    # --- subscriptions -----------------------------------------------------------------------------

    async def load_subscriptions(self) -> None:
        self._subscriptions_from(await self.client.hgetall(self.keys.webhook_subscriptions()))

    def _subscriptions_from(self, raw: dict) -> None:
        self.subscriptions = [msgspec.json.decode(value, type=Subscription) for value in raw.values()]

    # --- notice: feeds -> outbox ------------------------------------------------------------------

    async def notice_once(self, block_ms: int | None = None) -> int:
        """Read every shard's feed past its cursor once; the deliveries enqueued."""
        shards = range(self.settings.shard_count)
        if not self._cursors:
            cursor_keys = [self.keys.notifier_cursor(s) for s in shards]
            if self.settings.redis_cluster:  # each cursor lives in its shard's slot: one GET each (no MGET across)
                values = await asyncio.gather(*(self.client.get(key) for key in cursor_keys))
            else:
                values = await self.client.mget(cursor_keys)
            self._cursors = {s: (v.decode() if isinstance(v, bytes) else v) or START for s, v in zip(shards, values, strict=True)}
            await self._count_missed(self._cursors)
        if self.settings.redis_cluster:  # the feeds live in different slots: one read each, none blocking
            answers = await asyncio.gather(*(self.client.xread({self.keys.feed(s): self._cursors[s]}, count=FEED_READ_COUNT)
                                             for s in shards))
            replies = [stream for answer in answers for stream in answer or []]
            if not replies and block_ms:
                await asyncio.sleep(block_ms / 1000 / 5)
            if replies:
                await self.load_subscriptions()
        else:
            # ONE round trip per read (bench e2e's notifier: each wake was three): the cursors the last read moved,
            # this read, then the subscriptions. Redis runs a connection's commands in order, so the subscriptions
            # are loaded after the read returned, as before (a subscription made later sees none of its entries:
            # they were appended before it).
            async with self.client.pipeline(transaction=False) as pipe:
                if self._unwritten:
                    pipe.mset(self._unwritten)
                pipe.xread({self.keys.feed(s): self._cursors[s] for s in shards}, count=FEED_READ_COUNT,
                           block=block_ms)
                pipe.hgetall(self.keys.webhook_subscriptions())
                *_, replies, subscriptions = await pipe.execute()
            self._unwritten = {}
            if replies:
                self._subscriptions_from(subscriptions)
        self.gather_next = bool(replies) and all(len(entries) < FEED_READ_COUNT for _, entries in replies)
        if not replies:
            return 0
        enqueued = 0
        moved: dict[str, str] = {}
        for stream, entries in replies:
            stream = stream.decode() if isinstance(stream, bytes) else stream
            shard = next(s for s in shards if self.keys.feed(s) == stream)
            for entry_id, fields in entries:
                enqueued += await self._notice_entry(fields)
                entry = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                self._cursors[shard] = entry
            moved[self.keys.notifier_cursor(shard)] = self._cursors[shard]
        if self.settings.redis_cluster:  # each cursor in its shard's slot: one SET each (no MSET across slots)
            await asyncio.gather(*(self.client.set(key, value) for key, value in moved.items()))
        elif enqueued:
            # Something was enqueued: its cursors are written now, before any of it can be delivered (a delivery
            # sent and removed, then noticed again after a crash, would be enqueued and sent again).
            await self.client.mset({**self._unwritten, **moved})
        else:
            # Nothing enqueued: noticing these entries again (a crash before the write) enqueues nothing, so the
            # moved cursors ride on the next read's round trip (at most NOTICE_GATHER_S, or the read's block, later;
            # ``flush_cursors`` on the way out).
            self._unwritten.update(moved)
        return enqueued

    async def flush_cursors(self) -> None:
        """Write the cursors moved by reads that enqueued nothing and not written yet (the next read writes them)."""
        if self._unwritten:
            await self.client.mset(self._unwritten)
            self._unwritten = {}

    async def _count_missed(self, cursors: dict[int, str]) -> int:
        """Shards whose feed was trimmed past this notifier's cursor (stopped longer than ALMANAC_NOTIFIER_HOLD_S:
        the projector trimmed what it had applied): the notices after the cursor may be gone, so say so (a
        warning, ``missed_feed_gaps`` in the stats) rather than carry on as if nothing happened. A trim up to the
        cursor keeps the cursor's own entry (XTRIM MINID), so a feed now starting after it lost entries past it."""
        missed = []
        for shard, cursor in cursors.items():
            if cursor == START:
                continue  # never noticed anything here: it starts where the feed starts, as a new notifier does
            try:
                info = await self.client.xinfo_stream(self.keys.feed(shard))
            except Exception:  # noqa: BLE001 - no such key: nothing appended, nothing missed
                continue
            first = info.get("first-entry", info.get(b"first-entry"))
            start = _text(first[0]) if first else _text(info.get("last-generated-id", info.get(b"last-generated-id")))
            if _stream_id(start) > _stream_id(cursor):
                missed.append(shard)
        if missed:
            log.warning("notices_missed", shards=missed, reason="the feeds were trimmed past this notifier's cursor "
                        "(stopped longer than ALMANAC_NOTIFIER_HOLD_S)")
            await self.client.hincrby(self.keys.webhook_stats(), "missed_feed_gaps", len(missed))
        return len(missed)

    async def _notice_entry(self, fields: dict) -> int:
        room = _text(fields.get(b"r", fields.get("r")))
        first, last = int(_text(fields.get(b"v", fields.get("v")))), int(_text(fields.get(b"l", fields.get("l"))))
        if not self.subscriptions:
            return 0
        envelopes = await self.store.page(room, first, last - first + 1)
        enqueued = 0
        for envelope in envelopes:
            event = codec.decode_event(envelope)
            for notice in notices_of(envelope, event):
                for subscription in self.subscriptions:
                    # Only what happens after the subscription: a notifier catching up on the feed (its first start
                    # on a running deployment) tells no one of earlier events.
                    if envelope.server_time_ms < subscription.created_ms:
                        continue
                    if subscription.wants(notice.room, notice.kind, notice.player):
                        enqueued += await self._enqueue(subscription, notice, envelope, event)
        return enqueued

    async def _enqueue(self, subscription: Subscription, notice: Notice, envelope: Envelope, event: Any) -> int:
        viewer = subscription.player if subscription.scope == "player" else None
        ident = delivery_id(subscription.id, notice)
        payload = {"delivery_id": ident, "kind": notice.kind, "room": notice.room, "ruleset": envelope.ruleset,
                   "version": notice.version, "player": notice.player, "subscription": subscription.id,
                   "scope": subscription.scope, "viewer": viewer, "event": shown_event(envelope, event, viewer)}
        record = {"id": ident, "subscription": subscription.id, "url": subscription.url,
                  "secret": subscription.secret, "payload": payload, "attempts": 0,
                  "appended_ms": envelope.server_time_ms, "enqueued_ms": self.now_ms(), "last_error": ""}
        added = await self._scripts["enqueue"](
            keys=[self.keys.webhook_deliveries(), self.keys.webhook_outbox(), self.keys.webhook_stats()],
            args=[ident, json.dumps(record), self.now_ms()])
        if int(added):
            self._enqueued.set()
        return int(added)

    # --- warn: the clock's pending deadlines -> outbox ---------------------------------------------

    async def warn_once(self) -> int:
        """Enqueue deadline_soon for every pending deadline due within the warning window; the enqueued."""
        window_ms = self.settings.webhook_deadline_warning_s * 1000
        if window_ms <= 0:
            return 0
        await self.load_subscriptions()
        wanted = [s for s in self.subscriptions if not s.kinds or "deadline_soon" in s.kinds]
        if not wanted:
            return 0
        now = self.now_ms()
        shards = range(self.settings.shard_count)
        subscribed = frozenset(s.id for s in wanted)
        if subscribed != self._seen_for or len(self._seen) > 200_000:
            self._seen, self._seen_for = {}, subscribed  # a new subscription: every room in the window again
        # Past due is not "soon": the clock is sending its command (or is down); such a deadline is never warned.
        rooms = await asyncio.gather(*(self.client.zrangebyscore(self.keys.deadlines(s), f"({now}", now + window_ms,
                                                                 withscores=True) for s in shards))
        enqueued = 0
        for shard, scored in zip(shards, rooms, strict=True):
            # a room whose deadline (its due time) this process has already warned of: nothing to read again
            members = [member for member, due in scored if self._seen.get(_text(member)) != int(due)]
            if not members:
                continue
            datas = await self.client.hmget(self.keys.deadline_commands(shard), members)
            warnings: list[tuple[str, str, int]] = []
            for member, data in zip(members, datas, strict=True):
                if data is None:
                    continue  # fired or replaced meanwhile
                deadline = clock.pending_deadline(data)
                if not now < deadline.due_ms <= now + window_ms:
                    continue
                room = _text(member)
                warnings += await self._warnings(room, deadline, wanted, now)
                self._seen[room] = deadline.due_ms
            enqueued += await self._enqueue_warnings(warnings, now)
        if len(self._warned) > 200_000:
            self._warned.clear()
        await self.client.zremrangebyscore(self.keys.webhook_warned(), "-inf", now - WARNED_KEPT_MS)
        return enqueued

    async def _enqueue_warnings(self, warnings: list[tuple[str, str, int]], now: int) -> int:
        """Run the warn script for each, pipelined 500 at a time on one Redis (a Cluster: one call each)."""
        keys = [self.keys.webhook_deliveries(), self.keys.webhook_outbox(), self.keys.webhook_stats(),
                self.keys.webhook_warned()]
        enqueued = 0
        for start in range(0, len(warnings), 500):
            batch = warnings[start:start + 500]
            if self.settings.redis_cluster:
                answers = [await self._scripts["warn"](keys=keys, args=[ident, record, now, due_ms])
                           for ident, record, due_ms in batch]
            else:
                pipe = self.client.pipeline(transaction=False)
                for ident, record, due_ms in batch:
                    await self._scripts["warn"](keys=keys, args=[ident, record, now, due_ms], client=pipe)
                answers = await pipe.execute()
            enqueued += sum(int(added) for added in answers)
            if enqueued:
                self._enqueued.set()
            self._warned.update(ident for ident, _, _ in batch)
        return enqueued

    async def _warnings(self, room: str, deadline: Any, wanted: list[Subscription],
                        now: int) -> list[tuple[str, str, int]]:
        """The deadline_soon deliveries of a room's deadline not yet enqueued here: (id, record JSON, due ms)."""
        found = []
        for subscription in wanted:
            # A player's subscription hears a deadline that waits for that player (``Deadline.concerns``; None: for
            # every seat), addressed to them; a room's or deployment's hears it once, for the room (player None).
            player = subscription.player if subscription.scope == "player" else None
            if player is not None and deadline.concerns is not None and player not in deadline.concerns:
                continue
            if not subscription.wants(room, "deadline_soon", player):
                continue
            ident = warning_id(subscription.id, room, deadline.key, player)
            if ident in self._warned:
                continue
            payload = {"delivery_id": ident, "kind": "deadline_soon", "room": room,
                       "ruleset": await self._ruleset(room), "version": None, "player": player,
                       "subscription": subscription.id, "scope": subscription.scope, "viewer": player,
                       "deadline": {"key": deadline.key, "due_ms": deadline.due_ms}}
            record = {"id": ident, "subscription": subscription.id, "url": subscription.url,
                      "secret": subscription.secret, "payload": payload, "attempts": 0,
                      "appended_ms": now, "enqueued_ms": now, "last_error": ""}
            found.append((ident, json.dumps(record), deadline.due_ms))
        return found

    async def _ruleset(self, room: str) -> str | None:
        if room not in self._rulesets:
            first = await self.store.read(room, 1, 1)
            if not first:
                return None
            if len(self._rulesets) > 100_000:
                self._rulesets.clear()
            self._rulesets[room] = first[0].ruleset
        return self._rulesets[room]

    # --- deliver: outbox -> receivers -------------------------------------------------------------

    async def deliver_once(self) -> int:
        """Claim the due deliveries (up to the concurrency, and ``endpoint_in_flight`` per endpoint) and attempt
        each, waiting for all; the attempts made. (The process's loop does not wait: ``_deliver_loop``.)"""
        claimed, _ = await self._claim(self.settings.webhook_concurrency, {})
        await asyncio.gather(*(self._attempt(record) for record, _ in claimed))
        return len(claimed)

    async def _claim(self, count: int, in_flight: dict[str, int]) -> tuple[list[tuple[dict[str, Any], str]], int]:
        """Up to ``count`` due deliveries leased, none past its endpoint's bound given ``in_flight`` (endpoint ->
        attempts under way here): (record, endpoint) each, and how many due ones wait for a full endpoint."""
        now = self.now_ms()
        bound = endpoint_in_flight(self.settings.webhook_concurrency)
        rooms = [item for endpoint, flying in in_flight.items() for item in (endpoint, max(0, bound - flying))]
        answer = await self._scripts["claim"](
            keys=[self.keys.webhook_outbox(), self.keys.webhook_deliveries()],
            args=[now, now + LEASE_MS, count, count * CLAIM_SCAN, now + DEFER_MS, bound, *rooms])
        claimed = [(json.loads(answer[i + 1]), _text(answer[i + 2])) for i in range(0, len(answer) - 1, 3)]
        return claimed, int(answer[-1])

    async def _attempt(self, record: dict[str, Any]) -> None:
        body = json.dumps(record["payload"], separators=(",", ":")).encode()
        attempt = record["attempts"] + 1
        headers = {"Content-Type": "application/json", DELIVERY_HEADER: record["id"],
                   "X-Almanac-Event": record["payload"]["kind"], "X-Almanac-Attempt": str(attempt),
                   SIGNATURE_HEADER: signature(record["secret"], body, int(time.time()))}
        error = ""
        try:
            answer = await self.http.post(record["url"], content=body, headers=headers)
            if 200 <= answer.status_code < 300:
                latency = max(0, self.now_ms() - int(record["appended_ms"]))
                await self._scripts["done"](
                    keys=[self.keys.webhook_outbox(), self.keys.webhook_deliveries(), self.keys.webhook_stats(),
                          self.keys.webhook_latency()], args=[record["id"], latency, LATENCY_SAMPLES])
                return
            error = f"HTTP {answer.status_code}"
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {str(failure)[:200]}"
        record = {**record, "attempts": attempt, "last_error": error}
        if attempt >= self.settings.webhook_max_attempts:
            dead = {**record, "dead_ms": self.now_ms()}
            dead.pop("secret", None)
            await self._scripts["dead"](
                keys=[self.keys.webhook_outbox(), self.keys.webhook_deliveries(), self.keys.webhook_stats(),
                      self.keys.webhook_dead()], args=[record["id"], json.dumps(dead), DEAD_KEPT])
            log.warning("webhook.dead", delivery=record["id"], url=record["url"], error=error, attempts=attempt)
            return
        wait_s = min(self.settings.webhook_backoff_max_s, FIRST_BACKOFF_S * 2 ** (attempt - 1))
        await self._scripts["retry"](
            keys=[self.keys.webhook_outbox(), self.keys.webhook_deliveries(), self.keys.webhook_stats()],
            args=[record["id"], json.dumps(record), self.now_ms() + int(wait_s * 1000)])

    # --- the process ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(self._notice_loop(stop), self._deliver_loop(stop))

    async def _notice_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.notice_once(block_ms=int(WARN_EVERY_S * 1000))
                if self.gather_next:
                    await _sleep_or_stop(stop, NOTICE_GATHER_S if self.subscriptions else NOTICE_IDLE_GATHER_S)
                if time.monotonic() >= self._next_warn:
                    self._next_warn = time.monotonic() + WARN_EVERY_S
                    await self.warn_once()
            except Exception as error:  # noqa: BLE001 - a Redis outage: try again, the cursor has not moved
                log.warning("notifier.notice_failed", error=str(error)[:300])
                await _sleep_or_stop(stop, 1.0)
        with contextlib.suppress(Exception):  # stopping: the cursors the last reads moved (else noticed again)
            await self.flush_cursors()

    async def _deliver_loop(self, stop: asyncio.Event) -> None:
        """Attempts run concurrently, at most ``webhook_concurrency`` in all and ``endpoint_in_flight`` per endpoint;
        the loop claims again whenever a slot frees or a delivery is enqueued, never waiting for a batch: a slow or
        down endpoint holds its own slots only, and delays only its own deliveries."""
        flying: dict[asyncio.Task[None], str] = {}
        try:
            while not stop.is_set():
                try:
                    self._enqueued.clear()  # before the claim: an enqueue from here on wakes the waits below
                    free = self.settings.webhook_concurrency - len(flying)
                    claimed, waiting = await self._claim(free, _counts(flying.values())) if free > 0 else ([], 0)
                    for record, endpoint in claimed:
                        flying[asyncio.ensure_future(self._attempt(record))] = endpoint
                    if claimed:
                        continue
                    if not flying:
                        await self._wait_for_due(stop)
                        continue
                    # Full (in all, or the endpoints of what is due): until an attempt ends, an enqueue, ``stop``,
                    # or (nothing due waiting) the outbox's earliest due time
                    wait_s = self.deliver_idle_s if (waiting or free <= 0) else await self._until_due()
                    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._enqueued.wait())]
                    try:
                        await asyncio.wait([*flying, *waits], timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for waiting_for in waits:
                            waiting_for.cancel()
                except Exception as error:  # noqa: BLE001 - leases bring claimed deliveries back
                    log.warning("notifier.deliver_failed", error=str(error)[:300])
                    await _sleep_or_stop(stop, 1.0)
                finally:
                    for task in [task for task in flying if task.done()]:
                        del flying[task]
                        if not task.cancelled() and task.exception() is not None:
                            log.warning("notifier.deliver_failed", error=str(task.exception())[:300])
        except asyncio.CancelledError:
            for task in flying:  # cancelled: the attempts under way end too (their leases bring them back)
                task.cancel()
            raise
        # Stopping: the attempts under way finish (each within ALMANAC_WEBHOOK_TIMEOUT_S); a kill leaves them leased
        if flying:
            await asyncio.gather(*flying, return_exceptions=True)

    async def _until_due(self) -> float:
        earliest = await self.client.zrange(self.keys.webhook_outbox(), 0, 0, withscores=True)
        if not earliest:
            return self.deliver_idle_s
        return min(self.deliver_idle_s, max(0.0, (earliest[0][1] - self.now_ms()) / 1000))

    async def _wait_for_due(self, stop: asyncio.Event) -> None:
        """Until the outbox's earliest delivery is due, this process enqueues one, ``stop``, or ``deliver_idle_s``."""
        earliest = await self.client.zrange(self.keys.webhook_outbox(), 0, 0, withscores=True)
        wait_s = self.deliver_idle_s
        if earliest:
            wait_s = min(wait_s, max(0.0, (earliest[0][1] - self.now_ms()) / 1000))
        if wait_s <= 0:
            return
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._enqueued.wait())]
        try:
            await asyncio.wait(waits, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()


async def stats(client: Any, keys: Keys) -> dict[str, Any]:
    """Counters, the outbox's size, the dead-letter list's length and delivery latency quantiles (ms)."""
    counters = {_text(k): int(v) for k, v in (await client.hgetall(keys.webhook_stats())).items()}
    samples = sorted(int(v) for v in await client.lrange(keys.webhook_latency(), 0, LATENCY_SAMPLES - 1))

    def quantile(q: float) -> int | None:
        return samples[min(len(samples) - 1, int(q * len(samples)))] if samples else None

    return {"enqueued": counters.get("enqueued", 0), "delivered": counters.get("delivered", 0),
            "failed_attempts": counters.get("failed_attempts", 0), "dead": counters.get("dead", 0),
            "missed_feed_gaps": counters.get("missed_feed_gaps", 0),
            "pending": int(await client.zcard(keys.webhook_outbox())),
            "dead_letters": int(await client.llen(keys.webhook_dead())),
            "latency_ms": {"samples": len(samples), "p50": quantile(0.5), "p99": quantile(0.99)}}


def endpoint_in_flight(concurrency: int) -> int:
    """The attempts one endpoint (a URL's scheme://host:port) may have under way in a notifier: an eighth of
    ALMANAC_WEBHOOK_CONCURRENCY (8 of 64), so seven endpoints that hang still leave an eighth to every other."""
    return max(1, concurrency // 8)


def _counts(endpoints: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for endpoint in endpoints:
        counts[endpoint] = counts.get(endpoint, 0) + 1
    return counts


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _stream_id(value: str) -> tuple[int, int]:
    milliseconds, _, sequence = value.partition("-")
    return int(milliseconds), int(sequence or 0)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def run(settings: Settings, redis_url: str) -> None:
    """The notifier until SIGINT/SIGTERM."""
    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL, redis_url)
    notifier = Notifier(runtime.client, runtime.store, settings, keys=runtime.keys)
    await bootstrap.serve(runtime, notifier.run, "notifier", closing=notifier.aclose)
