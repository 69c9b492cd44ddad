"""Testing rooms in memory through the one room step: a driver with scripted dice, and given / when / then.

    room = RoomDriver("r1").given(("ann", {"kind": "create_room", "ruleset": "board"}), ("ann", {"kind": "join_room"}))
    then = room.when("ann", PlaceElement(...), dice=[3, 1])
    then.accepted(BoardPlaced)            # or: then.refused("board.cell_taken")

Every command goes through ``events.step.step`` exactly as the engine decides it (decide, seal into
hash-chained envelopes, evolve from the decoded bytes), so a test sees what a stored room would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from almanac.events import codec
from almanac.events.dice import Dice, ScriptedDice
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import RuleError
from almanac.events.room import RoomState
from almanac.events.step import CommandRecord, replay, seal_events, step

DEFAULT_SEED = b"s" * 32


def scripted(*values: int) -> ScriptedDice:
    """Dice that draw exactly these values, in order (running out is an error)."""
    return ScriptedDice(list(values))


def _body(command: Any) -> dict[str, Any]:
    if isinstance(command, dict):
        return command
    try:
        return msgspec.to_builtins(command)
    except (TypeError, msgspec.EncodeError):
        return {}


class Then:
    """What one command did: its events (decoded from the stored bytes) or the rule error that refused it."""

    def __init__(self, events: list[Any], error: RuleError | None) -> None:
        self.events = events
        self.error = error

    def accepted(self, *types: type) -> list[Any]:
        """The events, checking the command was accepted (and, given ``types``, produced exactly those kinds)."""
        assert self.error is None, f"refused: {self.error.code}: {self.error.message}"
        if types:
            assert [type(e) for e in self.events] == list(types), [type(e).__name__ for e in self.events]
        return self.events

    def refused(self, code: str | None = None) -> RuleError:
        """The rule error, checking the command was refused (with ``code`` when given)."""
        assert self.error is not None, f"accepted: {[type(e).__name__ for e in self.events]}"
        if code is not None:
            assert self.error.code == code, f"{self.error.code}: {self.error.message}"
        return self.error


class RoomDriver:
    """One room in memory, driven command by command through the engine's own room step."""

    def __init__(self, room: str = "room-1", seed: bytes = DEFAULT_SEED, now_ms: int = 1_000) -> None:
        self.room = room
        self.seed = seed
        self.now_ms = now_ms
        self.state: RoomState | None = None
        self.envelopes: list[Envelope] = []
        self.events: list[Any] = []

    @property
    def version(self) -> int:
        return self.state.version if self.state is not None else 0

    @property
    def last_hash(self) -> str:
        return self.envelopes[-1].hash if self.envelopes else GENESIS_HASH

    @property
    def game(self) -> Any:
        assert self.state is not None, "the room has not been created"
        return self.state.game

    def send(self, player: str, command: Any, **options: Any) -> list[Envelope]:
        """Decide one command and apply it; the new envelopes (see ``apply`` for the options)."""
        return self.apply(player, command, **options)[0]

    def play(self, player: str, command: Any, **options: Any) -> list[Any]:
        """Decide one command and apply it; its events, decoded back from the stored bytes."""
        return self.apply(player, command, **options)[1]

    def apply(
        self,
        player: str,
        command: Any,
        *,
        now_ms: int | None = None,
        command_id: str | None = None,
        dice: Dice | Sequence[int] | None = None,
        leftover: bool = False,
    ) -> tuple[list[Envelope], list[Any]]:
        """Decide one command (a JSON-like body, decoded as the engine does, or a command Struct) and apply it.

        ``dice``: None for the room's own dice, a Dice, or a list of scripted values (all of which
        must be drawn unless ``leftover``). Returns the new envelopes and their decoded events; a
        refusal raises RuleError and changes nothing.
        """
        if now_ms is not None:
            self.now_ms = now_ms
        source = ScriptedDice(list(dice)) if dice is not None and not isinstance(dice, Dice) else dice
        record = CommandRecord(command_id=command_id or f"cmd-{self.version + 1}", room=self.room, player=player,
                               server_time_ms=self.now_ms, body=_body(command))
        envelopes, state = step(self.state, self.last_hash, record, self.seed,
                                command=None if isinstance(command, dict) else command, dice=source)
        if isinstance(source, ScriptedDice) and not leftover:
            assert source.remaining == 0, f"{source.remaining} scripted dice were not drawn"
        decoded = [codec.decode_event(envelope) for envelope in envelopes]
        for envelope, event in zip(envelopes, decoded, strict=True):
            # An event must survive its way through the codec unchanged: encoding what was decoded
            # gives back the stored bytes.
            assert codec.encode_event(event) == (envelope.type, envelope.payload), \
                "an event changed on its way through the codec"
        self.state = state
        self.envelopes += envelopes
        self.events += decoded
        return envelopes, decoded

    def refusal(self, player: str, command: Any, **options: Any) -> RuleError:
        """The RuleError a command meets; fails if it is accepted or changes anything."""
        before, logged = self.state, len(self.envelopes)
        options.setdefault("leftover", True)
        try:
            self.apply(player, command, **options)
        except RuleError as error:
            assert self.state is before and len(self.envelopes) == logged, "a refused command changes nothing"
            return error
        raise AssertionError(f"{command!r} was accepted")

    # --- given / when / then -----------------------------------------------------------------

    def given(self, *commands: tuple[str, Any]) -> RoomDriver:
        """Apply (player, command) pairs that must all be accepted; returns the driver."""
        for player, command in commands:
            self.apply(player, command)
        return self

    def when(self, player: str, command: Any, **options: Any) -> Then:
        """Decide one command; the answer says what it did (events, or the refusal, which changed nothing)."""
        before, logged = self.state, len(self.envelopes)
        try:
            return Then(self.apply(player, command, **options)[1], None)
        except RuleError as error:
            assert self.state is before and len(self.envelopes) == logged, "a refused command changes nothing"
            return Then([], error)

    def replayed(self) -> RoomState | None:
        """The room folded from its stored envelopes alone (it must equal ``state``)."""
        return replay(self.envelopes)


def given_events(room: str, ruleset: str, events: Iterable[Any], player: str = "player") -> list[Envelope]:
    """Events as the stored, hash-chained envelopes of one room (a log to replay or verify)."""
    return seal_events(room, ruleset, events, player)
