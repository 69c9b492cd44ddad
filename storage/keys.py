"""Every Redis key name Almanac uses, in one place: the write side, the read models, the engine and the bus.

A room lives on shard ``crc32(room) % shard_count``; every key of a room, its dedupe keys, its
shard's feed and command stream and the shard's read models carry the shard's hash tag ``{sNN}``,
so each Lua script touches one Redis Cluster slot. ``docs/architecture.md`` lists them all.
"""

from __future__ import annotations

import zlib

DEFAULT_PREFIX = "alm"
_TAG_CACHE_LIMIT = 100_000
# Archive pointers are spread over this many hashes in all (Keys.pointer_bucket): Redis keeps a hash of at most 128
# short fields as one listpack (~75 B an entry against ~150 in a hash table), so 16,384 buckets keep a million
# archived rooms compact (61 a bucket); docs/capacity.md measures it.
POINTER_BUCKETS = 16_384


def shard_of(room: str, shard_count: int) -> int:
    """The shard a room lives on: CRC-32 of the room id, modulo the shard count (stable across runs)."""
    return zlib.crc32(room.encode()) % shard_count


def shard_tag(shard: int) -> str:
    return f"{{s{shard:02d}}}"


# --- keys of the engine's leases, of processes and of the outcome bus: one function each, no ``Keys`` method
# (their callers know a prefix, not always a shard count) --------------------------------------------------


