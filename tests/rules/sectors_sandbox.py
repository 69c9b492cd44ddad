"""A sectors room played in memory through the kernel's room step, for the sectors tests (a test helper, not the game's)."""

from __future__ import annotations

from typing import Any

from almanac.events import codec, room
from almanac.events.decider import Context
from almanac.events.dice import Dice, seed_commitment
from almanac.events.envelope import GENESIS_HASH
from almanac.events.step import CommandRecord, step


class Sandbox:
    """One room, created and joined by its owner, that records every event with its version.

    Every command goes through the one room step (``events.step.step``: decide, seal, evolve from the
    stored bytes), exactly as the engine runs it, with the room's own dice unless a test hands scripted ones.
    """

    def __init__(
        self,
        options: dict[str, Any] | None = None,
        *,
        player: str = "owner",
        secret_seed: bytes = b"sectors-sandbox",
        room_id: str = "sandbox",
        join: bool = True,
        dice: Dice | None = None,
    ) -> None:
        self.room_id = room_id
        self.secret_seed = secret_seed
        self.state: room.RoomState | None = None
        self.log: list[tuple[int, Any]] = []
        self.last_hash = GENESIS_HASH
        self.play(room.CreateRoom(ruleset="sectors", options=options or {}), player=player, dice=dice)
        if join:
            self.play(room.JoinRoom(), player=self.game.owner)

    @property
    def version(self) -> int:
        return self.state.version if self.state is not None else 0

    @property
    def game(self) -> Any:  # the colony's state (sectors' ColonyState)
        assert self.state is not None
        return self.state.game

    def context(self, player: str, dice: Dice | None = None, now_ms: int | None = None) -> Context:
        version = self.version + 1
        return Context(
            room=self.room_id,
            player=player,
            now_ms=version * 1000 if now_ms is None else now_ms,
            version=version,
            dice=dice if dice is not None else Dice(self.secret_seed, self.room_id, version),
            seed_commitment=seed_commitment(self.secret_seed),
            secret_seed_hex=self.secret_seed.hex(),
        )

    def play(self, command: Any, *, player: str | None = None, dice: Dice | None = None) -> list[Any]:
        """Decide a command and apply its events; raises the rules' RuleError and changes nothing then."""
        acting = player if player is not None else (self.game.owner if self.state is not None else "owner")
        version = self.version + 1
        record = CommandRecord(command_id=f"command-{version}", room=self.room_id, player=acting,
                               server_time_ms=version * 1000, body={})
        envelopes, self.state = step(self.state, self.last_hash, record, self.secret_seed, command=command, dice=dice)
        events = [codec.decode_event(envelope) for envelope in envelopes]
        self.log += [(envelope.version, event) for envelope, event in zip(envelopes, events, strict=True)]
        self.last_hash = envelopes[-1].hash
        return events

    def events(self) -> list[Any]:
        return [event for _, event in self.log]
