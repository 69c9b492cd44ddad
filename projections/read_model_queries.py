"""Queries on the read models for the gateway and the CLI, including read-your-writes waits."""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from typing import Any

import msgspec

from almanac.events import registry
from almanac.projections.model_writes import decode_json, encode_json, text
from almanac.projections.projector import HEARTBEAT_TTL_MS
from almanac.storage.archive_index import archived_page, listing_rows, model_rows
from almanac.storage.keys import Keys, projector_heartbeat_key, projector_stats_key, projectors_key, shard_of
from almanac.storage.process_registry import REGISTRY_FIELDS, missing_or_forget

_FIRST_POLL_S = 0.002
_MAX_POLL_S = 0.05
# Archived rows a page with a rule-set filter looks at, at most, per call (its page may come back short, with a
# cursor to go on): what keeps a filtered call's cost bounded when few archived rooms are of that rule-set.
FILTERED_SCAN_ROWS = 2000
_CURSOR = msgspec.json.Decoder(list[int | str])


class BadCursor(ValueError):
    """A page cursor this listing did not hand out (or that no longer parses)."""


def encode_cursor(position: list[Any]) -> str:
    """An opaque cursor: the position of the last room a page showed, as URL-safe base64 of JSON."""
    return base64.urlsafe_b64encode(msgspec.json.encode(position)).decode().rstrip("=")


def decode_cursor(cursor: str, shard_count: int) -> tuple[str, Any]:
    """("live", (created_at_ms, room)) or ("archived", (shard, block id, room)); BadCursor otherwise."""
    try:
        position = _CURSOR.decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise BadCursor(cursor) from None
    match position:
        case ["l", int(created), str(room)] if created >= 0:
            return "live", (created, room)
        case ["a", int(shard), str(block), str(room)] if 0 <= shard < shard_count:
            return "archived", (shard, block, room)
    raise BadCursor(cursor)


