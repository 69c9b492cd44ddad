"""Helpers shared by the realm tests (a game driver with scripted dice, face scripts), and their own checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from almanac.events import codec, room
from almanac.events.decider import Context
from almanac.events.dice import Dice, ScriptedDice, seed_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import RuleError
from almanac.events.hashing import seal
from almanac.events.realm import DECIDER, data
from almanac.events.realm.state import City, RealmState

SEED = b"realm tests secret seed 32 bytes"
FACE_VALUE = {"star": 0, "moon": 3, "skull": 4, "blank": 5}


def faces(*names: str) -> list[int]:
    """The randbelow(6) values that roll these faces; ``"3 star"`` repeats a face."""
    values = []
    for name in names:
        times, _, face = name.rpartition(" ")
        values += [FACE_VALUE[face]] * (int(times) if times else 1)
    return values


class Game:
    """One realm room driven through `events.room.decide` / `evolve`, every event through the codec and an envelope.

    ``send`` takes the dice the command may draw: a list of scripted values (all must be used unless
    ``leftover`` is allowed), or None for real dice from the room's seed.
    """

    def __init__(
        self,
        players: Sequence[str] = ("alice", "bob"),
        room_id: str = "realm-room",
        seed: bytes = SEED,
        now_ms: int = 1_000,
        **options: Any,
    ) -> None:
        self.room_id = room_id
        self.seed = seed
        self.state: room.RoomState | None = None
        self.envelopes: list[Envelope] = []
        self.events: list[Any] = []
        self.now_ms = now_ms
        self.send(
            players[0],
            {"kind": "create_room", "ruleset": "realm", "options": {"players": list(players), **options}},
            dice=[],
        )
        for player in players:
            self.send(player, {"kind": "join_room"}, dice=[])

    @classmethod
    def created_by(cls, creator: str, options: dict[str, Any], room_id: str = "realm-room") -> Game:
        """A room ``creator`` created with these options, before anyone joined."""
        game = cls.__new__(cls)
        game.room_id, game.seed, game.state, game.envelopes, game.events, game.now_ms = (
            room_id, SEED, None, [], [], 1_000
        )
        game.send(creator, {"kind": "create_room", "ruleset": "realm", "options": options}, dice=[])
        return game

    @property
    def game(self) -> RealmState:
        assert self.state is not None
        return self.state.game

    def city(self, name: str) -> City:
        return self.game.cities[name]

    def stock(self, name: str, resource: str) -> int:
        return self.city(name).stock[resource]

    def send(
        self,
        player: str,
        body: dict[str, Any],
        dice: list[int] | None = None,
        now_ms: int | None = None,
        leftover: bool = False,
    ) -> list[Any]:
        """Decide and apply one command; returns its events (decoded back from stored bytes)."""
        if now_ms is not None:
            self.now_ms = now_ms
        command = codec.decode_command(self.state.ruleset if self.state else None, body)
        version = (self.state.version if self.state else 0) + 1
        source: Dice = ScriptedDice(dice) if dice is not None else Dice(self.seed, self.room_id, version)
        ctx = Context(
            room=self.room_id,
            player=player,
            now_ms=self.now_ms,
            version=version,
            dice=source,
            seed_commitment=seed_commitment(self.seed),
            secret_seed_hex=self.seed.hex(),
        )
        decided = room.decide(self.state, command, ctx)
        if isinstance(source, ScriptedDice) and not leftover:
            assert source.remaining == 0, f"{source.remaining} scripted dice were not drawn"
        new = []
        for event in decided:
            event_type, payload = codec.encode_event(event)
            previous = self.envelopes[-1].hash if self.envelopes else GENESIS_HASH
            envelope = seal(
                Envelope(
                    room=self.room_id,
                    version=(self.state.version if self.state else 0) + 1,
                    ruleset="realm",
                    type=event_type,
                    payload=payload,
                    command_id=f"cmd-{version}",
                    player=player,
                    server_time_ms=self.now_ms,
                    previous_hash=previous,
                )
            )
            decoded = codec.decode_event(envelope)
            assert decoded == event, "an event changed on its way through the codec"
            self.state = room.evolve(self.state, decoded, self.room_id, envelope.version)
            self.envelopes.append(envelope)
            self.events.append(decoded)
            new.append(decoded)
        return new

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
