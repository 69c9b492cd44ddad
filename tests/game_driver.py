"""Drive a room through the pure kernel (no Redis): decide, seal into envelopes, evolve from the bytes."""

from __future__ import annotations

from typing import Any

from almanac.events import codec, room as room_rules
from almanac.events.decider import Context
from almanac.events.dice import Dice, seed_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import seal
from almanac.events.room import RoomState


class PureRoom:
    def __init__(self, room: str = "room-1", seed: bytes = b"s" * 32) -> None:
        self.room = room
        self.seed = seed
        self.state: RoomState | None = None
        self.envelopes: list[Envelope] = []

    @property
    def version(self) -> int:
        return self.state.version if self.state is not None else 0

    def send(self, player: str, body: dict[str, Any], now_ms: int = 1_000, command_id: str = "cmd") -> list[Envelope]:
        command = codec.decode_command(room_rules.stored_ref(self.state) if self.state else None, body)
        version = self.version + 1
        ctx = Context(
            room=self.room, player=player, now_ms=now_ms, version=version, dice=Dice(self.seed, self.room, version),
            seed_commitment=seed_commitment(self.seed), secret_seed_hex=self.seed.hex(),
        )
        new = []
        for event in room_rules.decide(self.state, command, ctx):
            event_type, payload = codec.encode_event(event)
            previous = self.envelopes[-1].hash if self.envelopes else GENESIS_HASH
            envelope = seal(Envelope(
                room=self.room, version=self.version + 1, ruleset=room_rules.stored_ref(self.state if self.state is not None else event),
                type=event_type, payload=payload, command_id=command_id, player=player, server_time_ms=now_ms,
                previous_hash=previous,
            ))
            self.state = room_rules.evolve(self.state, codec.decode_event(envelope), self.room, envelope.version)
            self.envelopes.append(envelope)
            new.append(envelope)
        return new


def fold_envelopes(envelopes: list[Envelope]) -> RoomState | None:
    state = None
    for envelope in envelopes:
        state = room_rules.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
    return state
