"""The sectors rule-set's manifest: its Decider, the simple policy and the bench's full colony."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.manifest import BenchScenario, Dice, RuleSet, free
from almanac.games.sectors import data, seats
from almanac.games.sectors.commands import EndSeason
from almanac.games.sectors.game import DECIDER
from almanac.games.sectors.policy import choose_command
from almanac.games.sectors.state import (
    BuildingName,
    Good,
    Owner,
    Season,
    SectorSetup,
    SectorType,
    Setup,
    goods_of,
)

SIDE = 8
# Each colony plays a default-length game (10 years, 40 seasons) and a new one starts: a colony run
# for centuries saturates at the ledger's ceiling, which is not a game anyone plays.
YEARS = 10

# Every sector explored and built up, types in a repeating pattern so each row mixes all three.
PATTERN = ("prairie", "forest", "mountain", "prairie")
BUILDINGS = {
    "prairie": ["farm", "farm", "kitchen", "factory"],
    "forest": ["lumber_camp", "sawmill", "farm"],
    "mountain": ["mine", "mint", "factory"],
}
POPULATION = {"prairie": 300, "forest": 150, "mountain": 80}


def full_colony_options() -> dict[str, Any]:
    sectors = []
    for row in range(SIDE):
        for column in range(SIDE):
            kind = PATTERN[(row + column) % len(PATTERN)]
            sectors.append(
                {
                    "row": row,
                    "column": column,
                    "type": kind,
                    "population": POPULATION[kind],
                    "buildings": BUILDINGS[kind],
                }
            )
    stock = {"food": 20_000, "wood": 5_000, "gold": 2_000, "lumber": 500, "coins": 200}
    return {"years": YEARS, "setup": {"rows": SIDE, "columns": SIDE, "stock": stock, "sectors": sectors}}


def policy(state: Any, player: str, dice: Dice, now_ms: int) -> Any:
    return choose_command(state, player, dice)


def end_seasons(state: Any, player: str, dice: Dice, now_ms: int) -> Any:
    """The bench's player: every command ends a season, so each one runs all three phases on every sector."""
    return EndSeason()


_COLONY = full_colony_options()
_BUILT = sum(len(sector["buildings"]) for sector in _COLONY["setup"]["sectors"])

Place = Annotated[str, free("an explored sector's place: its row and column", pattern=r"^[0-9]+,[0-9]+$")]


class _View(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class SectorView(_View):
    row: int
    column: int
    explored: bool
    type: SectorType | None = None  # the rest only once explored (an unexplored type does not exist yet)
    population: int | None = None
    population_cap: int | None = None
    buildings: list[BuildingName] | None = None
    building_limit: int | None = None
    starved_seasons_ago: int | None = None


class SectorsView(_View):
    """What the colony's owner sees (game.SectorsDecider.view): every explored sector; unexplored ones as such."""

    owner: Owner
    rows: int
    columns: int
    season: Season
    year: int
    years: int
    over: bool
    stock: dict[Good, int]
    victory_points: int
    population: int
    grid: list[list[SectorView]]


class SectorsResources(_View):
    """The colony's calendar, stock and counts (game.SectorsDecider.resources)."""

    season: Season
    year: int
    stock: dict[Good, int]
    victory_points: int
    population: int
    population_by_sector: dict[Place, int]  # "row,column" of each explored sector
    buildings: int
    explored: int
    sectors: int


def ranks(setup: Setup) -> bool:
    """A colony ranks when it is the one ``{}`` makes for its owner (a home of the default size and population at
    the grid's middle, the default stock and years; its home's type, drawn there, is not looked at: one named in
    the options cannot be told from one drawn). An explicit setup, another grid, stock or length never ranks."""
    home = setup.sectors[0] if len(setup.sectors) == 1 else None
    standard = Setup(owner=setup.owner, rows=data.DEFAULT_ROWS, columns=data.DEFAULT_COLUMNS, season="spring", year=1,
                     years=data.DEFAULT_YEARS, stock=goods_of(data.DEFAULT_STARTING_STOCK),
                     sectors=(SectorSetup(row=(data.DEFAULT_ROWS - 1) // 2, column=(data.DEFAULT_COLUMNS - 1) // 2,
                                          type=home.type if home else None,
                                          population=data.DEFAULT_HOME_POPULATION),))
    return home is not None and setup == standard


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays the seed as written (docs/architecture.md, "Rule-set versions").
    default=True,
    policy=policy,
    seat_bot=seats.seat_bot,  # the room decides with it: a rule, in seats.py, which the fingerprint covers
    bench=BenchScenario(
        description=(f"full {SIDE}x{SIDE} colonies ({SIDE * SIDE} explored sectors, {_BUILT} buildings) played "
                     f"season by season for {YEARS} years each"),
        options=_COLONY,
        policy=end_seasons,
    ),
    console_picture="almanac.games.sectors:picture.js",
    rulebook="games/sectors/RULES.md",
    examples=("examples/sectors.jsonl",),
    # The buildings the rules know (rules.py refuses others with these as ``allowed``): enums in the API.
    allowed_values={"build.building": tuple(data.BUILDING_NAMES), "demolish.building": tuple(data.BUILDING_NAMES)},
    view_type=SectorsView,
    resources_type=SectorsResources,
    demo_moves=30,
    ranks=ranks,
)