def outcome_channel(command_id: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The pub/sub channel an engine publishes a command's outcome on (``"*"`` gives the pattern)."""
    return f"{prefix}:outcome:{command_id}"


def reply_channel(submitter: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The pub/sub channel one submitter (a gateway process) receives the outcomes of its own commands on."""
    return f"{prefix}:reply:{submitter}"


def lease_key(shard: int, prefix: str = DEFAULT_PREFIX) -> str:
    """The engine lease of a shard (single writer per shard)."""
    return f"{prefix}:{shard_tag(shard)}:engine:lease"


def replicated_key(tag: str, prefix: str = DEFAULT_PREFIX) -> str:
    """A scratch key of a shard (``tag`` is its hash tag ``{sNN}``), written only so that WAIT covers writes
    made on another connection (ALMANAC_DURABILITY=replica, when an append's retry answers "dup")."""
    return f"{prefix}:{tag}:replicated"


def attempts_key(shard: int, prefix: str = DEFAULT_PREFIX) -> str:
    """Hash entry id -> failed attempts of the shard's pending commands (dead-lettering)."""
    return f"{prefix}:{shard_tag(shard)}:engine:attempts"


def bot_seats_key(prefix: str = DEFAULT_PREFIX) -> str:
    """Hash of every bot seat of the deployment ("room\x1fseat" -> JSON), in one slot of its own (``{bots}``): the
    bound on bot seats (ALMANAC_MAX_BOT_SEATS) is checked and taken against it in one script (services/bots.py),
    which a sum over the shards' bot hashes, each in its shard's slot, cannot be on a Redis Cluster."""
    return f"{prefix}:{{bots}}:seats"


def bot_pending_key(prefix: str = DEFAULT_PREFIX) -> str:
    """Hash of the bot seats taken for a command not known to be decided yet ("room\x1fseat" -> JSON {command,
    added_ms}), in the bound's slot (``bot_seats_key``'s ``{bots}``): ``services.bots.settle_pending`` gives each
    back as soon as the command's recorded outcome says it was refused, or keeps it when the room recorded it."""
    return f"{prefix}:{{bots}}:pending"


def bot_removed_key(member: str, prefix: str = DEFAULT_PREFIX) -> str:
    """A removed bot seat's mark (``member``: "room\x1fseat"; ``services.bots.remove_bot``), in the bound's slot,
    expiring after ``services.bots.REMOVED_KEPT_MS``: while it lasts, only a new ask (``reserve_seats``, which clears it) hands
    the seat again, never a process that read the seat before its removal (``sync_bound``, ``settle_pending``)."""
    return f"{prefix}:{{bots}}:removed:{member}"


def bot_wake_key(prefix: str = DEFAULT_PREFIX) -> str:
    """A short stream in the bound's slot, appended to whenever a seat is handed to a bot (``add_bot``) or taken
    for a command's outcome (``reserve_seats``): a bots process with no seat to play blocks on it (``Bots.run``)
    instead of looking at every shard ten times a second."""
    return f"{prefix}:{{bots}}:wake"


def ratelimit_prefix(prefix: str = DEFAULT_PREFIX) -> str:
    """The prefix of the gateway's rate-limit counters (anonymous requests, auditors, bot seats asked for): the
    ``limits`` library names each counter under it (``<this>:<its own key for the limit>``; services/gateway/ratelimit.py).
    A seat's command counter is the shard's own (``Keys.seat_rate``)."""
    return f"{prefix}:ratelimit"


# An engine's two keys keep the names they had from the start (not ``engine:stats:<name>`` like the projectors' and
# archivers'). Renamed (tried twice), a gateway of the release before reads an engine's counters at the old name
# during a rolling upgrade, finds none, takes the engine out of ``engines_key`` at each /health it answers, and the new
# gateways' /health then answers 503 not_ready until the engine's next beat: a rollout's readiness probes flap.
def engine_stats_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:metrics:engine:{name}"


def engine_heartbeat_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:engine:{name}:heartbeat"


def engines_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The set of registered engine names (the gateway's health view reads their heartbeats). Each beat adds the
    engine; a clean stop or a long silence takes it out (storage.process_registry)."""
    return f"{prefix}:engines"


def projectors_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The set of registered projector names: the gateway's health view reads their heartbeats from it (a SCAN
    for them took a round trip per 100 keys of the whole keyspace, 200 on a Redis of 20,000 keys, at each /health).
    Each beat adds the projector; a clean stop or a long silence takes it out (storage.process_registry)."""
    return f"{prefix}:projectors"


def projector_heartbeat_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:projector:heartbeat:{name}"


def projector_stats_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:projector:stats:{name}"


def archiver_stats_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:archiver:stats:{name}"


def archiver_heartbeat_key(name: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:archiver:heartbeat:{name}"


def archivers_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The set of registered archiver names (the gateway's /metrics reads their stats; storage.process_registry)."""
    return f"{prefix}:archivers"


class Keys:
    """Key names for one shard count and prefix; ``Keys(16).events("r1")`` -> ``alm:{s07}:room:r1:events``."""

    def __init__(self, shard_count: int = 16, prefix: str = DEFAULT_PREFIX) -> None:
        self.shard_count = shard_count
        self.prefix = prefix
        # room -> (shard, "alm:{sNN}") : the engine names six keys of a room per command, and the CRC and
        # the formatting were 5-7% of its CPU. Bounded: cleared whole when full (cheap to rebuild).
        self._tags: dict[str, tuple[int, str]] = {}
        self._shard_tags: dict[int, str] = {}

    def _tagged(self, room: str) -> tuple[int, str]:
        found = self._tags.get(room)
        if found is None:
            if len(self._tags) >= _TAG_CACHE_LIMIT:
                self._tags.clear()
            shard = shard_of(room, self.shard_count)
            found = self._tags[room] = (shard, f"{self.prefix}:{shard_tag(shard)}")
        return found

    def shard(self, room: str) -> int:
        return self._tagged(room)[0]

    # --- a room's keys (the write side; the projector reads events, snapshots, feeds and room sets) --

    def _room(self, room: str, suffix: str) -> str:
        return f"{self._tagged(room)[1]}:room:{room}:{suffix}"

    def events(self, room: str) -> str:
        return self._room(room, "events")

    def version(self, room: str) -> str:
        return self._room(room, "version")

    def snapshot_index(self, room: str) -> str:
        return self._room(room, "snapshots:index")

    def snapshot_data(self, room: str) -> str:
        return self._room(room, "snapshots:data")

    def commands(self, room: str) -> str:
        return self._room(room, "commands")

    def rejected(self, room: str) -> str:
        return self._room(room, "rejected")

    def seed(self, room: str) -> str:
        return self._room(room, "seed")

    def commit_scheme(self, room: str) -> str:
        """The room's commitment scheme (docs/bundle-format.md), recorded when it is created."""
        return self._room(room, "commit-scheme")

    def origin(self, room: str) -> str:
        """A copy's origin (``import --as``): JSON {room, version, hash} of the room it was copied from."""
        return self._room(room, "origin")

    def first_layout_seat_keys(self, room: str) -> str:
        """Hash: player -> sha256 hex of the seat key their join answer carried, the first layout (a key per room):
        read when a seat's bucket has no digest (storage.seat_keys); new keys go to ``seat_key_bucket``."""
        return self._room(room, "seatkeys")

    def seat_key_bucket(self, room: str) -> str:
        """Hash: a seat's field (storage.seat_keys.seat_field) -> the sha256 of its seat key, one of the shard's
        buckets as the archive pointers' (``pointer_bucket``), in the room's slot: a listpack entry per seat."""
        shard, bucket = self._bucket(room)
        return self._shard(shard, f"seatkeys:{bucket}")

    def nonces(self, room: str) -> str:
        """Hash: sha256 hex of a player's secret nonce -> the nonce (scheme-2 dice), beside the seed."""
        return self._room(room, "nonces")

    def seat_rate(self, room: str, digest: str) -> str:
        """A seat's command counter (fixed window; ``digest`` names the seat): in the room's shard, so that the
        bus's submit script counts it and appends the command in one slot (``services/bus.py``)."""
        return f"{self.prefix}:{shard_tag(self.shard(room))}:rate:seat:{digest}"

    def command_ids(self, room: str) -> str:
        """Hash: the room's command ids (a short digest of each outcome record's key) -> their outcome, compact:
        answers a resend once the record expired (storage.redis_store._DEDUPE_LUA)."""
        return self._room(room, "ids")

    def command_outcome(self, room: str, command_id: str) -> str:
        # Dedupe lives in the room's shard so the append script can check it atomically.
        return f"{self._tagged(room)[1]}:cmd:{command_id}"

    # --- a shard's keys --------------------------------------------------------------------------

    def _shard(self, shard: int, suffix: str) -> str:
        tagged = self._shard_tags.get(shard)
        if tagged is None:
            tagged = self._shard_tags[shard] = f"{self.prefix}:{shard_tag(shard)}"
        return f"{tagged}:{suffix}"

    def feed(self, shard: int) -> str:
        return self._shard(shard, "feed")

    def bots(self, shard: int) -> str:
        """Hash of the shard's bot seats: "room\x1fseat" -> JSON {room, seat, added_ms} (services/bots.py)."""
        return self._shard(shard, "bots")

    def bot_delays(self, shard: int) -> str:
        """Hash of the shard's rooms' bot move delays: room -> milliseconds (``services.bots.set_delay``; a room
        not in it: none)."""
        return self._shard(shard, "bot_delay")

    def rooms(self, shard: int) -> str:
        return self._shard(shard, "rooms")

    def pointer_bucket(self, room: str) -> str:
        """Hash: archived room -> its archive pointer (storage.archive; ~47 bytes, the room is the field), one of
        the shard's ``pointer_buckets``: small enough that Redis keeps it as a listpack (no key nor hash-table entry
        per room). The bucket is the room's CRC-32 above the bits that chose its shard."""
        return self._pointer_hash(*self._bucket(room))

    def _pointer_hash(self, shard: int, bucket: int) -> str:
        return self._shard(shard, f"archive:pointers:{bucket}")

    def _bucket(self, room: str) -> tuple[int, int]:
        """(the room's shard, its bucket among the shard's ``pointer_buckets_per_shard``)."""
        crc = zlib.crc32(room.encode())
        return crc % self.shard_count, (crc // self.shard_count) % self.pointer_buckets_per_shard

    def first_layout_pointers(self, shard: int) -> str:
        """Hash: the first layout's pointers, one hash per shard (storage.archive_index.migrate_pointers moves them
        into their buckets). Readers look here (``first_layout_pointers(keys.shard(room))``) when a room's bucket has
        no pointer, so a room archived before the buckets is never taken for a room that does not exist, whether or
        not an archiver has moved it yet."""
        return self._shard(shard, "archive:pointers")

    @property
    def pointer_buckets_per_shard(self) -> int:
        return max(1, POINTER_BUCKETS // self.shard_count)

    def pointer_buckets(self, shard: int) -> list[str]:
        """Every pointer hash of a shard: together their fields are the shard's archived rooms."""
        return [self._pointer_hash(shard, bucket) for bucket in range(self.pointer_buckets_per_shard)]

    def superseded(self, shard: int) -> str:
        """Hash: room brought back from the archive -> the digests (32 bytes each) of its objects no pointer names
        any more (storage.restore); the room's next move to the archive removes those objects and its field."""
        return self._shard(shard, "archive:superseded")

    def archived_listings(self, shard: int) -> str:
        """Hash: block id -> zstd msgpack {room: listing row} of finished archived rooms (storage.archive_index):
        their listing rows leave ``listings`` in blocks of a pass's rooms, a few dozen bytes per room."""
        return self._shard(shard, "archive:listings")

    def archived_model_rows(self, shard: int, model: str) -> str:
        """Hash: block id -> zstd msgpack {room: [[version, row], ...]} of a rule-set read model's rows of finished
        archived rooms (storage.archive_index): they leave ``model_rows`` / ``model_ledger`` in blocks of a pass's
        rooms (a per-room model's one row at version 0; a ledger's rows in its zset's order). With an archive store
        the value is ``object:<sha256>`` and the block is that object (storage.archive_index.BLOCK_REF)."""
        return self._shard(shard, f"archive:model:{model}")

    def feed_hold(self, shard: int) -> str:
        """While it exists, the shard's feed is not trimmed past its value (a full rebuild in progress)."""
        return self._shard(shard, "feed:hold")

    def command_stream(self, shard: int) -> str:
        """The shard's command stream: commands submitted by gateways that do not hold the shard, read by its
        holder (consumer group ``engine``)."""
        return self._shard(shard, "commands")

    def dead_letters(self, shard: int) -> str:
        return self._shard(shard, "dead")

    def unranked(self, shard: int) -> str:
        """Set of the shard's rooms that never enter a leaderboard: imported rooms and copies (``almanac import``).
        Not a read model: a rebuild of the models keeps it (it is not derivable from a room's events)."""
        return self._shard(shard, "unranked")

    def notifier_cursor(self, shard: int) -> str:
        """The last feed entry of the shard whose notices the notifier has put in its outbox."""
        return self._shard(shard, "notifier:cursor")

    # --- webhooks (services/notifier.py): one hash tag, so the outbox's scripts run on a Cluster too --

    def _webhooks(self, suffix: str) -> str:
        return f"{self.prefix}:{{webhooks}}:{suffix}"

    def webhook_subscriptions(self) -> str:
        """Hash: subscription id -> JSON {id, url, secret, scope, room, player, kinds, created_ms}."""
        return self._webhooks("subscriptions")

    def webhook_outbox(self) -> str:
        """Sorted set: delivery id by the time (ms) it is due (a claimed one: when its lease runs out)."""
        return self._webhooks("due")

    def webhook_deliveries(self) -> str:
        """Hash: delivery id -> JSON of the delivery (subscription, payload, attempts), while it is pending."""
        return self._webhooks("deliveries")

    def webhook_dead(self) -> str:
        """List: deliveries given up after the last attempt, newest first, with the last error."""
        return self._webhooks("dead")

    def webhook_stats(self) -> str:
        """Hash of counters: enqueued, delivered, failed_attempts, dead."""
        return self._webhooks("stats")

    def webhook_latency(self) -> str:
        """List: the latest delivery latencies (ms from the event's append to the receiver's 2xx), newest first."""
        return self._webhooks("latency")

    def webhook_warned(self) -> str:
        """Sorted set: deadline_soon delivery id -> the deadline's due time (ms); each enqueued once, ever
        (pruned an hour after the deadline passed: a deadline past due is never warned of)."""
        return self._webhooks("warned")

    # --- the clock of a shard (services/clock.py) -----------------------------------------------

    def deadlines(self, shard: int) -> str:
        """Sorted set: room -> due time (ms) of its earliest pending deadline."""
        return self._shard(shard, "clock:due")

    def deadline_commands(self, shard: int) -> str:
        """Hash: room -> msgpack (key, player, command) of the deadline ``deadlines`` holds for it."""
        return self._shard(shard, "clock:commands")

    def deadlines_fired(self, shard: int) -> str:
        """Hash: room -> the command id of the deadline last sent for it, until the room names another: a clock
        tracking a room whose timeout is sent but not yet decided must not put the same deadline back."""
        return self._shard(shard, "clock:fired")

    def clock_cursor(self, shard: int) -> str:
        """The shard feed entry id up to which the clock has read the rooms' deadlines."""
        return self._shard(shard, "clock:cursor")

    # --- the read models of a shard (``rm:``) ---------------------------------------------------

    def _model(self, shard: int, suffix: str) -> str:
        return self._shard(shard, f"rm:{suffix}")

    def checkpoint(self, shard: int) -> str:
        return self._model(shard, "checkpoint")

    def versions(self, shard: int) -> str:
        return self._model(shard, "versions")

    def summaries(self, shard: int) -> str:
        return self._model(shard, "summary")

    def listings(self, shard: int) -> str:
        return self._model(shard, "listing")

    def ended_rooms(self, shard: int) -> str:
        """Zset of the shard's ended rooms not yet archived (score: when they ended, ms): the archiver's work."""
        return self._model(shard, "ended")

    def leaderboard_rulesets(self, shard: int) -> str:
        return self._model(shard, "leaderboards")

    def leaderboard(self, shard: int, ruleset: str) -> str:
        return self._model(shard, f"leaderboard:{ruleset}")

    def leaderboard_best(self, shard: int, ruleset: str) -> str:
        """Hash: player -> their best archived entry in ``leaderboard`` (storage.archive_index): of a player's
        finished archived rooms only that entry stays (final scores never change: the others never show)."""
        return self._model(shard, f"leaderboard-best:{ruleset}")

    # A rule-set's read models (their names come from the manifests): a per-room model is one hash
    # room -> row; a ledger is a zset per room (row -> version) with a set of the rooms that have one.
    def model_rows(self, shard: int, model: str) -> str:
        return self._model(shard, f"model:{model}")

    def model_ledger(self, shard: int, model: str, room: str) -> str:
        return self._model(shard, f"model:{model}:room:{room}")

    def model_ledger_rooms(self, shard: int, model: str) -> str:
        return self._model(shard, f"model:{model}:rooms")
