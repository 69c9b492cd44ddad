"""Helpers for the claim tests (no tests here): drive a claim room through events.room like the engine."""

from __future__ import annotations

from typing import Any

import msgspec
from game_modules import game_module, game_names

from almanac.events import room
from almanac.events.errors import RuleError
from almanac.events.step import replay
from almanac.events.testing import RoomDriver, given_events

INDEX_BY_NAME, TERRAIN = game_names("claim@1", "seeding", "INDEX_BY_NAME", "TERRAIN")
ClaimState = game_module("claim@1", "state").ClaimState

SEED = b"claim-test-seed-0123456789abcdef"
HOUR = 3_600_000
MINUTE = 60_000
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z, the staking time of most stories


class ClaimGame(RoomDriver):
    """One claim room: create it, join the owner, then apply commands at given server times."""

    def __init__(
        self, created_ms: int = T0, owner: str = "ann", block: str = "valley-1/NE", room_id: str = "claim-1"
    ) -> None:
        super().__init__(room_id, SEED, created_ms)
        self.owner = owner
        self.now = created_ms
        options = {"block": block} if block else {}
        self.do(room.CreateRoom(ruleset="claim", options=options), player=owner, at=created_ms)
        self.do(room.JoinRoom(), player=owner, at=created_ms)

    def do(self, command: Any, player: str | None = None, at: int | None = None) -> list[Any]:
        """Decide and apply a command (a Struct or a JSON-like dict); returns its events."""
        at = self.now if at is None else at
        self.now = max(self.now, at)
        # Stories that stage a game without __init__ (ClaimGame.__new__) set room, owner, state, events, now only.
        vars(self).setdefault("envelopes", [])
        vars(self).setdefault("seed", SEED)
        return self.play(player or self.owner, command, now_ms=at)

    def refuse(self, command: Any, player: str | None = None, at: int | None = None) -> RuleError:
        """The RuleError a command gets; fails if it is accepted or if the state changes."""
        before = self.state
        try:
            self.do(command, player=player, at=at)
        except RuleError as error:
            assert self.state is before
            return error
        raise AssertionError(f"{command!r} was accepted")

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now

    @property
    def claim(self) -> ClaimState:
        assert self.state is not None
        return self.state.game

    def parcel(self, name: str):
        return self.claim.parcels[INDEX_BY_NAME[name]]


def fold_events(room_id: str, events: list[Any]) -> room.RoomState:
    """Replay events through the codec (encode, wrap, decode) and the room's evolve."""
    state = replay(given_events(room_id, "claim", events, player="ann"))
    assert state is not None
    return state


def timbered(state: ClaimState, zone: str | None = None) -> list[str]:
    """Names of parcels with timber standing, in row-major order (optionally of one zone)."""
    return [
        t.name
        for t, p in zip(TERRAIN, state.parcels, strict=True)
        if p.species is not None and (zone is None or (t.zone == zone and not t.meadow))
    ]


def as_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
