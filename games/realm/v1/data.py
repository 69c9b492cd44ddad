"""The realm's numbers: die faces, dice counts, thresholds, multipliers, stocks, costs and timings, all exact."""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated

from almanac.events.manifest import free, one_of

# --- the die (docs/design-rulings.md) ------------------------------------------------------------
# ctx.dice.randbelow(6) indexes this tuple: three stars, one moon, one skull, one blank.
STAR = "star"
MOON = "moon"
SKULL = "skull"
BLANK = "blank"
FACES: tuple[str, ...] = (STAR, STAR, STAR, MOON, SKULL, BLANK)

# --- the calendar -----------------------------------------------------------------------------
SEASONS: tuple[str, ...] = ("spring", "summer", "fall", "winter")
SPRING, SUMMER, FALL, WINTER = 0, 1, 2, 3

# --- storage ----------------------------------------------------------------------------------
ORES: tuple[str, ...] = ("stone", "bronze", "iron", "steel", "gold")  # value order, lowest first
SMELTED: dict[str, str] = {
    "stone": "smelted_stone",
    "bronze": "smelted_bronze",
    "iron": "smelted_iron",
    "steel": "smelted_steel",
}
RESOURCES: tuple[str, ...] = (
    "food",
    "wood",
    "herbs",
    *ORES,
    "smelted_stone",
    "smelted_bronze",
    "smelted_iron",
    "smelted_steel",
)

# --- mining (seed + design rulings) --------------------------------------------------------------
MINING_DICE: dict[str, int] = {"stone": 1, "bronze": 2, "iron": 4, "steel": 6, "gold": 8}
MINING_MINIMUM_STARS: dict[str, int] = {"stone": 1, "bronze": 1, "iron": 2, "steel": 3, "gold": 6}
MINING_MOON_USES: tuple[str, ...] = ("count", "save")  # a moon as two stars, or one star and one saved star
# What a roll for ore came to (rules.resolve_mining; the log's realm.mined outcome).
MINING_OUTCOMES: tuple[str, ...] = ("found", "lesser_ore", "skull_stone", "blank_stone", "nothing")
MINING_UNIT = 1_000  # gained at the minimum, and again per star past it
GOLD_STARS_PER_UNIT = 3  # gold: 1,000 for every three stars, plus 1,000 per star past the minimum
MOON_STARS_COUNTED = 2  # a moon is worth two stars, or one star and one saved star
LESSER_ORE_KEEP = Fraction(1, 4)  # a lesser ore at a 75% reduction
SKULL_STONE_KEEP = Fraction(1, 2)  # a skull: only stone, at -50%
BLANK_STONE_KEEP = Fraction(1, 4)  # a blank and nothing else found: stone at -75%
PENALTY_ROUNDING = 100  # penalties round down to the nearest hundred (docs/design-rulings.md)

# --- smelting ---------------------------------------------------------------------------------
SMELTING_DICE = 6
SMELTING_MINIMUM_STARS: dict[str, int] = {"stone": 1, "bronze": 2, "iron": 3, "steel": 5}

# --- food -------------------------------------------------------------------------------------
FOOD_METHODS: tuple[str, ...] = ("hunt", "gather", "fish", "farm")
FOOD_DICE = 3
FOOD_PER_STAR = 1_000
FOOD_MULTIPLIERS: dict[str, tuple[Fraction, Fraction, Fraction, Fraction]] = {
    # spring, summer, fall, winter
    "hunt": (Fraction(1, 2), Fraction(3, 2), Fraction(3, 2), Fraction(1, 2)),
    "gather": (Fraction(3, 2), Fraction(1), Fraction(1), Fraction(1)),
    "fish": (Fraction(1), Fraction(2), Fraction(1), Fraction(1, 2)),
    "farm": (Fraction(1, 2), Fraction(1, 2), Fraction(3), Fraction(0)),
}
FOOD_MOON_USES: tuple[str, ...] = ("double", "save")  # a moon doubles the roll, or keeps a ward for a skull
FOOD_MOON_DOUBLES = 2  # a moon spent on the roll doubles it (once, however many moons)

# --- herbs and healing ------------------------------------------------------------------------
HERB_DICE = 6
HERB_STARS_PER_UNIT = 3
HERB_UNIT = 1_000
HERB_RATES: tuple[Fraction, Fraction, Fraction, Fraction] = (
    Fraction(1, 2),  # spring
    Fraction(1),  # summer: the seed's "x1"
    Fraction(1, 2),  # fall
    Fraction(0),  # winter
)
HERBS_PER_DAMAGE_POINT = 1_000

# --- wood and fortifying ----------------------------------------------------------------------
WOOD_DICE = 3
WOOD_PER_STAR = 1_000
WOOD_RATES: tuple[Fraction, Fraction, Fraction, Fraction] = (
    Fraction(1),
    Fraction(1),
    Fraction(3, 2),
    Fraction(1),
)
WOOD_PER_HIT_POINT = 2_000  # 2,000 wood -> 1 hit point
STONE_PER_HIT_POINTS = 1_500  # 1,500 stone -> 2 hit points
HIT_POINTS_PER_STONE_LOT = 2

