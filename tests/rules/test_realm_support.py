"""Helpers shared by the realm tests (a game driver with scripted dice, face scripts), and their own checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from game_modules import game_module, game_names

from almanac.events.errors import RuleError
from almanac.events.testing import RoomDriver

DECIDER = game_module("realm@1", "game").DECIDER
data = game_module("realm@1", "data")
City, RealmState = game_names("realm@1", "state", "City", "RealmState")

SEED = b"realm tests secret seed 32 bytes"
FACE_VALUE = {"star": 0, "moon": 3, "skull": 4, "blank": 5}


def faces(*names: str) -> list[int]:
    """The randbelow(6) values that roll these faces; ``"3 star"`` repeats a face."""
    values = []
    for name in names:
        times, _, face = name.rpartition(" ")
        values += [FACE_VALUE[face]] * (int(times) if times else 1)
    return values


class Game(RoomDriver):
    """One realm room driven through the one room step (`almanac.events.testing.RoomDriver`), every event
    through the codec and an envelope.

    ``send`` takes the dice the command may draw: a list of scripted values (all must be used unless
    ``leftover`` is allowed), or None for real dice from the room's seed. ``ruleset`` picks the
    version: these tests pin version 1's rules (``realm@1``); version 2's change has its own tests.
    """

    def __init__(
        self,
        players: Sequence[str] = ("alice", "bob"),
        room_id: str = "realm-room",
        seed: bytes = SEED,
        now_ms: int = 1_000,
        ruleset: str = "realm@1",
        **options: Any,
    ) -> None:
        super().__init__(room_id, seed, now_ms)
        self.room_id = room_id
        self.send(
            players[0],
            {"kind": "create_room", "ruleset": ruleset, "options": {"players": list(players), **options}},
            dice=[],
        )
        for player in players:
            self.send(player, {"kind": "join_room"}, dice=[])

    @classmethod
    def created_by(cls, creator: str, options: dict[str, Any], room_id: str = "realm-room") -> Game:
        """A room ``creator`` created with these options, before anyone joined."""
        game = cls.__new__(cls)
        RoomDriver.__init__(game, room_id, SEED, 1_000)
        game.room_id = room_id
        game.send(creator, {"kind": "create_room", "ruleset": "realm@1", "options": options}, dice=[])
        return game

    @property
    def game(self) -> RealmState:
        assert self.state is not None
        return self.state.game

    def city(self, name: str) -> City:
        return self.game.cities[name]

    def stock(self, name: str, resource: str) -> int:
        return self.city(name).stock[resource]

    def send(  # type: ignore[override]
        self,
        player: str,
        body: dict[str, Any],
        dice: list[int] | None = None,
        now_ms: int | None = None,
        leftover: bool = False,
    ) -> list[Any]:
        """Decide and apply one command; returns its events (decoded back from stored bytes)."""
        return self.apply(player, body, dice=dice, now_ms=now_ms, leftover=leftover)[1]

    def refused(self, player: str, body: dict[str, Any], dice: list[int] | None = None) -> RuleError:
        """The RuleError a command meets; the state must not change."""
        before = self.state
        try:
            self.send(player, body, dice=dice if dice is not None else [], leftover=True)
        except RuleError as error:
            assert self.state is before
            return error
        raise AssertionError(f"{body} was accepted")

    def end_season(self) -> list[Any]:
        """Every player whose turn is open ends it."""
        found: list[Any] = []
        for player in self.game.players:
            if player not in self.game.turn_ended:
                found += self.send(player, {"kind": "end_turn"}, dice=[])
        return found

    def go_to(self, season: str) -> None:
        while data.SEASONS[self.game.season_index % 4] != season:
            self.end_season()

    def game_events(self) -> list[Any]:
        return [e for e in self.events if type(e) in DECIDER.event_types]


def of_type(found: list[Any], kind: type) -> list[Any]:
    return [event for event in found if isinstance(event, kind)]


def test_faces_map_to_the_rulings_die() -> None:
    assert [data.FACES[v] for v in faces("2 star", "moon", "skull", "blank")] == [
        "star",
        "star",
        "moon",
        "skull",
        "blank",
    ]
    assert data.FACES.count("star") == 3 and len(data.FACES) == 6


def test_the_driver_refuses_unused_scripted_dice() -> None:
    game = Game()
    try:
        game.send("alice", {"kind": "cut_wood"}, dice=faces("4 star"))
    except AssertionError as error:
        assert "not drawn" in str(error)
    else:
        raise AssertionError("unused dice went unnoticed")
