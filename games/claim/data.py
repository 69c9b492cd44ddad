"""The claim's numbers: the seed's map constants and our timber-and-growth tables, as exact data."""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, NamedTuple

from almanac.events.manifest import free, one_of

# --- the seed's constants (rules.json of seed 001) ----------------------------------------------

N = 8  # parcels per side; parcel index = r * N + c
PARCELS = N * N
ACRES_PER_PARCEL = Fraction(5, 2)
LANDING = (7, 1)  # zero-based (row, column): B8
LANDING_INDEX = LANDING[0] * N + LANDING[1]


# The seeding mixes are IEEE doubles on purpose: the seed defines pickSpecies as a running float sum,
# and this is the one place the rule-set follows double arithmetic (see seeding.py).
# Order matters: pickSpecies walks each mix in the order the seed's table lists it.
class Zone(NamedTuple):
    key: str
    name: str
    mix: tuple[tuple[str, float], ...]  # (species, share) in the seed table's order
    replant: tuple[str, ...]  # species a player may replant


ZONES: dict[str, Zone] = {
    z.key: z
    for z in (
        Zone(
            "bottom",
            "River bottom",
            (("rc", 0.4), ("cw", 0.2), ("wh", 0.2), ("gf", 0.2)),
            ("rc", "wh", "gf", "cw"),
        ),
        Zone(
            "bench",
            "Bench ground",
            (("wp", 0.28), ("df", 0.27), ("l", 0.15), ("gf", 0.12), ("wh", 0.1), ("lp", 0.08)),
            ("wp", "df", "l", "gf", "lp"),
        ),
        Zone(
            "ridge",
            "Steep, dry ridge",
            (("pp", 0.45), ("l", 0.3), ("df", 0.15), ("lp", 0.1)),
            ("pp", "l", "df", "lp"),
        ),
    )
}
ZONE_ORDER = ("ridge", "bottom", "bench")

# The seed's draw constants, kept as the doubles its pseudo-code uses.
OLD_CHANCE = 0.22
OLD_AGE_MIN_HOURS, OLD_AGE_SPAN_HOURS = 22.0, 30.0
YOUNG_AGE_MIN_HOURS, YOUNG_AGE_SPAN_HOURS = 1.0, 17.0
MS_PER_HOUR = 3_600_000

LCG_MULTIPLIER = 1664525
LCG_INCREMENT = 1013904223
LCG_MODULUS = 1 << 32

# --- timber and growth (ours: the page the seed points at but does not include) -----------------


class Species(NamedTuple):
    key: str
    name: str
    growth: Fraction  # growth-adjusted age = real age x growth
    stand: Fraction  # multiplies the volume curve: how much wood a full stand of it holds
    price_cents_per_mbf: int  # mill price per thousand board feet, sawlog grade


SPECIES: dict[str, Species] = {
    s.key: s
    for s in (
        Species("rc", "western redcedar", Fraction(3, 4), Fraction(6, 5), 1200),
        Species("cw", "black cottonwood", Fraction(3, 2), Fraction(1), 400),
        Species("wh", "western hemlock", Fraction(1), Fraction(1), 600),
        Species("gf", "grand fir", Fraction(11, 10), Fraction(1), 600),
        Species("wp", "western white pine", Fraction(9, 10), Fraction(1), 1500),
        Species("df", "Douglas-fir", Fraction(1), Fraction(1), 1000),
        Species("l", "western larch", Fraction(11, 10), Fraction(9, 10), 900),
        Species("lp", "lodgepole pine", Fraction(5, 4), Fraction(3, 5), 500),
        Species("pp", "ponderosa pine", Fraction(4, 5), Fraction(9, 10), 1100),
    )
}

# Board feet on a 2.5-acre parcel by growth-adjusted age in hours, for a stand factor of 1.
# Linear between points, flat after the last; nothing is merchantable before 4 hours.
VOLUME_CURVE: tuple[tuple[int, int], ...] = (
    (0, 0),
    (4, 0),
    (10, 1_500),
    (20, 6_000),
    (30, 11_000),
    (40, 15_000),
    (52, 18_000),
    (72, 20_000),
)

# Log grade by growth-adjusted age: (from hours, name, price factor). Older wood mills clearer.
GRADES: tuple[tuple[int, str, Fraction], ...] = (
    (0, "poles", Fraction(1, 2)),
    (12, "sawlogs", Fraction(1)),
    (36, "clears", Fraction(5, 4)),
)

BOARD_FEET_PER_LOG = 200  # logs = ceil(board feet / 200): what the deck counts

# --- play (ours) ---------------------------------------------------------------------------------

START_CASH_CENTS = 10_000  # $100
CUT_COST_CENTS = 1_500  # a felling crew for one parcel
STEEP_CUT_FACTOR = 2  # the ridge costs double to log
DECK_CAPACITY_LOGS = 300  # the landing deck holds this many logs
HAUL_FEE_CENTS = 1_000  # the teamster, per trip
WAGON_TRIP_MS = 2 * MS_PER_HOUR  # the wagon is away this long after leaving the landing
MILL_PRICE_FACTOR = Fraction(5, 4)  # hauled logs sell for more while your own mill stands
REPLANT_COST_CENTS = 400
FARM_COST_CENTS = 300  # seed and labour for one meadow parcel of hay
CROP_RIPE_MS = 6 * MS_PER_HOUR
HAY_SALE_CENTS = 900
BARN_HAY_FACTOR = Fraction(3, 2)


class Building(NamedTuple):
    key: str
    name: str
    cost_cents: int
    sites: tuple[str, ...]  # which ground it may stand on: "meadow", "bench", "bottom", "ridge"


BUILDINGS: dict[str, Building] = {
    b.key: b
    for b in (
        Building("cabin", "homestead cabin", 6_000, ("meadow", "bench", "bottom")),
        Building("barn", "hay barn", 4_000, ("meadow",)),
        Building("mill", "sawmill", 15_000, ("bench", "bottom")),
    )
}

PROVE_UP_MIN_MS = 48 * MS_PER_HOUR  # a claim is proved up no sooner than two days after staking
PROVE_UP_MIN_COVER = 31  # counting parcels under timber (of 61) needed to prove up


# The words the claim's state and views hold, for the API documents (events/schema.py): from the tables above,
# so a species, building, zone or grade added there is in the schema the same day.
SpeciesKey = Annotated[str, one_of(SPECIES)]
BuildingKey = Annotated[str, one_of(BUILDINGS)]
ZoneKey = Annotated[str, one_of(ZONES)]
GradeName = Annotated[str, one_of(name for _, name, _ in GRADES)]
Owner = Annotated[str, free("the player who staked the claim")]
Block = Annotated[str, free("the block's label, as the surveyor gave it")]
