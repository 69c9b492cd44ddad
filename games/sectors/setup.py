"""Creation options of a colony and the resolved setup recorded in `room.created`."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Key, Name
from almanac.games.sectors.data import DEFAULT_YEARS, LEDGER_CEILING, MAXIMUM_GRID_SIDE
from almanac.games.sectors.state import Goods, Season

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
    type: Key | None = None
    explored: bool = True
    population: Count | None = None
    buildings: Annotated[tuple[Key, ...], msgspec.Meta(max_length=1_000)] = ()
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

    owner: Name | None = None
    years: Years = DEFAULT_YEARS
    rows: GridSide | None = None
    columns: GridSide | None = None
    home_row: GridIndex | None = None
    home_column: GridIndex | None = None
    home_type: Key | None = None
    home_population: Count | None = None
    stock: Goods | None = None
    setup: ExplicitSetup | None = None


class Setup(msgspec.Struct, frozen=True, kw_only=True):
    """The fully resolved colony: every explored sector with its type, nothing drawn later but explorations."""

    owner: str
    rows: int
    columns: int
    season: Season
    year: int
    years: int
    stock: Goods
    sectors: tuple[SectorSetup, ...]
