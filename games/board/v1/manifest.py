"""The board rule-set's manifest: its Decider, the simple policy, the demo's shared challenge and the bench game."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.manifest import BenchScenario, Dice, RuleSet, free
from almanac.games.board.v1 import seats
from almanac.games.board.v1.data import CardLetter, Filled, MissionKey, Player, SeasonName, Terrain
from almanac.games.board.v1.game import DECIDER
from almanac.games.board.v1.policy import choose_command
from almanac.games.board.v1.state import BoardSetup


def policy(state: object, player: str, dice: Dice, now_ms: int) -> object:
    return choose_command(state, player, dice)  # type: ignore[arg-type]


ShapeRow = Annotated[str, free("a row of the element's shape: 1 filled, 0 empty", pattern="^[01]+$")]
Words = Annotated[str, free("text a person reads: the mission card's")]


class _View(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class CurrentElement(_View):
    number: int
    time: int
    terrain: Terrain
    shape: list[ShapeRow]  # rows of 0 and 1


class MissionCard(_View):
    card: CardLetter
    mission: MissionKey
    title: Words
    text: Words
    scored_in: list[SeasonName]


class SeasonScore(_View):
    season: SeasonName
    missions: dict[CardLetter, int]
    mountain_bonus: int
    total: int


class MissionPoints(_View):
    mission: MissionKey
    points: int


class ScoreTable(_View):
    total: int
    per_season: list[SeasonScore]
    per_mission: dict[CardLetter, MissionPoints]


class BoardView(_View):
    """What the player sees of a board game (game.BoardDecider.view): the map, time, the current element only."""

    player: Player | None  # None: the public's view, nobody's seat
    board: list[list[Filled | None]]  # None: an empty cell
    time: int
    time_remaining: int
    season: SeasonName | None
    season_time_remaining: int
    current_element: CurrentElement | None
    missions: list[MissionCard]
    mountain_bonus: bool
    scores: ScoreTable
    over: bool


class BoardResources(_View):
    """The game's clock, its counts and its score table (game.BoardDecider.resources)."""

    time: int
    time_remaining: int
    placed: int
    skipped: int
    shuffles: int
    total: int
    per_season: list[SeasonScore]
    per_mission: dict[CardLetter, MissionPoints]


def shown_view(view: dict[str, Any]) -> dict[str, Any]:
    """The board's view as the API shows it (``RuleSet.present_view``): its "" for nothing as null, an empty cell
    and nobody's view (the public's) alike. The rules' own view (game.BoardDecider.view) keeps its ""."""
    return {**view, "player": view["player"] or None,
            "board": [[cell or None for cell in row] for row in view["board"]]}


def ranks(setup: BoardSetup) -> bool:
    """A map ranks when played as the seed's (neither the mountain bonus nor the extended pool)."""
    return not setup.mountain_bonus and not setup.extended_pool


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays the seed as written (docs/architecture.md, "Rule-set versions").
    default=True,
    policy=policy,
    seat_bot=seats.seat_bot,  # the room decides with it: a rule, in seats.py, which the fingerprint covers
    bench=BenchScenario(description="complete solo games of the simple policy"),
    console_picture="almanac.games.board:picture.js",
    rulebook="games/board/RULES.md",
    examples=("examples/board.jsonl",),
    view_type=BoardView,
    present_view=shown_view,
    ranks=ranks,
    resources_type=BoardResources,
    demo_moves=40,
    # Board rooms of one public challenge deal the same cards, so the demo's players' scores compare.
    shared_challenge=True,
)
