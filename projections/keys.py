"""Key names: the store's keys both sides read (named only here) and the read models' own."""

from __future__ import annotations

import zlib


def shard_of(room: str, shard_count: int) -> int:
    """The shard a room lives on: CRC-32 of the room id, modulo the shard count (stable across runs)."""
    return zlib.crc32(room.encode()) % shard_count


def shard_tag(shard: int) -> str:
    return f"{{s{shard:02d}}}"


class StoreKeys:
    """The write side's keys that the read side reads too; services.store.keys.Keys adds the rest."""

    def __init__(self, shard_count: int, prefix: str = "alm") -> None:
        self.shard_count = shard_count
        self.prefix = prefix

    def shard(self, room: str) -> int:
        return shard_of(room, self.shard_count)

    def _room(self, room: str, suffix: str) -> str:
        return f"{self.prefix}:{shard_tag(self.shard(room))}:room:{room}:{suffix}"

    def events(self, room: str) -> str:
        return self._room(room, "events")

    def version(self, room: str) -> str:
        return self._room(room, "version")

    def snapshot_index(self, room: str) -> str:
        return self._room(room, "snapshots:index")

    def snapshot_data(self, room: str) -> str:
        return self._room(room, "snapshots:data")

    def feed(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:feed"

    def rooms(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:rooms"


class ModelKeys:
    """The read models' keys. Every key of a shard's models carries the shard's hash tag, so one MULTI/EXEC
    can write a batch and its checkpoint on a Redis Cluster too."""

    def __init__(self, prefix: str = "alm") -> None:
        self.prefix = prefix

    def _shard(self, shard: int, suffix: str) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:rm:{suffix}"

    def checkpoint(self, shard: int) -> str:
        return self._shard(shard, "checkpoint")

    def versions(self, shard: int) -> str:
        return self._shard(shard, "versions")

    def summaries(self, shard: int) -> str:
        return self._shard(shard, "summary")

    def listings(self, shard: int) -> str:
        return self._shard(shard, "listing")

    def leaderboard_rulesets(self, shard: int) -> str:
        return self._shard(shard, "leaderboards")

    def leaderboard(self, shard: int, ruleset: str) -> str:
        return self._shard(shard, f"leaderboard:{ruleset}")

    # A rule-set's read models (their names come from the manifests): a per-room model is one hash
    # room -> row; a ledger is a zset per room (row -> version) with a set of the rooms that have one.
    def model_rows(self, shard: int, model: str) -> str:
        return self._shard(shard, f"model:{model}")

    def model_ledger(self, shard: int, model: str, room: str) -> str:
        return self._shard(shard, f"model:{model}:room:{room}")

    def model_ledger_rooms(self, shard: int, model: str) -> str:
        return self._shard(shard, f"model:{model}:rooms")

    def heartbeat(self, name: str) -> str:
        return f"{self.prefix}:projector:heartbeat:{name}"

    def stats(self, name: str) -> str:
        return f"{self.prefix}:projector:stats:{name}"

    def heartbeat_pattern(self) -> str:
        return f"{self.prefix}:projector:heartbeat:*"
