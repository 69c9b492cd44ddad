"""What happened in the colony, and why: the stored format of the sectors rule-set (tags never change)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from almanac.events.manifest import Reason, free
from almanac.games.sectors.state import Goods, Season, SectorType

# An exact fraction as the rules write it (str(Fraction): "7/10", "2"): a product of the rules' rates, no list.
FractionText = Annotated[str, free('an exact fraction, as str(Fraction) writes it ("7/10", "2")')]


class SectorExplored(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.sector_explored"):
    """A sector was explored; ``type`` was drawn from the room's dice at that moment."""

    row: int
    column: int
    sector_type: SectorType
    population: int


class PeopleMoved(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.people_moved"):
    from_row: int
    from_column: int
    to_row: int
    to_column: int
    count: int


class BuildingBuilt(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.building_built"):
    """A building went up as the newest of its sector; ``cost`` is what was taken from the stock."""

    row: int
    column: int
    building: str
    cost: Goods


class BuildingDemolished(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.building_demolished"):
    row: int
    column: int
    position: int
    building: str


class PopulationChanged(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.population_changed"):
    """One sector's feeding, starvation, reproduction and cap in one season (phase 1)."""

    row: int
    column: int
    sector_type: SectorType
    season: Season
    year: int
    population_before: int
    # Exact rates as fraction text ("7/10"), so the log shows the arithmetic without binary floats.
    food_rate: FractionText
    food_needed: int
    food_eaten: int
    starved: bool
    deaths: int
    growth_rate: FractionText
    growth_allowed: bool
    growth_reason: Reason
    births: int
    cap: int | None
    # People over the cap after births, who are lost when the cap applies.
    over_cap: int
    population_after: int


BuildingOutcome = Literal["ran", "idle_missing_inputs", "not_staffed", "closed"]


class BuildingReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one building did in a season: ran, or idled and why."""

    position: int
    building: str
    outcome: BuildingOutcome
    crew_used: int = 0
    reason: Reason = ""
    consumed: Goods = Goods()
    produced: Goods = Goods()


class GoodsProduced(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.goods_produced"):
    """One sector's production in one season (phase 2), newest building first."""

    row: int
    column: int
    sector_type: SectorType
    season: Season
    year: int
    workforce: int
    multiplier: FractionText
    buildings: tuple[BuildingReport, ...]
    consumed: Goods
    produced: Goods
    idle_workers: int


class ResourcesHarvested(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.resources_harvested"):
    """One sector's harvest in one season (phase 3): idle workers at the type's rates, plus extras."""

    row: int
    column: int
    sector_type: SectorType
    season: Season
    year: int
    idle_workers: int
    population: int
    closed: bool
    # Product of every multiplier that applied, and the rule behind each.
    multiplier: FractionText
    multiplier_reasons: tuple[Reason, ...]
    harvested: Goods
    extra: Goods
    extra_reasons: tuple[Reason, ...]


class SeasonEnded(msgspec.Struct, frozen=True, kw_only=True, tag="sectors.season_ended"):
    """The calendar moved on. ``stock`` and ``population`` are the season's closing totals as the
    rules computed them: a checkpoint an audit compares with the fold of the events before it."""

    season: Season
    year: int
    next_season: Season
    next_year: int
    stock: Goods
    population: int


EVENT_TYPES: tuple[type, ...] = (
    SectorExplored,
    PeopleMoved,
    BuildingBuilt,
    BuildingDemolished,
    PopulationChanged,
    GoodsProduced,
    ResourcesHarvested,
    SeasonEnded,
)
