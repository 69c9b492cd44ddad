"""Helpers shared by the board tests (a game driver, scripted deals, pictured boards), and their own checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from game_modules import game_module, game_names

from almanac.events import room
from almanac.events.decider import Context
from almanac.events.dice import Dice, ScriptedDice, seed_commitment
from almanac.events.envelope import Envelope
from almanac.events.step import replay
from almanac.events.testing import RoomDriver, given_events

(BASE_MISSIONS, DECK_NUMBERS, EMPTY, FARM, FOREST, MOUNTAIN, SIZE, VILLAGE, WATER) = game_names(
    "board@1", "data", "BASE_MISSIONS", "DECK_NUMBERS", "EMPTY", "FARM", "FOREST", "MOUNTAIN", "SIZE", "VILLAGE", "WATER")
choose_command = game_module("board@1", "policy").choose_command
STARTING_BOARD, Board = game_names("board@1", "state", "STARTING_BOARD", "Board")

PICTURE = {".": EMPTY, "M": MOUNTAIN, "F": FOREST, "V": VILLAGE, "P": FARM, "W": WATER}
"""Letters of a pictured board: F forest, V village, P farm (a ploughed field), W water, M mountain."""

SEED = b"board tests secret seed 32 bytes"


def board_from(*rows: str) -> Board:
    """A board from up to 11 pictured rows of 11 letters (spaces ignored); rows left out are empty."""
    lines = [row.replace(" ", "") for row in rows]
    assert len(lines) <= SIZE and all(len(line) == SIZE for line in lines), "pictures are rows of 11"
    lines += ["." * SIZE] * (SIZE - len(lines))
    return tuple(tuple(PICTURE[letter] for letter in line) for line in lines)


def with_terrain(terrain: str, cells: Sequence[tuple[int, int]], board: Board = STARTING_BOARD) -> Board:
    """``board`` (default: the starting map, mountains printed) with ``terrain`` on ``cells``."""
    grid = [list(line) for line in board]
    for row, column in cells:
        grid[row][column] = terrain
    return tuple(tuple(line) for line in grid)


def shuffle_values(target: Sequence[Any], source: Sequence[Any]) -> list[int]:
    """The draws that make `Dice.shuffle(source)` (Fisher-Yates from the last position down) give `target`."""
    current = list(source)
    values = []
    for i in range(len(current) - 1, 0, -1):
        j = current.index(target[i])
        assert j <= i
        values.append(j)
        current[i], current[j] = current[j], current[i]
    return values


def deal_dice(deck: Sequence[int], missions: Sequence[str], pool: Sequence[str]) -> ScriptedDice:
    """Scripted dice for `setup`: the deck shuffle, then the mission pool shuffle (first four dealt A-D)."""
    order = list(missions) + [key for key in pool if key not in missions]
    return ScriptedDice(shuffle_values(deck, DECK_NUMBERS) + shuffle_values(order, pool))


def deal(first: Sequence[int] = ()) -> ScriptedDice:
    """Setup dice putting ``first`` on top of the deck, the rest in printed order; cards A-D the base cards in order."""
    deck = tuple(first) + tuple(n for n in DECK_NUMBERS if n not in first)
    return deal_dice(deck, BASE_MISSIONS, BASE_MISSIONS)


def dealt_game(first: Sequence[int] = (), options: dict[str, Any] | None = None, player: str = "ada") -> Game:
    """A created and joined game dealt by ``deal(first)``."""
    return Game(player=player).create(options, dice=deal(first))


class Game:
    """Drives one room through the one room step (`almanac.events.testing.RoomDriver`), keeping the event log."""

    def __init__(self, room_id: str = "board-room", player: str = "ada", seed: bytes = SEED) -> None:
        self.driver = RoomDriver(room_id, seed)
        self.room_id = room_id
        self.salt = room_id  # "challenge" for a challenge room (see create)
        self.player = player
        self.seed = seed
        self.now_ms = 1_000

    @property
    def state(self) -> room.RoomState | None:
        return self.driver.state

    @state.setter
    def state(self, staged: room.RoomState | None) -> None:
        self.driver.state = staged  # a test staging a position (e.g. a crowded map)

    @property
    def events(self) -> list[Any]:
        return self.driver.events

    @events.setter
    def events(self, log: list[Any]) -> None:
        self.driver.events = log

    @property
    def game(self) -> Any:
        assert self.state is not None
        return self.state.game

    @property
    def version(self) -> int:
        return self.driver.version

    def context(self, dice: Dice | None = None, player: str | None = None) -> Context:
        """The context the next command is decided in (for tests that call the rule-set's decide directly)."""
        version = self.version + 1
        return Context(
            room=self.room_id,
            player=player or self.player,
            now_ms=self.now_ms,
            version=version,
            dice=dice if dice is not None else Dice(self.seed, self.salt, version),
            seed_commitment=seed_commitment(self.seed),
            secret_seed_hex=self.seed.hex(),
        )

    def play(self, command: Any, dice: Dice | None = None, player: str | None = None) -> list[Any]:
        """Decide and apply one command; raises RuleError (and changes nothing) when refused."""
        self.now_ms += 1_000
        return self.driver.play(player or self.player, command, dice=dice, leftover=True, now_ms=self.now_ms)

    def create(
        self, options: dict[str, Any] | None = None, dice: Dice | None = None, challenge: str | None = None
    ) -> Game:
        """Create the room (from a public challenge, as the engine does: its public seed, the salt
        "challenge") and join it as the player."""
        if challenge is not None:
            self.seed, self.salt = room.challenge_seed(challenge), "challenge"
        self.play(room.CreateRoom(ruleset="board", options=options or {}, challenge=challenge), dice=dice)
        self.play(room.JoinRoom())
        return self

    def play_out(self, policy_seed: bytes | None = None, moves: int | None = None) -> Game:
        """Play the simple policy (dice from ``policy_seed``, default the room's seed) to the end or for ``moves``."""
        dice = Dice(policy_seed or self.seed, "policy", 0)
        played = 0
        while not self.state.ended and played != moves:
            command = choose_command(self.game, self.player, dice)
            assert command is not None, "the policy always has a move while the game runs"
            self.play(command)
            played += 1
        return self

    def folded(self) -> room.RoomState:
        """The room state folded from the log alone."""
        state = replay(given_events(self.room_id, "board", self.events, self.player))
        assert state is not None
        return state

    def envelopes(self) -> list[Envelope]:
        """The log as sealed, hash-chained envelopes (the stored form)."""
        return given_events(self.room_id, "board", self.events, self.player)


def test_shuffle_values_reproduce_the_wanted_deck_order():
    wanted = (16, 3, 1, 9, 2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15)
    assert ScriptedDice(shuffle_values(wanted, DECK_NUMBERS)).shuffle(DECK_NUMBERS) == wanted


def test_pictured_boards_read_every_terrain_letter():
    board = board_from("FVPWM......")
    assert board[0][:6] == (FOREST, VILLAGE, FARM, WATER, MOUNTAIN, EMPTY)
    assert board[1:] == ((EMPTY,) * SIZE,) * (SIZE - 1)
