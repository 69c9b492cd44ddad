"""Drive a room through the pure kernel (no Redis): the public driver in `almanac.events.testing`, under older names."""

from __future__ import annotations

from typing import Any

from almanac.events.envelope import Envelope
from almanac.events.room import RoomState
from almanac.events.step import replay
from almanac.events.testing import RoomDriver


class PureRoom(RoomDriver):
    """A RoomDriver whose ``send`` takes a JSON-like body, a time and a command id, as the engine receives them."""

    def __init__(self, room: str = "room-1", seed: bytes = b"s" * 32) -> None:
        super().__init__(room, seed)

    def send(self, player: str, body: dict[str, Any], now_ms: int = 1_000, command_id: str = "cmd") -> list[Envelope]:
        return super().send(player, body, now_ms=now_ms, command_id=command_id)


def fold_envelopes(envelopes: list[Envelope]) -> RoomState | None:
    return replay(envelopes)
