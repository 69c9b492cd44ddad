"""The numbers of the sectors rule-set: seasons, goods, sector types and the building table, as exact data."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

SEASONS: tuple[str, ...] = ("spring", "summer", "fall", "winter")
SEASONS_PER_YEAR = len(SEASONS)

# Every good the global stock holds; the order is the field order of `state.Goods`.
GOODS: tuple[str, ...] = ("food", "wood", "gold", "lumber", "coins", "victory_points")

# The seed: "Initial the population in a sector is one and there are no buildings."
EXPLORED_SECTOR_POPULATION = 1

# A generated colony's start (our numbers): enough food for about three years of a 50-person
# prairie or forest, and enough wood for two or three first buildings.
DEFAULT_ROWS = 8
DEFAULT_COLUMNS = 8
DEFAULT_HOME_POPULATION = 50
DEFAULT_STARTING_STOCK: dict[str, int] = {"food": 200, "wood": 100, "gold": 20}
DEFAULT_YEARS = 10
MAXIMUM_GRID_SIDE = 64

# The colony's books hold at most a quadrillion of anything: the seed sets no limit on a prairie,
# which grows 10% a season forever, but stored numbers are 64-bit integers and totals over a full
# 64x64 grid must still fit. Populations and stocks saturate here; no real game comes near it.
LEDGER_CEILING = 10**15


@dataclass(frozen=True)
class HarvestCut:
    """A harvest multiplier that applies while a sector's population or building count is above a threshold."""

    measure: str  # "population" or "buildings"
    above: int
    multiplier: Fraction
    reason: str


@dataclass(frozen=True)
class ExtraHarvest:
    """A harvest on the sector's whole population (not only the idle workers) in one season."""

    season: str
    good: str
    per_person: Fraction
    reason: str


@dataclass(frozen=True)
class SectorType:
    """One kind of land: everything the rules need to know about it, so a new kind is one new entry."""

    name: str
    # Units per idle worker per season, before the sector's harvest multipliers.
    harvest_rates: tuple[tuple[str, Fraction], ...]
    food_need: dict[str, Fraction]
    growth_rate: Fraction
    growth_seasons: tuple[str, ...]
    # 0 means starvation never stops growth; N means no growth if the sector starved in any of the
    # last N seasons, the current one included.
    growth_blocked_by_starvation_within: int
    population_cap: int | None
    production_multiplier: dict[str, Fraction] = field(default_factory=dict)
    production_closed_in: tuple[str, ...] = ()
    harvest_closed_in: tuple[str, ...] = ()
    harvest_cuts: tuple[HarvestCut, ...] = ()
    extra_harvest: tuple[ExtraHarvest, ...] = ()
    building_limit: int | None = None
    banned_buildings: tuple[str, ...] = ()

    def production_multiplier_in(self, season: str) -> Fraction:
        return self.production_multiplier.get(season, Fraction(1))


MOUNTAIN = SectorType(
    name="mountain",
    harvest_rates=(("wood", Fraction(1, 4)), ("food", Fraction(0)), ("gold", Fraction(1))),
    food_need={season: Fraction(1, 2) for season in SEASONS},
    # The seed says ".33", not one third: 0.33 exactly.
    growth_rate=Fraction(33, 100),
    growth_seasons=("fall",),
    growth_blocked_by_starvation_within=SEASONS_PER_YEAR,
    population_cap=100,
    production_multiplier={"fall": Fraction(1, 2)},
    production_closed_in=("winter",),
    harvest_closed_in=("winter",),
    extra_harvest=(
        ExtraHarvest("spring", "gold", Fraction(1, 10), "a mountain yields 0.1 gold per person in spring"),
    ),
    building_limit=5,
)

PRAIRIE = SectorType(
    name="prairie",
    harvest_rates=(("wood", Fraction(1, 4)), ("food", Fraction(1)), ("gold", Fraction(0))),
    food_need={
        "spring": Fraction(1, 5),
        "summer": Fraction(1, 5),
        "fall": Fraction(1, 5),
        "winter": Fraction(3, 5),
    },
    growth_rate=Fraction(1, 10),
    growth_seasons=SEASONS,
    growth_blocked_by_starvation_within=0,
    population_cap=None,
    production_multiplier={"winter": Fraction(11, 10)},
    harvest_cuts=(
        HarvestCut("population", 1000, Fraction(1, 2), "more than 1000 people: harvest at 50%"),
        HarvestCut("buildings", 10, Fraction(1, 5), "more than 10 buildings: harvest at 20%"),
    ),
)