# --- armies -----------------------------------------------------------------------------------
SOLDIER_UNIT = 100  # soldiers are raised, lost and counted in hundreds
MINIMUM_ARMY = 1_000  # an army under 1,000 disbands into the population
SOLDIERS_PER_DIE = 1_000  # one attack or defence die per full 1,000 soldiers
TIERS: tuple[str, ...] = ("none", "bronze", "iron", "steel")  # bonus dice = index, if the opponent is lower
EQUIPMENT_METAL: dict[str, str] = {
    "bronze": "smelted_bronze",
    "iron": "smelted_iron",
    "steel": "smelted_steel",
}
METAL_PER_SOLDIER = 1  # equipping costs one unit of smelted metal per soldier
RAID_LOSS = Fraction(1, 4)  # a failed attacker loses a quarter of its troops, rounded down to the hundred
RAID_PLUNDER = Fraction(1, 2)  # a won raid takes half of the named resource
CITY_BASE_DEFENCE_DICE = 1  # the townsfolk: one die even without an army
HIT_POINTS_PER_WALL_DIE = 5  # walls: one defence die per full 5 hit points
MERCHANT_ESCAPE_DICE = 5  # the merchant's flat five dice

# --- pillage, tax, freedom, restart -----------------------------------------------------------
SIEGE_ENDS: tuple[str, ...] = ("destroy", "tax")  # what a city taken by siege comes to, as the besieger said
PILLAGE_KEEP = Fraction(1, 2)  # destroy: take every resource at -50%
TAX_SHARE = Fraction(1, 2)  # surrender: 50% of every resource, one season a year
DEFAULT_TAX_SEASON = FALL  # when the controller states no season at the start of the year
SURRENDER_HIT_POINTS = 1  # a surrendered city stands with 1 hit point
FREEDOM_PRICE_GOLD = 5_000
SABOTAGE_DICE = 3
SABOTAGE_MINIMUM_STARS = 2
RESTART_SHARE = Fraction(1, 10)  # a restarted city gets 10% of the other players' total, per resource
RESTART_IMMUNITY_SEASONS = 4  # one year in which it cannot be raided or besieged

# --- trade ------------------------------------------------------------------------------------
TRADE_UNIT = 1_000  # stars x 1,000
TRADE_MAX_DICE = 3
MERCHANT_LOSS = Fraction(1, 2)  # a cancelled merchant loses half of what he carries

# --- turns and game length --------------------------------------------------------------------
ACTIONS_PER_SEASON = 3
YEARS = 3
SEASON_TIMEOUT_MS = 300_000  # after 5 minutes of server time any player may force the season to end
MAX_VILLAGES = 4

# --- starting stocks ----------------------------------------------------------------------------
STARTING_POPULATION = 5_000
STARTING_HIT_POINTS = 10
STARTING_ARMY = 1_000
STARTING_STOCK: dict[str, int] = {
    "food": 10_000,
    "wood": 4_000,
    "herbs": 1_000,
    "stone": 3_000,
    "bronze": 0,
    "iron": 0,
    "steel": 0,
    "gold": 2_000,
    "smelted_stone": 0,
    "smelted_bronze": 0,
    "smelted_iron": 0,
    "smelted_steel": 0,
}
VILLAGE_POPULATION = 2_000
VILLAGE_HIT_POINTS = 5
VILLAGE_ARMY = 1_000
VILLAGE_STOCK: dict[str, int] = {
    "food": 8_000,
    "wood": 6_000,
    "herbs": 2_000,
    "stone": 2_000,
    "bronze": 1_000,
    "iron": 0,
    "steel": 0,
    "gold": 1_000,
    "smelted_stone": 0,
    "smelted_bronze": 0,
    "smelted_iron": 0,
    "smelted_steel": 0,
}
# NPC villages act only at the end of each season: they produce this (no dice).
VILLAGE_PRODUCTION: dict[str, int] = {"food": 1_000, "wood": 1_000, "herbs": 500}

# --- score --------------------------------------------------------------------------------------
# Worth of one unit of each resource; a city's score is its worth divided by 1,000, rounded down.
RESOURCE_WORTH: dict[str, int] = {
    "food": 1,
    "wood": 1,
    "herbs": 2,
    "stone": 1,
    "bronze": 2,
    "iron": 3,
    "steel": 4,
    "gold": 5,
    "smelted_stone": 2,
    "smelted_bronze": 3,
    "smelted_iron": 4,
    "smelted_steel": 5,
}
POPULATION_WORTH = 1
SOLDIER_WORTH = 2  # plus one per equipment tier
HIT_POINT_WORTH = 1_000
VASSAL_WORTH = 10_000
SCORE_UNIT = 1_000


# --- the words the events, the state and the views share, for the API documents (events/schema.py) --------------
Resource = Annotated[str, one_of(RESOURCES)]
CityName = Annotated[str, free("a city's name: its player's, or a village's")]
TradeId = Annotated[str, free("a trade's id")]