class ReadModels:
    """Async reads of the projected models. Takes a redis.asyncio client (decoded responses or not)."""

    def __init__(self, client: Any, shard_count: int, prefix: str = "alm", keys: Keys | None = None,
                 store: Any = None) -> None:
        self.client = client
        self.shard_count = shard_count
        self.keys = keys or Keys(shard_count, prefix)  # the process's (services.bootstrap) when given
        # The process's store (services.bootstrap): an archived room's summary row leaves Redis with the room
        # (storage.archive) and is folded from the archive when asked for.
        self.store = store

    def _shard(self, room: str) -> int:
        return shard_of(room, self.shard_count)

    async def _each_shard(self, command: str, key_of: Any, *args: Any, **kwargs: Any) -> list[Any]:
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.shard_count):
                getattr(pipe, command)(key_of(shard), *args, **kwargs)
            return await pipe.execute()

    # --- rooms --------------------------------------------------------------------------------

    async def room(self, room: str) -> dict | None:
        """The room's summary: rule-set, players, version, scores, resources, over/ended; None if unknown."""
        data = await self.client.hget(self.keys.summaries(self._shard(room)), room)
        if data is not None:
            return decode_json(data)
        pointer = getattr(self.store, "pointer", None)
        if pointer is None or await pointer(room) is None:
            return None
        from almanac.projections.rebuild import fold_room  # noqa: PLC0415 - rebuild's one fold of a room

        update = await fold_room(self.store, room)  # the row the projector wrote, folded again (deterministic)
        return None if update is None else decode_json(encode_json(update.summary))

    async def rooms(self, ruleset: str | None = None) -> list[dict]:
        """Room listings (no scores or resources), oldest first; only ``ruleset``'s when given."""
        # finished archived rooms' rows are in the archive index's blocks (storage.archive_index): both tiers here
        rows = [decode_json(v) for v in await listing_rows(self.client, self.keys, self.shard_count)]
        if ruleset is not None:
            rows = [r for r in rows if r["ruleset"] == ruleset]
        return sorted(rows, key=lambda r: (r["created_at_ms"], r["room"]))

    async def rooms_page(self, ruleset: str | None, limit: int, cursor: str | None = None,
                         ) -> tuple[list[dict], str | None]:
        """One page of room listings and the cursor of the next (None: the last page). The order is stable: rooms
        Redis holds a row of (live, finished not yet archived, idle archived) newest first by (created_at_ms, room),
        then finished archived rooms block by block (storage.archive_index.archived_page). A page reads Redis' rows
        and at most the few archived blocks it shows (decoded once per process), never every archived room; with
        ``ruleset`` it may come back short (FILTERED_SCAN_ROWS). BadCursor for a cursor it did not hand out.

        A room created while a client pages comes before its cursor (not shown: the listing as it was); a room
        archived meanwhile was shown among Redis' rows already (before its cursor) or is shown in the archived tier.
        """
        tier, position = decode_cursor(cursor, self.shard_count) if cursor is not None else ("live", None)
        page: list[dict] = []
        if tier == "live":
            replies = await self._each_shard("hvals", self.keys.listings)
            rows = [decode_json(v) for reply in replies for v in reply]
            rows = [r for r in rows if (ruleset is None or r["ruleset"] == ruleset)
                    and (position is None or (r["created_at_ms"], r["room"]) < position)]
            rows.sort(key=lambda r: (r["created_at_ms"], r["room"]), reverse=True)
            page = rows[:limit]
            if len(rows) > limit:
                last = page[-1]
                return page, encode_cursor(["l", last["created_at_ms"], last["room"]])
            position = None  # on into the archived tier from its start
        need = limit - len(page)
        if need == 0:  # a page that ends exactly with Redis' rows: the archived tier is asked on the next
            last = page[-1]
            return page, encode_cursor(["l", last["created_at_ms"], last["room"]])
        scanned, ended = await archived_page(self.client, self.keys, position,
                                             need if ruleset is None else max(need, FILTERED_SCAN_ROWS))
        chosen: list[tuple[tuple[int, str, str], dict]] = []
        last_position = position
        for at, raw in scanned:
            if len(chosen) == need:
                ended = False
                break
            last_position = at
            row = decode_json(raw)
            if ruleset is None or row["ruleset"] == ruleset:
                chosen.append((at, row))
        # a room Redis has a row of again (a rebuild wrote one) is listed there, with the rows of Redis
        async with self.client.pipeline(transaction=False) as pipe:
            for (shard, _, room), _ in chosen:
                pipe.hexists(self.keys.listings(shard), room)
            in_redis = await pipe.execute()
        page += [row for (_, row), again in zip(chosen, in_redis, strict=True) if not again]
        if ended or last_position is None:
            return page, None
        return page, encode_cursor(["a", *last_position])

    async def projected_version(self, room: str) -> int:
        """The room version the read models have applied (0 when none)."""
        value = await self.client.hget(self.keys.versions(self._shard(room)), room)
        if value is None and (pointer := getattr(self.store, "pointer", None)) is not None:
            archived = await pointer(room)  # a finished archived room's leaves the hash (storage.archive_index)
            return archived.version if archived is not None else 0
        return int(value) if value is not None else 0

    async def wait_for(self, room: str, version: int, timeout_s: float) -> bool:
        """Wait until the read models have applied ``version`` of ``room``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        pause = _FIRST_POLL_S
        while True:
            if await self.projected_version(room) >= version:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL_S)

    # --- leaderboards -------------------------------------------------------------------------

    async def leaderboard(self, ruleset: str, limit: int = 20) -> list[dict]:
        """Best score per player over the rule-set's rooms: [{rank, player, score, room}], best first."""
        if limit <= 0:
            return []
        page = max(limit * 2, 20)
        # Imported rooms and copies (``almanac import``) never rank: their history was not played here.
        unranked = {text(room) for shard in await self._each_shard("smembers", self.keys.unranked) for room in shard}
        while True:
            replies = await self._each_shard(
                "zrevrange", lambda s: self.keys.leaderboard(s, ruleset), 0, page - 1, withscores=True
            )
            entries = []
            for reply in replies:
                for member, score in reply:
                    player, room = decode_json(member)
                    if room not in unranked:
                        entries.append((-int(float(score)), player, room))
            entries.sort()
            best: dict[str, tuple[int, str, str]] = {}
            for entry in entries:
                best.setdefault(entry[1], entry)
            # A shard's full page may hide players further down; widen until enough distinct players or all seen.
            exhausted = all(len(reply) < page for reply in replies)
            if len(best) >= limit or exhausted:
                ranked = sorted(best.values())[:limit]
                return [
                    {"rank": i + 1, "player": player, "score": -neg, "room": room}
                    for i, (neg, player, room) in enumerate(ranked)
                ]
            page *= 4

    # --- the rule-sets' read models ------------------------------------------------------------

    async def rows(self, model: str, room: str | None = None, where: dict[str, str] | None = None) -> list[dict]:
        """A rule-set's read model (see its manifest): the rows of ``room`` (every room when None) whose
        fields equal ``where``'s values, sorted by the model's ``order_by``. KeyError for an unknown model."""
        declared = registry.read_models()[model][1]
        ledger = declared.room_row is None
        if room is not None:
            found = {room: await self._rows_of_room(model, ledger, room)}
        else:
            # finished archived rooms' rows are in the archive index's blocks (storage.archive_index): both tiers here
            found = await model_rows(self.client, self.keys, self.shard_count, model, ledger,
                                     getattr(self.store, "archive", None))
        # One order whichever tier a row came from (room, then the ledger's zset order: version, row), then the
        # model's: rows the model's order ties keep it.
        entries = sorted((name, version, row) for name, rows in found.items() for version, row in rows)
        rows = [decode_json(row) for _, _, row in entries]
        for field, value in (where or {}).items():
            rows = [r for r in rows if r.get(field) == value]
        return sorted(rows, key=lambda r: tuple(_sortable(r.get(f)) for f in declared.order_by))

    async def _rows_of_room(self, model: str, ledger: bool, room: str) -> list[tuple[int, bytes]]:
        """[(version, row)] of one room's rows of a rule-set read model: Redis' or, for a room whose rows left with
        the archive index (storage.archive_index), folded again from its archive object (the same rows)."""
        shard = self._shard(room)
        if ledger:
            reply = await self.client.zrange(self.keys.model_ledger(shard, model, room), 0, -1, withscores=True)
            rows = [(int(score), member) for member, score in reply]
        else:
            data = await self.client.hget(self.keys.model_rows(shard, model), room)
            rows = [] if data is None else [(0, data)]
        pointer = getattr(self.store, "pointer", None)
        if rows or pointer is None or await pointer(room) is None:
            return rows
        from almanac.projections.rebuild import fold_room  # noqa: PLC0415 - rebuild's one fold of a room

        update = await fold_room(self.store, room)  # the rows the projector wrote, folded again (deterministic)
        if update is None:
            return []
        if ledger:
            return sorted((version, encode_json(row)) for version, row in update.ledgers.get(model, []))
        row = update.rows.get(model)
        return [] if row is None else [(0, encode_json(row))]

    # --- the projector's health ---------------------------------------------------------------

    async def status(self) -> dict:
        """Projector heartbeats (live ones), the registered projectors missing theirs, their figures, and per shard the
        age of the oldest unapplied entry."""
        heartbeats = []
        # TIME on its own: a Redis Cluster pipeline refuses it.
        seconds, micros = await self.client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        # The projectors named in their set, their heartbeats and figures in one pipeline. Every heartbeat adds the
        # projector's name (Projector.publish_status), so one started by this code is found within a beat; one started
        # by code older than the set is not, until it is restarted: no SCAN for heartbeat keys is kept for it, as one
        # would walk the whole keyspace at every /health (200 round trips on a Redis of 20,000 keys) to cover the
        # minutes of a rolling upgrade.
        prefix = self.keys.prefix
        names = sorted(text(name) for name in await self.client.smembers(projectors_key(prefix)))
        async with self.client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.get(projector_heartbeat_key(name, prefix))
                pipe.hgetall(projector_stats_key(name, prefix))
            found = await pipe.execute()
        missing = {}
        for name, data, stats in zip(names, found[::2], found[1::2], strict=True):
            if data is None:
                missing[name] = (projector_stats_key(name, prefix), stats or None)
                continue
            beat = decode_json(data)
            beat["stats"] = {text(k): _number(text(v)) for k, v in stats.items() if text(k) not in REGISTRY_FIELDS}
            heartbeats.append(beat)
        # A projector that stopped beating (a crash, a stuck host) is reported missing until it has been gone long
        # enough to be forgotten (storage.process_registry); one stopped cleanly took itself out of the set.
        missing_ms = await missing_or_forget(self.client, projectors_key(prefix), missing, HEARTBEAT_TTL_MS,
                                             now_ms=now_ms)
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.shard_count):
                pipe.get(self.keys.checkpoint(shard))
                pipe.xrevrange(self.keys.feed(shard), "+", "-", count=1)
            replies = [None, *await pipe.execute()]
        checkpoints = [text(c) if c is not None else "0-0" for c in replies[1::2]]
        heads = [text(h[0][0]) if h else "0-0" for h in replies[2::2]]
        behind = [s for s in range(self.shard_count) if _id(heads[s]) > _id(checkpoints[s])]
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in behind:
                pipe.xrange(self.keys.feed(shard), f"({checkpoints[shard]}", "+", count=1)
            oldest = dict(zip(behind, await pipe.execute(), strict=True))
        shards = []
        for shard in range(self.shard_count):
            lag_ms = 0
            if oldest.get(shard):
                # Feed ids are Redis' append times in ms: the oldest entry not applied yet tells how stale we are.
                lag_ms = max(0, now_ms - _ms(text(oldest[shard][0][0])))
            shards.append({"shard": shard, "checkpoint": checkpoints[shard], "head": heads[shard],
                           "caught_up": shard not in behind, "lag_ms": lag_ms})
        return {
            "alive": bool(heartbeats),
            "projectors": sorted(heartbeats, key=lambda b: b["name"]),
            "missing": [{"name": name, "missing_ms": ms} for name, ms in sorted(missing_ms.items())],
            "max_lag_ms": max((s["lag_ms"] for s in shards), default=0),
            "caught_up": all(s["caught_up"] for s in shards),
            "shards": shards,
        }


def _sortable(value: Any) -> tuple[int, Any]:
    # Rows from JSON: numbers before text, None first, so any mix of field values sorts.
    if value is None:
        return (0, 0)
    return (1, value) if isinstance(value, int | float) else (2, str(value))


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _ms(entry_id: str) -> int:
    return _id(entry_id)[0]


def _number(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value

