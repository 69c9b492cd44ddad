"""The Redis key scheme of the write side: every key of a room carries its shard as the hash tag.

The keys the read side also reads (room streams, snapshots, shard feeds, room sets) are named once,
in ``projections.keys.StoreKeys`` (the projector may not import services); this class adds the
keys only the write side touches.
"""

from __future__ import annotations

from almanac.projections.keys import StoreKeys, shard_of, shard_tag

__all__ = ["Keys", "shard_of", "shard_tag"]


class Keys(StoreKeys):
    """Key names for one shard count; ``Keys(16).events("r1")`` -> ``alm:{s07}:room:r1:events``."""

    def commands(self, room: str) -> str:
        return self._room(room, "commands")

    def rejected(self, room: str) -> str:
        return self._room(room, "rejected")

    def seed(self, room: str) -> str:
        return self._room(room, "seed")

    def command_outcome(self, room: str, command_id: str) -> str:
        # Dedupe lives in the room's shard so the append script can check it atomically.
        return f"{self.prefix}:{shard_tag(self.shard(room))}:cmd:{command_id}"

    def shard_commands(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:commands"

    def dead_letters(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:dead"
