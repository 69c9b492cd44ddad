"""The read-model store: how a room update becomes Redis writes, queued on a MULTI/EXEC pipeline."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import msgspec

from projections.keys import ModelKeys
from projections.models import READ_MODELS, RoomUpdate


def _fallback(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Fraction):
        return str(value)
    return repr(value)


def encode_json(value: Any) -> bytes:
    """Canonical JSON (sorted keys), so a live row and a rebuilt row are byte-for-byte equal."""
    return msgspec.json.encode(msgspec.to_builtins(value, str_keys=True, enc_hook=_fallback), order="sorted")


def decode_json(data: bytes | str) -> Any:
    return msgspec.json.decode(data)


def text(value: bytes | str) -> str:
    """A Redis reply as text, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else value


def leaderboard_member(player: str, room: str) -> bytes:
    # One entry per (player, room): a player's best is the highest of their rooms, and a room's score may fall.
    return encode_json([player, room])


def queue_update(pipe: Any, keys: ModelKeys, shard: int, update: RoomUpdate,
                 models: Iterable[str] = READ_MODELS) -> None:
    """Queue one room's writes for the named models on ``pipe`` (already in MULTI)."""
    models = set(models)
    room = update.room
    if "rooms" in models:
        pipe.hset(keys.versions(shard), room, update.version)
        pipe.hset(keys.summaries(shard), room, encode_json(update.summary))
        pipe.hset(keys.listings(shard), room, encode_json(update.listing))
    if "leaderboards" in models:
        board = keys.leaderboard(shard, update.ruleset)
        pipe.sadd(keys.leaderboard_rulesets(shard), update.ruleset)
        if update.scores:
            pipe.zadd(board, {leaderboard_member(p, room): s for p, s in update.scores.items()})
        if update.dropped_players:
            pipe.zrem(board, *(leaderboard_member(p, room) for p in update.dropped_players))
    if "claims" in models and update.claim is not None:
        pipe.hset(keys.claims(shard), room, encode_json(update.claim))
    if "trades" in models and update.trade_rows:
        pipe.sadd(keys.trade_rooms(shard), room)
        pipe.zadd(keys.trades(shard, room), {encode_json(row): row["version"] for row in update.trade_rows})


async def model_keys_of_shard(client: Any, keys: ModelKeys, shard: int, models: Iterable[str]) -> list[str]:
    """Every key the named models hold in a shard (leaderboards and ledgers are found through their index sets)."""
    models = set(models)
    found: list[str] = []
    if "rooms" in models:
        found += [keys.versions(shard), keys.summaries(shard), keys.listings(shard)]
    if "leaderboards" in models:
        rulesets = await client.smembers(keys.leaderboard_rulesets(shard))
        found += [keys.leaderboard(shard, text(r)) for r in rulesets] + [keys.leaderboard_rulesets(shard)]
    if "claims" in models:
        found.append(keys.claims(shard))
    if "trades" in models:
        rooms = await client.smembers(keys.trade_rooms(shard))
        found += [keys.trades(shard, text(r)) for r in rooms] + [keys.trade_rooms(shard)]
    return found
