"""The sectors Decider: one owner's colony; what it decides, shows and counts."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Context, RuleError, Secret, event_tag, redact
from almanac.games.sectors import rules
from almanac.games.sectors.commands import COMMAND_TYPES
from almanac.games.sectors.data import BUILDINGS, SECTOR_TYPES
from almanac.games.sectors.events import (
    EVENT_TYPES,
    BuildingBuilt,
    BuildingDemolished,
    GoodsProduced,
    PeopleMoved,
    PopulationChanged,
    ResourcesHarvested,
    SeasonEnded,
    SectorExplored,
)
from almanac.games.sectors.state import ColonyState, Options, Setup, season_number


class SectorsDecider:
    """The colony's rules behind the kernel's Decider protocol."""

    name = "sectors"
    options_type = Options
    setup_type = Setup
    state_type = ColonyState
    command_types = COMMAND_TYPES
    event_types = EVENT_TYPES
    # Nothing in an event is secret: an unexplored sector's type is drawn only when it is explored.
    secrets: dict[type, tuple[Secret, ...]] = {}

    def setup(self, options: Options, ctx: Context) -> Setup:
        return rules.setup_colony(options, ctx)

    def initial_state(self, setup: Setup) -> ColonyState:
        return rules.initial_state(setup)

    def decide(self, state: ColonyState, command: Any, ctx: Context) -> list[Any]:
        if ctx.player != state.owner:
            raise RuleError(
                "sectors.not_owner",
                f"only the colony's owner {state.owner!r} may command it, not {ctx.player!r}",
                field="player",
            )
        decide = rules.DECIDE.get(type(command))
        if decide is None:
            raise RuleError(
                "sectors.unknown_command", f"the sectors rules have no command {type(command).__name__}"
            )
        return decide(state, command, ctx)

    def evolve(self, state: ColonyState, event: Any) -> ColonyState:
        return rules.EVOLVE[type(event)](state, event)

    def is_over(self, state: ColonyState) -> bool:
        return rules.is_over(state)

    def seats(self, state: ColonyState) -> tuple[str, ...]:
        return (state.owner,)

    def view(self, state: ColonyState, player: str) -> dict[str, Any]:
        """Everything explored; an unexplored sector only as unexplored (its type does not exist yet)."""
        now = season_number(state.season, state.year)
        grid = []
        for row in range(state.rows):
            cells = []
            for column in range(state.columns):
                sector = state.sector(row, column)
                if sector is None:
                    cells.append({"row": row, "column": column, "explored": False})
                    continue
                kind = SECTOR_TYPES[sector.type]
                cells.append(
                    {
                        "row": row,
                        "column": column,
                        "explored": True,
                        "type": sector.type,
                        "population": sector.population,
                        "population_cap": kind.population_cap,
                        "buildings": list(sector.buildings),
                        "building_limit": kind.building_limit,
                        # 1 = the season just played; None = never. A mountain grows in fall only
                        # when this is None or at least 4.
                        "starved_seasons_ago": (
                            None if sector.last_starved is None else now - sector.last_starved
                        ),
                    }
                )
            grid.append(cells)
        return {
            "owner": state.owner,
            "rows": state.rows,
            "columns": state.columns,
            "season": state.season,
            "year": state.year,
            "years": state.years,
            "over": rules.is_over(state),
            "stock": state.stock.as_dict(),
            "victory_points": state.stock.victory_points,
            "population": sum(sector.population for _, _, sector in state.explored()),
            "grid": grid,
        }

    def redact(self, event: Any, player: str) -> Any:
        return redact(self.secrets, event, player)

    def scores(self, state: ColonyState) -> dict[str, int]:
        return {state.owner: rules.colony_score(state)}

    def public_scores(self, state: ColonyState) -> dict[str, int]:
        """The running score: a colony hides nothing, and every term of its score is in the view anyone reads."""
        return self.scores(state)

    def resources(self, state: ColonyState) -> dict[str, Any]:
        explored = state.explored()
        return {
            "season": state.season,
            "year": state.year,
            "stock": state.stock.as_dict(),
            "victory_points": state.stock.victory_points,
            "population": sum(sector.population for _, _, sector in explored),
            "population_by_sector": {
                f"{row},{column}": sector.population for row, column, sector in explored
            },
            "buildings": sum(len(sector.buildings) for _, _, sector in explored),
            "explored": len(explored),
            "sectors": state.rows * state.columns,
        }

    def summary(self, event: Any) -> str:
        return summarize(event)


def summarize(event: Any) -> str:
    """One line per sectors event, for logs, audits and the console."""
    if isinstance(event, SectorExplored):
        return f"explored ({event.row},{event.column}): a {event.sector_type}, {event.population} person"
    if isinstance(event, PeopleMoved):
        return f"moved {event.count} people ({event.from_row},{event.from_column}) -> ({event.to_row},{event.to_column})"
    if isinstance(event, BuildingBuilt):
        return f"built a {event.building} at ({event.row},{event.column}) for {rules.costs(event.cost)}"
    if isinstance(event, BuildingDemolished):
        return f"demolished the {event.building} at ({event.row},{event.column}) position {event.position}"
    if isinstance(event, PopulationChanged):
        starved = f", {event.deaths} starved" if event.starved else ""
        capped = f", {event.over_cap} over the cap of {event.cap}" if event.over_cap else ""
        return (
            f"{event.season} {event.year} ({event.row},{event.column}) {event.sector_type}: "
            f"ate {event.food_eaten}/{event.food_needed}{starved}, +{event.births} born{capped}, "
            f"{event.population_before} -> {event.population_after}"
        )
    if isinstance(event, GoodsProduced):
        ran = sum(1 for report in event.buildings if report.outcome == "ran")
        return (
            f"{event.season} {event.year} ({event.row},{event.column}) {event.sector_type}: {ran}/{len(event.buildings)} "
            f"buildings ran, used {rules.costs(event.consumed)}, made {rules.costs(event.produced)}"
        )
    if isinstance(event, ResourcesHarvested):
        if event.closed:
            return f"{event.season} {event.year} ({event.row},{event.column}) {event.sector_type}: no harvest"
        return (
            f"{event.season} {event.year} ({event.row},{event.column}) {event.sector_type}: {event.idle_workers} idle "
            f"harvested {rules.costs(event.harvested + event.extra)}"
        )
    if isinstance(event, SeasonEnded):
        return f"{event.season} of year {event.year} ended; now {event.next_season} of year {event.next_year}"
    return f"{event_tag(event)} in {getattr(event, 'season', 'the colony')}"


DECIDER = SectorsDecider()

__all__ = ["DECIDER", "BUILDINGS", "SECTOR_TYPES", "SectorsDecider"]
