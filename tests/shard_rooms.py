"""Room names that land on a chosen shard, for stories that need a command on one shard and not another."""

from __future__ import annotations

from almanac.storage.keys import Keys


def room_on(keys: Keys, shard: int, name: str) -> str:
    """``name`` with the first numeric suffix that puts the room on ``shard`` under ``keys``."""
    return next(room for room in (f"{name}-{n}" for n in range(10_000)) if keys.shard(room) == shard)
