"""The colony's state (the global stock of goods, the grid of sectors, the season and the year), and its
creation options and the resolved setup recorded in `room.created`."""

from __future__ import annotations

from operator import add, sub
from typing import Annotated, Literal, cast

import msgspec

from almanac.events.manifest import Key, Name, free, one_of
from almanac.games.sectors.data import (
    BUILDING_NAMES,
    DEFAULT_YEARS,
    GOODS,
    LEDGER_CEILING,
    MAXIMUM_GRID_SIDE,
    SEASONS,
    SEASONS_PER_YEAR,
    SECTOR_TYPE_NAMES,
)

Season = Literal["spring", "summer", "fall", "winter"]
# The words the colony's state and views hold, for the API documents (events/schema.py): from the data's tables,
# so a sector type, building or good added there is in the schema the same day.
SectorType = Annotated[str, one_of(SECTOR_TYPE_NAMES)]
BuildingName = Annotated[str, one_of(BUILDING_NAMES)]
Good = Annotated[str, one_of(GOODS)]
Owner = Annotated[str, free("the player whose colony it is")]


# Any amount a 64-bit integer holds (the rules keep stocks within the ledger's ceiling and say so).
GoodsAmount = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Goods(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """An amount of every good: the global stock, a cost, what a building took or gave."""

    food: GoodsAmount = 0
    wood: GoodsAmount = 0
    gold: GoodsAmount = 0
    lumber: GoodsAmount = 0
    coins: GoodsAmount = 0
    victory_points: GoodsAmount = 0

    def __add__(self, other: Goods) -> Goods:
        return Goods(*map(add, msgspec.structs.astuple(self), msgspec.structs.astuple(other)))

    def __sub__(self, other: Goods) -> Goods:
        return Goods(*map(sub, msgspec.structs.astuple(self), msgspec.structs.astuple(other)))

    def amount(self, good: str) -> int:
        return getattr(self, good)

    def as_dict(self) -> dict[str, int]:
        return {good: getattr(self, good) for good in GOODS}

    def is_empty(self) -> bool:
        return not any(msgspec.structs.astuple(self))


def goods_of(pairs: tuple[tuple[str, int], ...] | dict[str, int]) -> Goods:
    """Goods from (good, amount) pairs or a mapping, the shape the data tables use."""
    items = pairs.items() if isinstance(pairs, dict) else pairs
    return Goods(**dict(items))


assert tuple(Goods.__struct_fields__) == GOODS, "state.Goods must list exactly data.GOODS, in order"


class Sector(msgspec.Struct, frozen=True, kw_only=True):
    """An explored sector. Unexplored sectors have no record at all, so their type cannot leak."""

    type: SectorType
    population: int
    # Oldest first: production walks this tuple from the end.
    buildings: tuple[BuildingName, ...] = ()
    # The season number (see `season_number`) of the last season the sector went short of food.
    last_starved: int | None = None


class ColonyState(msgspec.Struct, frozen=True, kw_only=True):
    """The whole game: one owner's colony on a rows x columns grid."""

    owner: Owner
    rows: int
    columns: int
    season: Season
    year: int
    # The game ends when the winter of this year has been played.
    years: int
    stock: Goods
    # Row-major, length rows * columns; None where the sector is still unexplored.
    sectors: tuple[Sector | None, ...]

    def sector(self, row: int, column: int) -> Sector | None:
        return self.sectors[row * self.columns + column]

    def explored(self) -> list[tuple[int, int, Sector]]:
        """(row, column, sector) of every explored sector in row-major order, the order the phases run in."""
        columns = self.columns
        return [
            (position // columns, position % columns, sector)
            for position, sector in enumerate(self.sectors)
            if sector is not None
        ]


def season_number(season: str, year: int) -> int:
    """Seasons since the colony's calendar began: spring of year 1 is 0."""
    return (year - 1) * SEASONS_PER_YEAR + SEASONS.index(season)


def next_season(season: str, year: int) -> tuple[Season, int]:
    position = SEASONS.index(season) + 1
    if position == SEASONS_PER_YEAR:
        return cast(Season, SEASONS[0]), year + 1
    return cast(Season, SEASONS[position]), year


def replace_sector(state: ColonyState, row: int, column: int, sector: Sector) -> tuple[Sector | None, ...]:
    position = row * state.columns + column
    sectors = state.sectors
    return sectors[:position] + (sector,) + sectors[position + 1 :]


# --- creation options and the resolved setup ------------------------------------------------------

GridSide = Annotated[int, msgspec.Meta(ge=1, le=MAXIMUM_GRID_SIDE)]
GridIndex = Annotated[int, msgspec.Meta(ge=0, le=MAXIMUM_GRID_SIDE - 1, description="0 .. 63")]
Count = Annotated[int, msgspec.Meta(ge=0, le=LEDGER_CEILING, description="0 .. 10^15 (the ledger's ceiling)")]
Years = Annotated[int, msgspec.Meta(ge=1, le=1_000)]
SeasonsAgo = Annotated[int, msgspec.Meta(ge=1, le=4_000)]


class SectorSetup(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One sector of an explicit setup.

    An explored sector names its type and may give a population (default 1, the seed's initial
    population), its buildings (oldest first) and how many seasons ago it last starved (0 = in the
    season about to be played, which cannot have happened yet, so at least 1; None = never).
    An unexplored sector gives only its place: its type is drawn when it is explored, so that no
    event, not even `room.created`, holds the type of an unexplored sector.
    """

    row: GridIndex
    column: GridIndex
    type: Annotated[Key, one_of(SECTOR_TYPE_NAMES)] | None = None
    explored: bool = True
    population: Count | None = None
    buildings: Annotated[tuple[Annotated[Key, one_of(BUILDING_NAMES)], ...], msgspec.Meta(max_length=1_000)] = ()
    starved_seasons_ago: SeasonsAgo | None = None


class ExplicitSetup(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A whole colony spelled out, for sandboxes, tests and bug reports."""

    rows: GridSide = 8
    columns: GridSide = 8
    season: Season = "spring"
    year: Years = 1
    stock: Goods = Goods()
    sectors: Annotated[tuple[SectorSetup, ...], msgspec.Meta(max_length=MAXIMUM_GRID_SIDE**2)] = ()


class Options(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a client may send when creating a colony; every field has a default, so ``{}`` works.

    Either give ``setup`` (an explicit colony) or let the home sector be generated from the other
    fields; ``owner`` and ``years`` apply to both.
    """

    owner: Annotated[Name, *Owner.__metadata__] | None = None
    years: Years = DEFAULT_YEARS
    rows: GridSide | None = None
    columns: GridSide | None = None
    home_row: GridIndex | None = None
    home_column: GridIndex | None = None
    home_type: Annotated[Key, one_of(SECTOR_TYPE_NAMES)] | None = None
    home_population: Count | None = None
    stock: Goods | None = None
    setup: ExplicitSetup | None = None


class Setup(msgspec.Struct, frozen=True, kw_only=True):
    """The fully resolved colony: every explored sector with its type, nothing drawn later but explorations."""

    owner: Owner
    rows: int
    columns: int
    season: Season
    year: int
    years: int
    stock: Goods
    sectors: tuple[SectorSetup, ...]
