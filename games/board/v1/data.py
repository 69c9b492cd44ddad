"""The numbers of the board rule-set: map size, mountains, the deck of elements, seasons and mission cards."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import free, one_of

SIZE = 11
"""The map is SIZE x SIZE cells; rows and columns are numbered 0 .. SIZE - 1 in commands, events and state."""

EMPTY = ""
MOUNTAIN = "mountain"
FOREST = "forest"
VILLAGE = "village"
FARM = "farm"
WATER = "water"
TERRAINS: tuple[str, ...] = (FOREST, VILLAGE, FARM, WATER)
"""The terrains an element can carry (a mountain is never placed, it is printed on the map)."""

MOUNTAINS: tuple[tuple[int, int], ...] = ((1, 1), (3, 8), (5, 3), (8, 9), (9, 5))
"""Zero-based (row, column) of the five mountains: the seed's 1-based (2,2), (4,9), (6,4), (9,10), (10,6)."""

ROTATIONS: tuple[int, ...] = (0, 90, 180, 270)
"""Clockwise rotations in degrees a placement may use."""


class Element(msgspec.Struct, frozen=True, kw_only=True):
    """One map element of the deck: its number, time cost, terrain and 3x3 shape (rows, "1" = filled)."""

    number: int
    time: int
    terrain: str
    shape: tuple[str, str, str]


DECK: tuple[Element, ...] = (
    Element(number=1, time=2, terrain=WATER, shape=("111", "000", "000")),
    Element(number=2, time=2, terrain=VILLAGE, shape=("111", "000", "000")),
    Element(number=3, time=1, terrain=FOREST, shape=("110", "011", "000")),
    Element(number=4, time=2, terrain=FARM, shape=("111", "001", "000")),
    Element(number=5, time=2, terrain=FOREST, shape=("111", "001", "000")),
    Element(number=6, time=2, terrain=VILLAGE, shape=("111", "010", "000")),
    Element(number=7, time=2, terrain=FARM, shape=("111", "010", "000")),
    Element(number=8, time=1, terrain=VILLAGE, shape=("110", "100", "000")),
    Element(number=9, time=1, terrain=VILLAGE, shape=("111", "110", "000")),
    Element(number=10, time=1, terrain=FARM, shape=("110", "011", "000")),
    Element(number=11, time=1, terrain=FARM, shape=("010", "111", "010")),
    Element(number=12, time=2, terrain=WATER, shape=("111", "100", "100")),
    Element(number=13, time=2, terrain=WATER, shape=("100", "111", "100")),
    Element(number=14, time=2, terrain=FOREST, shape=("110", "011", "001")),
    Element(number=15, time=2, terrain=FOREST, shape=("110", "011", "000")),
    Element(number=16, time=2, terrain=WATER, shape=("110", "110", "000")),
)
"""The original assignment's 16 elements: four of each terrain, 27 time units in all."""

ELEMENTS: dict[int, Element] = {element.number: element for element in DECK}
DECK_NUMBERS: tuple[int, ...] = tuple(element.number for element in DECK)

GAME_LENGTH = 28
SEASON_ENDS: tuple[int, ...] = (7, 14, 21, 28)
"""Cumulative time at (or past) which each season ends."""
SEASON_NAMES: tuple[str, ...] = ("spring", "summer", "autumn", "winter")
CARD_LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
SEASON_CARDS: tuple[tuple[int, int], ...] = ((0, 1), (1, 2), (2, 3), (3, 0))
"""Which two of the cards A-D (by index) each season scores: A+B, B+C, C+D, D+A."""

MOUNTAIN_BONUS_POINTS = 1
"""Points per mountain with all four orthogonal neighbours filled, at each season end (an option)."""

BASE_MISSIONS: tuple[str, ...] = ("edge_of_the_forest", "sleepy_valley", "watering_potatoes", "borderlands")
EXTENDED_MISSIONS: tuple[str, ...] = (
    "tree_line",
    "watering_canal",
    "wealthy_town",
    "magicians_valley",
    "empty_site",
    "row_of_houses",
    "odd_numbered_silos",
    "rich_countryside",
)


# The words the board's states, events and views hold, for the API documents (events/schema.py): from the lists
# above, so a terrain, season or mission added there is in the schema the same day.
Cell = Annotated[str, one_of((EMPTY, MOUNTAIN, *TERRAINS), '"" is an empty cell')]
Terrain = Annotated[str, one_of(TERRAINS)]
# a filled cell as the API's view shows it (an empty one is null there)
Filled = Annotated[str, one_of((MOUNTAIN, *TERRAINS))]
SeasonName = Annotated[str, one_of(SEASON_NAMES)]
CardLetter = Annotated[str, one_of(CARD_LETTERS)]
MissionKey = Annotated[str, one_of((*BASE_MISSIONS, *EXTENDED_MISSIONS))]
Player = Annotated[str, free("the player whose map it is")]