FOREST = SectorType(
    name="forest",
    harvest_rates=(("wood", Fraction(6, 5)), ("food", Fraction(3, 10)), ("gold", Fraction(1, 10))),
    food_need={
        "spring": Fraction(3, 10),
        "summer": Fraction(3, 10),
        "fall": Fraction(1, 10),
        "winter": Fraction(7, 10),
    },
    growth_rate=Fraction(3, 10),
    growth_seasons=("winter",),
    growth_blocked_by_starvation_within=0,
    population_cap=200,
    # The seed's rule list says 0.4 extra food per person in fall; its worked example's 0.1 is the slip.
    extra_harvest=(
        ExtraHarvest("fall", "food", Fraction(2, 5), "a forest yields 0.4 extra food per person in fall"),
    ),
    banned_buildings=("mint", "factory"),
)

# Exploration draws an index into this tuple, so its order is part of the stored format:
# append new kinds at the end, never reorder.
SECTOR_TYPES: dict[str, SectorType] = {kind.name: kind for kind in (MOUNTAIN, PRAIRIE, FOREST)}
SECTOR_TYPE_NAMES: tuple[str, ...] = tuple(SECTOR_TYPES)


@dataclass(frozen=True)
class Building:
    """One row of the building table: who works it, what it takes from the stock, what it gives back."""

    name: str
    crew: int
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    cost: tuple[tuple[str, int], ...]
    why: str


# Crews of the mint (20) and sawmill (14) and the mint's recipe are the seed's; the rest are ours,
# chosen so that (a) a raw-goods building beats harvesting by hand by about a third, so building
# one is worth its wood, (b) a victory point needs all three lines of the chain (gold or food into
# coins, wood into lumber, both into the factory), and (c) outputs of 2 or more survive the
# mountain's fall halving while the mint's single coin, fixed by the seed, does not.
BUILDINGS: dict[str, Building] = {
    building.name: building
    for building in (
        Building(
            "farm",
            crew=10,
            inputs=(),
            outputs=(("food", 14),),
            cost=(("wood", 20),),
            why="10 prairie hands harvest 10 food; a farm turns them into 14 food anywhere",
        ),
        Building(
            "lumber_camp",
            crew=8,
            inputs=(),
            outputs=(("wood", 14),),
            cost=(("wood", 15),),
            why="8 forest hands harvest 9 wood; a camp turns them into 14 wood anywhere",
        ),
        Building(
            "mine",
            crew=12,
            inputs=(),
            outputs=(("gold", 16),),
            cost=(("wood", 30),),
            why="12 mountain hands harvest 12 gold; a mine turns them into 16 gold anywhere",
        ),
        Building(
            "mint",
            crew=20,
            inputs=(("gold", 7),),
            outputs=(("coins", 1),),
            cost=(("wood", 40), ("gold", 10)),
            why="the seed's mint: crew 20, 7 gold into 1 coin",
        ),
        Building(
            "sawmill",
            crew=14,
            inputs=(("wood", 10),),
            outputs=(("lumber", 5),),
            cost=(("wood", 30),),
            why="the seed's crew of 14; two wood make one lumber",
        ),
        Building(
            "kitchen",
            crew=16,
            inputs=(("food", 30),),
            outputs=(("coins", 2),),
            cost=(("wood", 30), ("gold", 5)),
            why="the food road to coins: 15 food a coin, dearer in hands than the mint but needs no gold",
        ),
        Building(
            "factory",
            crew=25,
            inputs=(("coins", 4), ("lumber", 10)),
            outputs=(("victory_points", 2),),
            cost=(("wood", 60), ("lumber", 20), ("gold", 20)),
            why="2 coins and 5 lumber a victory point; needs lumber to build, so a sawmill comes first",
        ),
    )
}
BUILDING_NAMES: tuple[str, ...] = tuple(BUILDINGS)

# --- the running score (ours: the seed scores nothing before the end) ------------------------------

# A colony's score at any moment: its victory points dominate, and what it has built toward them
# counts too, so a game scores from its first season. Worked goods count at a fraction of the victory
# point they lead to (a point takes 2 coins and 5 lumber: 2 x 10 + 5 x 4 = 40 of its 100); raw food,
# wood and gold do not count (they are for spending, not keeping). Every term is public: the stock,
# the people and buildings of explored sectors, and how many sectors are explored.
SCORE_PER_VICTORY_POINT = 100
SCORE_PER_COIN = 10
SCORE_PER_LUMBER = 4
SCORE_PER_PERSON = 1
SCORE_PER_BUILDING = 10
SCORE_PER_EXPLORED_SECTOR = 5
