"""The rules of the land-sector colony: one pure function per command (decide_*) and per event (evolve_*)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError
from almanac.games.sectors import data
from almanac.games.sectors.commands import Build, Demolish, EndSeason, Explore, MovePeople
from almanac.games.sectors.data import (
    BUILDING_NAMES,
    BUILDINGS,
    DEFAULT_COLUMNS,
    DEFAULT_HOME_POPULATION,
    DEFAULT_ROWS,
    DEFAULT_STARTING_STOCK,
    EXPLORED_SECTOR_POPULATION,
    GOODS,
    LEDGER_CEILING,
    SEASONS,
    SECTOR_TYPE_NAMES,
    SECTOR_TYPES,
    SectorType,
)
from almanac.games.sectors.events import (
    BuildingBuilt,
    BuildingDemolished,
    BuildingReport,
    GoodsProduced,
    PeopleMoved,
    PopulationChanged,
    ResourcesHarvested,
    SeasonEnded,
    SectorExplored,
)
from almanac.games.sectors.state import (
    ColonyState,
    ExplicitSetup,
    Goods,
    Options,
    Season,
    Sector,
    SectorSetup,
    Setup,
    goods_of,
    next_season,
    replace_sector,
    season_number,
)

_ONE = Fraction(1)
# Each building's inputs and full outputs as Goods, built once: a season reports them for every building.
_INPUTS = {name: goods_of(building.inputs) for name, building in BUILDINGS.items()}
_FULL_OUTPUT_AMOUNTS = {name: dict(building.outputs) for name, building in BUILDINGS.items()}
_FULL_OUTPUTS = {name: goods_of(building.outputs) for name, building in BUILDINGS.items()}

# --- exact arithmetic -------------------------------------------------------------------------
# Integer numerator/denominator arithmetic: exact like Fraction, and several times faster, which
# matters for folding thousands of seasons.


def ceil_times(count: int, rate: Fraction) -> int:
    """count x rate rounded up, exactly (10 x 3/10 is 3, never 4)."""
    return -(-count * rate.numerator // rate.denominator)


def floor_times(count: int, rate: Fraction) -> int:
    """count x rate rounded down, exactly."""
    return count * rate.numerator // rate.denominator


def place(row: int, column: int) -> str:
    return f"sector (row {row}, column {column})"


def costs(goods: Goods) -> str:
    return ", ".join(f"{amount} {good}" for good, amount in goods.as_dict().items() if amount) or "nothing"


def check_on_grid(
    rows: int, columns: int, row: int, column: int, *, code: str, what: str, row_field: str, column_field: str
) -> None:
    """Refuse a place off a rows x columns grid, naming the coordinate that is off (the row when both are)."""
    row_off = not 0 <= row < rows
    if row_off or not 0 <= column < columns:
        raise RuleError(
            code,
            f"{what} is outside the {rows}x{columns} grid (rows 0-{rows - 1}, columns 0-{columns - 1})",
            field=row_field if row_off else column_field,
        )


def shortfalls(needed: Goods, stock: Goods) -> list[str]:
    """'not enough wood: need 20, have 12' for every good the stock cannot cover."""
    return [
        f"not enough {good}: need {amount}, have {stock.amount(good)}"
        for good, amount in needed.as_dict().items()
        if amount > stock.amount(good)
    ]


# --- setup ------------------------------------------------------------------------------------


def setup_colony(options: Options, ctx: Context) -> Setup:
    """Resolve creation options: an explicit setup checked as the commands would check it, or a new colony."""
    owner = options.owner if options.owner else ctx.player
    if options.setup is not None:
        generated_fields = (
            "rows",
            "columns",
            "home_row",
            "home_column",
            "home_type",
            "home_population",
            "stock",
        )
        for name in generated_fields:
            if getattr(options, name) is not None:
                raise RuleError(
                    "sectors.invalid_setup",
                    f"options.{name} only shapes a generated colony; with an explicit setup, put it in the setup",
                    field=f"options.{name}",
                )
        setup = _explicit_setup(options.setup, owner, options.years)
        _check_years(setup)
        return setup

    rows = options.rows if options.rows is not None else DEFAULT_ROWS
    columns = options.columns if options.columns is not None else DEFAULT_COLUMNS
    home_row = options.home_row if options.home_row is not None else (rows - 1) // 2
    home_column = options.home_column if options.home_column is not None else (columns - 1) // 2
    check_on_grid(
        rows,
        columns,
        home_row,
        home_column,
        code="sectors.invalid_setup",
        what=f"the home sector (row {home_row}, column {home_column})",
        row_field="options.home_row",
        column_field="options.home_column",
    )
    if options.home_type is None:
        home_type = SECTOR_TYPE_NAMES[ctx.dice.randbelow(len(SECTOR_TYPE_NAMES))]
    elif options.home_type in SECTOR_TYPES:
        home_type = options.home_type
    else:
        raise _unknown_type(options.home_type, "options.home_type")
    population = options.home_population if options.home_population is not None else DEFAULT_HOME_POPULATION
    _check_cap(SECTOR_TYPES[home_type], population, "options.home_population")
    stock = options.stock if options.stock is not None else goods_of(DEFAULT_STARTING_STOCK)
    _check_stock(stock, "options.stock")
    home = SectorSetup(row=home_row, column=home_column, type=home_type, population=population)
    return Setup(
        owner=owner,
        rows=rows,
        columns=columns,
        season=SEASONS[0],
        year=1,
        years=options.years,
        stock=stock,
        sectors=(home,),
    )


def _explicit_setup(explicit: ExplicitSetup, owner: str, years: int) -> Setup:
    _check_stock(explicit.stock, "options.setup.stock")
    seen: set[tuple[int, int]] = set()
    resolved: list[SectorSetup] = []
    for number, entry in enumerate(explicit.sectors):
        field = f"options.setup.sectors[{number}]"
        where = place(entry.row, entry.column)
        check_on_grid(
            explicit.rows,
            explicit.columns,
            entry.row,
            entry.column,
            code="sectors.invalid_setup",
            what=where,
            row_field=f"{field}.row",
            column_field=f"{field}.column",
        )
        if (entry.row, entry.column) in seen:
            raise RuleError("sectors.invalid_setup", f"{where} is listed twice", field=field)
        seen.add((entry.row, entry.column))
        if not entry.explored:
            if (
                entry.type is not None
                or entry.population is not None
                or entry.buildings
                or entry.starved_seasons_ago
            ):
                raise RuleError(
                    "sectors.invalid_setup",
                    f"{where} is unexplored, so it can have no type, population, buildings or starvation: "
                    "its type is drawn when it is explored",
                    field=field,
                )
            continue
        if entry.type is None:
            raise RuleError(
                "sectors.invalid_setup",
                f"explored {where} needs a type; known types: {', '.join(SECTOR_TYPE_NAMES)}",
                field=f"{field}.type",
                allowed=list(SECTOR_TYPE_NAMES),
            )
        if entry.type not in SECTOR_TYPES:
            raise _unknown_type(entry.type, f"{field}.type")
        kind = SECTOR_TYPES[entry.type]
        population = entry.population if entry.population is not None else EXPLORED_SECTOR_POPULATION
        _check_cap(kind, population, f"{field}.population")
        for building in entry.buildings:
            if building not in BUILDINGS:
                raise _unknown_building(building, f"{field}.buildings")
            if building in kind.banned_buildings:
                raise _banned(kind, building, f"{field}.buildings")
        if kind.building_limit is not None and len(entry.buildings) > kind.building_limit:
            raise RuleError(
                "sectors.building_limit",
                f"a {kind.name} holds at most {kind.building_limit} buildings; {where} lists {len(entry.buildings)}",
                field=f"{field}.buildings",
            )
        resolved.append(msgspec.structs.replace(entry, population=population))
    if not resolved:
        raise RuleError(
            "sectors.invalid_setup",
            "an explicit setup needs at least one explored sector, or nothing can ever be explored",
            field="options.setup.sectors",
        )
    resolved.sort(key=lambda entry: (entry.row, entry.column))
    return Setup(
        owner=owner,
        rows=explicit.rows,
        columns=explicit.columns,
        season=explicit.season,
        year=explicit.year,
        years=years,
        stock=explicit.stock,
        sectors=tuple(resolved),
    )


def _check_years(setup: Setup) -> None:
    if setup.years < setup.year:
        raise RuleError(
            "sectors.invalid_setup",
            f"the game ends after the winter of year {setup.years} (options.years), but the setup starts "
            f"in year {setup.year}; years must be at least {setup.year}",
            field="options.years",
            allowed={"min": setup.year},
        )


def population_limit(kind: SectorType) -> int:
    """The most people a sector of this type holds: its cap, or the ledger's ceiling when it has none."""
    return kind.population_cap if kind.population_cap is not None else LEDGER_CEILING


def _cap_message(kind: SectorType) -> str:
    if kind.population_cap is not None:
        return f"{kind.name} population is capped at {kind.population_cap}"
    return f"a sector holds at most {LEDGER_CEILING} people (the ledger's ceiling)"


def _check_cap(kind: SectorType, population: int, field: str) -> None:
    if population > population_limit(kind):
        raise RuleError(
            "sectors.population_cap", f"{_cap_message(kind)}; {population} were asked for", field=field
        )


def _check_stock(stock: Goods, field: str) -> None:
    negative = [f"{good} {amount}" for good, amount in stock.as_dict().items() if amount < 0]
    if negative:
        raise RuleError(
            "sectors.invalid_setup", f"a stock cannot be negative: {', '.join(negative)}", field=field
        )
    too_much = [f"{good} {amount}" for good, amount in stock.as_dict().items() if amount > LEDGER_CEILING]
    if too_much:
        raise RuleError(
            "sectors.invalid_setup",
            f"a stock holds at most {LEDGER_CEILING} of a good (the ledger's ceiling): {', '.join(too_much)}",
            field=field,
        )


def _unknown_type(name: str, field: str) -> RuleError:
    return RuleError(
        "sectors.unknown_type",
        f"there is no sector type {name!r}; known types: {', '.join(SECTOR_TYPE_NAMES)}",
        field=field,
        allowed=list(SECTOR_TYPE_NAMES),
    )


def _banned(kind: SectorType, building: str, field: str) -> RuleError:
    allowed = [name for name in BUILDING_NAMES if name not in kind.banned_buildings]
    return RuleError(
        "sectors.building_banned",
        f"a {kind.name} cannot hold a {building}; a {kind.name} may hold: {', '.join(allowed)}",
        field=field,
        allowed=allowed,
    )


def _unknown_building(name: str, field: str) -> RuleError:
    return RuleError(
        "sectors.unknown_building",
        f"there is no building {name!r}; buildings: {', '.join(BUILDING_NAMES)}",
        field=field,
        allowed=list(BUILDING_NAMES),
    )


def initial_state(setup: Setup) -> ColonyState:
    sectors: list[Sector | None] = [None] * (setup.rows * setup.columns)
    now = season_number(setup.season, setup.year)
    for entry in setup.sectors:
        assert entry.type is not None and entry.population is not None, (
            "a resolved setup lists explored sectors"
        )
        last_starved = None if entry.starved_seasons_ago is None else now - entry.starved_seasons_ago
        sectors[entry.row * setup.columns + entry.column] = Sector(
            type=entry.type, population=entry.population, buildings=entry.buildings, last_starved=last_starved
        )
    return ColonyState(
        owner=setup.owner,
        rows=setup.rows,
        columns=setup.columns,
        season=setup.season,
        year=setup.year,
        years=setup.years,
        stock=setup.stock,
        sectors=tuple(sectors),
    )


def is_over(state: ColonyState) -> bool:
    return state.year > state.years


# --- checks shared by decide and the policy ---------------------------------------------------


def _inside(state: ColonyState, row: int, column: int, prefix: str = "") -> None:
    """Refuse a place off the grid; ``prefix`` ("from_", "to_") names the command's coordinate fields."""
    check_on_grid(
        state.rows,
        state.columns,
        row,
        column,
        code="sectors.out_of_bounds",
        what=place(row, column),
        row_field=f"{prefix}row",
        column_field=f"{prefix}column",
    )


def _explored(state: ColonyState, row: int, column: int, prefix: str = "") -> Sector:
    _inside(state, row, column, prefix)
    sector = state.sector(row, column)
    if sector is None:
        raise RuleError(
            "sectors.not_explored",
            f"{place(row, column)} is unexplored; explore it first",
            field=f"{prefix}row",
        )
    return sector


def neighbours(state: ColonyState, row: int, column: int) -> list[tuple[int, int]]:
    """The orthogonal neighbours inside the grid: up, left, right, down."""
    candidates = ((row - 1, column), (row, column - 1), (row, column + 1), (row + 1, column))
    return [(r, c) for r, c in candidates if 0 <= r < state.rows and 0 <= c < state.columns]


def check_explore(state: ColonyState, command: Explore) -> None:
    _inside(state, command.row, command.column)
    sector = state.sector(command.row, command.column)
    if sector is not None:
        raise RuleError(
            "sectors.already_explored",
            f"{place(command.row, command.column)} is already explored (a {sector.type})",
            field="row",
        )
    if not any(state.sector(r, c) is not None for r, c in neighbours(state, command.row, command.column)):
        raise RuleError(
            "sectors.not_adjacent",
            f"{place(command.row, command.column)} has no explored neighbour; only a sector directly above, "
            "below, left or right of an explored one can be explored",
            field="row",
        )


def check_move(state: ColonyState, command: MovePeople) -> None:
    source = _explored(state, command.from_row, command.from_column, "from_")
    target = _explored(state, command.to_row, command.to_column, "to_")
    if (command.from_row, command.from_column) == (command.to_row, command.to_column):
        raise RuleError("sectors.same_sector", "people must move to a different sector", field="to_row")
    if command.count < 1:
        raise RuleError(
            "sectors.invalid_count", f"count must be at least 1, got {command.count}", field="count"
        )
    if command.count > source.population:
        raise RuleError(
            "sectors.not_enough_people",
            f"{place(command.from_row, command.from_column)} has {source.population} people; "
            f"cannot move {command.count}",
            field="count",
        )
    kind = SECTOR_TYPES[target.type]
    cap = population_limit(kind)
    if target.population + command.count > cap:
        raise RuleError(
            "sectors.population_cap",
            f"{_cap_message(kind)}: {place(command.to_row, command.to_column)} has "
            f"{target.population}, so at most {max(cap - target.population, 0)} more can move in",
            field="count",
        )


def check_build(state: ColonyState, command: Build) -> Goods:
    """The cost the build will take, once every rule allows it."""
    sector = _explored(state, command.row, command.column)
    building = BUILDINGS.get(command.building)
    if building is None:
        raise _unknown_building(command.building, "building")
    kind = SECTOR_TYPES[sector.type]
    if building.name in kind.banned_buildings:
        raise _banned(kind, building.name, "building")
    if kind.building_limit is not None and len(sector.buildings) >= kind.building_limit:
        raise RuleError(
            "sectors.building_limit",
            f"a {kind.name} holds at most {kind.building_limit} buildings and "
            f"{place(command.row, command.column)} already has {len(sector.buildings)}",
            field="building",
        )
    cost = goods_of(building.cost)
    missing = shortfalls(cost, state.stock)
    if missing:
        raise RuleError(
            "sectors.insufficient_stock",
            f"a {building.name} costs {costs(cost)}; " + "; ".join(missing),
            field="building",
        )
    return cost


def check_demolish(state: ColonyState, command: Demolish) -> str:
    """The building that will come down, once every rule allows it."""
    sector = _explored(state, command.row, command.column)
    if not sector.buildings:
        raise RuleError(
            "sectors.no_building", f"{place(command.row, command.column)} has no buildings", field="position"
        )
    if not 0 <= command.position < len(sector.buildings):
        raise RuleError(
            "sectors.no_building",
            f"{place(command.row, command.column)} has {len(sector.buildings)} buildings at positions "
            f"0-{len(sector.buildings) - 1} (0 is the oldest); there is none at {command.position}",
            field="position",
        )
    standing = sector.buildings[command.position]
    if command.building is not None and command.building != standing:
        raise RuleError(
            "sectors.building_mismatch",
            f"the building at position {command.position} of {place(command.row, command.column)} is a "
            f"{standing}, not a {command.building}",
            field="building",
        )
    return standing


def refusal(state: ColonyState, command: Any) -> RuleError | None:
    """Why the rules would refuse a command, without drawing dice; None when they would accept it."""
    try:
        check = CHECKS.get(type(command))
        if check is not None:
            check(state, command)
    except RuleError as error:
        return error
    return None


# --- decide -----------------------------------------------------------------------------------


def decide_explore(state: ColonyState, command: Explore, ctx: Context) -> list[Any]:
    check_explore(state, command)
    drawn = SECTOR_TYPE_NAMES[ctx.dice.randbelow(len(SECTOR_TYPE_NAMES))]
    return [
        SectorExplored(
            row=command.row, column=command.column, sector_type=drawn, population=EXPLORED_SECTOR_POPULATION
        )
    ]


def decide_move(state: ColonyState, command: MovePeople, ctx: Context) -> list[Any]:
    check_move(state, command)
    return [
        PeopleMoved(
            from_row=command.from_row,
            from_column=command.from_column,
            to_row=command.to_row,
            to_column=command.to_column,
            count=command.count,
        )
    ]


def decide_build(state: ColonyState, command: Build, ctx: Context) -> list[Any]:
    cost = check_build(state, command)
    return [BuildingBuilt(row=command.row, column=command.column, building=command.building, cost=cost)]


def decide_demolish(state: ColonyState, command: Demolish, ctx: Context) -> list[Any]:
    standing = check_demolish(state, command)
    return [
        BuildingDemolished(
            row=command.row, column=command.column, position=command.position, building=standing
        )
    ]


def decide_end_season(state: ColonyState, command: EndSeason, ctx: Context) -> list[Any]:
    """The seed's three phases, each over every explored sector in row-major order, then the calendar."""
    season, year = state.season, state.year
    now = season_number(season, year)
    explored = state.explored()
    # A working copy of the stock: each sector's outcome depends on what the sectors before it left.
    stock = state.stock.as_dict()
    events: list[Any] = []

    populations: list[int] = []
    for row, column, sector in explored:
        changed = population_change(row, column, sector, season, year, now, stock["food"])
        stock["food"] -= changed.food_eaten
        populations.append(changed.population_after)
        events.append(changed)

    idle: list[int] = []
    for (row, column, sector), population in zip(explored, populations, strict=True):
        if not sector.buildings:
            idle.append(population)
            continue
        produced = production(row, column, sector, population, season, year, stock)
        idle.append(produced.idle_workers)
        events.append(produced)

    for (row, column, sector), population, workers in zip(explored, populations, idle, strict=True):
        harvested = harvest(row, column, sector, population, workers, season, year, stock)
        for good, amount in (harvested.harvested + harvested.extra).as_dict().items():
            stock[good] += amount
        events.append(harvested)

    following, following_year = next_season(season, year)
    events.append(
        SeasonEnded(
            season=season,
            year=year,
            next_season=following,
            next_year=following_year,
            stock=Goods(**stock),
            population=sum(populations),
        )
    )
    return events


def population_change(
    row: int, column: int, sector: Sector, season: Season, year: int, now: int, food: int
) -> PopulationChanged:
    """Feed, then reproduce, then cap one sector, drawing on ``food`` left by the sectors before it."""
    kind = SECTOR_TYPES[sector.type]
    population = sector.population
    rate = kind.food_need[season]
    needed = ceil_times(population, rate)
    if food >= needed:
        eaten, survivors, starved = needed, population, False
    else:
        # The seed's "less than" is a slip for "greater than": a short stock is all eaten, and the
        # share of people fed survives, rounded down.
        eaten, survivors, starved = food, population * food // needed, True

    allowed, reason = _growth(kind, sector, season, now, starved)
    births = floor_times(survivors, kind.growth_rate) if allowed else 0
    grown = survivors + births
    limit = population_limit(kind)
    after = min(grown, limit)
    # The event names the cap that applied: the type's, or the ledger's ceiling once it is reached.
    cap = limit if kind.population_cap is not None or grown > limit else None
    return PopulationChanged(
        row=row,
        column=column,
        sector_type=kind.name,
        season=season,
        year=year,
        population_before=population,
        food_rate=str(rate),
        food_needed=needed,
        food_eaten=eaten,
        starved=starved,
        deaths=population - survivors,
        growth_rate=str(kind.growth_rate),
        growth_allowed=allowed,
        growth_reason=reason,
        births=births,
        cap=cap,
        over_cap=grown - after,
        population_after=after,
    )


def _growth(
    kind: SectorType, sector: Sector, season: Season, now: int, starved_now: bool
) -> tuple[bool, str]:
    if season not in kind.growth_seasons:
        only = " and ".join(kind.growth_seasons)
        return False, f"{kind.name} people reproduce only in {only}"
    window = kind.growth_blocked_by_starvation_within
    if window:
        if starved_now:
            return False, f"{kind.name} people do not reproduce after starving this season"
        if sector.last_starved is not None and now - sector.last_starved < window:
            ago = now - sector.last_starved
            return False, (
                f"{kind.name} people do not reproduce after starvation in the last {window} seasons; "
                f"this sector starved {ago} season{'s' if ago != 1 else ''} ago"
            )
        return (
            True,
            f"{kind.name} people reproduce in {season} when no starvation in the last {window} seasons",
        )
    if len(kind.growth_seasons) == len(SEASONS):
        return True, f"{kind.name} people reproduce every season, even after starvation"
    return True, f"{kind.name} people reproduce in {season}"


def production(
    row: int, column: int, sector: Sector, workforce: int, season: Season, year: int, stock: dict[str, int]
) -> GoodsProduced:
    """Staff buildings newest first; each staffed one produces if the stock holds its inputs. Updates ``stock``."""
    kind = SECTOR_TYPES[sector.type]
    multiplier = kind.production_multiplier_in(season)
    closed = season in kind.production_closed_in
    remaining = workforce
    reports: list[BuildingReport] = []
    consumed_total: dict[str, int] = {}
    produced_total: dict[str, int] = {}
    for position in range(len(sector.buildings) - 1, -1, -1):
        name = sector.buildings[position]
        building = BUILDINGS[name]
        if closed:
            reports.append(
                BuildingReport(
                    position=position,
                    building=name,
                    outcome="closed",
                    reason=f"no production in a {kind.name} in {season}",
                )
            )
            continue
        if remaining < building.crew:
            reports.append(
                BuildingReport(
                    position=position,
                    building=name,
                    outcome="not_staffed",
                    reason=f"needs a crew of {building.crew}, only {remaining} workers left",
                )
            )
            continue
        # The crew is busy whether or not the inputs are there ("happily sit and do nothing").
        remaining -= building.crew
        missing = [
            f"not enough {good}: need {amount}, have {stock[good]}"
            for good, amount in building.inputs
            if stock[good] < amount
        ]
        if missing:
            reports.append(
                BuildingReport(
                    position=position,
                    building=name,
                    outcome="idle_missing_inputs",
                    crew_used=building.crew,
                    reason="; ".join(missing),
                )
            )
            continue
        for good, amount in building.inputs:
            stock[good] -= amount
            consumed_total[good] = consumed_total.get(good, 0) + amount
        outputs = {
            good: min(floor_times(amount, multiplier), LEDGER_CEILING - stock[good])
            for good, amount in building.outputs
        }
        for good, amount in outputs.items():
            stock[good] += amount
            produced_total[good] = produced_total.get(good, 0) + amount
        reason = (
            "ran" if multiplier == 1 else f"ran; output x{multiplier} in a {kind.name} {season}, rounded down"
        )
        reports.append(
            BuildingReport(
                position=position,
                building=name,
                outcome="ran",
                crew_used=building.crew,
                reason=reason,
                consumed=_INPUTS[name],
                produced=_FULL_OUTPUTS[name] if outputs == _FULL_OUTPUT_AMOUNTS[name] else goods_of(outputs),
            )
        )
    return GoodsProduced(
        row=row,
        column=column,
        sector_type=kind.name,
        season=season,
        year=year,
        workforce=workforce,
        multiplier="0" if closed else str(multiplier),
        buildings=tuple(reports),
        consumed=goods_of(consumed_total),
        produced=goods_of(produced_total),
        idle_workers=remaining,
    )


def harvest(
    row: int,
    column: int,
    sector: Sector,
    population: int,
    idle: int,
    season: Season,
    year: int,
    stock: dict[str, int],
) -> ResourcesHarvested:
    """Idle workers times the type's rates and multipliers, rounded down per good; extras on everyone.

    Amounts stop where the stock would pass the ledger's ceiling; ``stock`` is only read here.
    """
    kind = SECTOR_TYPES[sector.type]
    closed = season in kind.harvest_closed_in
    multiplier = Fraction(0) if closed else _ONE
    reasons: list[str] = [f"no resource harvesting in a {kind.name} in {season}"] if closed else []
    harvested: dict[str, int] = {}
    extra: dict[str, int] = {}
    extra_reasons: list[str] = []
    if not closed:
        for cut in kind.harvest_cuts:
            measured = population if cut.measure == "population" else len(sector.buildings)
            if measured > cut.above:
                multiplier *= cut.multiplier
                reasons.append(cut.reason)
        room = {good: LEDGER_CEILING - amount for good, amount in stock.items()}
        for good, rate in kind.harvest_rates:
            harvested[good] = min(floor_times(idle, rate * multiplier), room[good])
            room[good] -= harvested[good]
        for bonus in kind.extra_harvest:
            if bonus.season == season:
                amount = min(floor_times(population, bonus.per_person), room[bonus.good])
                room[bonus.good] -= amount
                extra[bonus.good] = extra.get(bonus.good, 0) + amount
                extra_reasons.append(bonus.reason)
    return ResourcesHarvested(
        row=row,
        column=column,
        sector_type=kind.name,
        season=season,
        year=year,
        idle_workers=idle,
        population=population,
        closed=closed,
        multiplier=str(multiplier),
        multiplier_reasons=tuple(reasons),
        harvested=goods_of(harvested),
        extra=goods_of(extra),
        extra_reasons=tuple(extra_reasons),
    )


# --- evolve -----------------------------------------------------------------------------------


def _with_sector(state: ColonyState, row: int, column: int, sector: Sector) -> ColonyState:
    return msgspec.structs.replace(state, sectors=replace_sector(state, row, column, sector))


def _explored_sector(state: ColonyState, row: int, column: int) -> Sector:
    sector = state.sector(row, column)
    assert sector is not None, f"an event names {place(row, column)}, which is unexplored"
    return sector


def _with_population(state: ColonyState, row: int, column: int, change: int) -> ColonyState:
    sector = _explored_sector(state, row, column)
    return _with_sector(
        state, row, column, msgspec.structs.replace(sector, population=sector.population + change)
    )


def evolve_sector_explored(state: ColonyState, event: SectorExplored) -> ColonyState:
    return _with_sector(
        state, event.row, event.column, Sector(type=event.sector_type, population=event.population)
    )


def evolve_people_moved(state: ColonyState, event: PeopleMoved) -> ColonyState:
    left = _with_population(state, event.from_row, event.from_column, -event.count)
    return _with_population(left, event.to_row, event.to_column, event.count)


def evolve_building_built(state: ColonyState, event: BuildingBuilt) -> ColonyState:
    sector = _explored_sector(state, event.row, event.column)
    built = msgspec.structs.replace(sector, buildings=(*sector.buildings, event.building))
    return msgspec.structs.replace(
        _with_sector(state, event.row, event.column, built), stock=state.stock - event.cost
    )


def evolve_building_demolished(state: ColonyState, event: BuildingDemolished) -> ColonyState:
    sector = _explored_sector(state, event.row, event.column)
    buildings = sector.buildings[: event.position] + sector.buildings[event.position + 1 :]
    return _with_sector(state, event.row, event.column, msgspec.structs.replace(sector, buildings=buildings))


def evolve_population_changed(state: ColonyState, event: PopulationChanged) -> ColonyState:
    sector = _explored_sector(state, event.row, event.column)
    last_starved = season_number(event.season, event.year) if event.starved else sector.last_starved
    changed = msgspec.structs.replace(sector, population=event.population_after, last_starved=last_starved)
    stock = state.stock
    if event.food_eaten:
        stock = msgspec.structs.replace(stock, food=stock.food - event.food_eaten)
    return msgspec.structs.replace(_with_sector(state, event.row, event.column, changed), stock=stock)


def evolve_goods_produced(state: ColonyState, event: GoodsProduced) -> ColonyState:
    if event.consumed.is_empty() and event.produced.is_empty():
        return state
    return msgspec.structs.replace(state, stock=state.stock - event.consumed + event.produced)


def evolve_resources_harvested(state: ColonyState, event: ResourcesHarvested) -> ColonyState:
    return msgspec.structs.replace(state, stock=state.stock + event.harvested + event.extra)


def evolve_season_ended(state: ColonyState, event: SeasonEnded) -> ColonyState:
    return msgspec.structs.replace(state, season=event.next_season, year=event.next_year)


CHECKS: dict[type, Callable[[ColonyState, Any], Any]] = {
    Explore: check_explore,
    MovePeople: check_move,
    Build: check_build,
    Demolish: check_demolish,
}

DECIDE: dict[type, Callable[[ColonyState, Any, Context], list[Any]]] = {
    Explore: decide_explore,
    MovePeople: decide_move,
    Build: decide_build,
    Demolish: decide_demolish,
    EndSeason: decide_end_season,
}

EVOLVE: dict[type, Callable[[ColonyState, Any], ColonyState]] = {
    SectorExplored: evolve_sector_explored,
    PeopleMoved: evolve_people_moved,
    BuildingBuilt: evolve_building_built,
    BuildingDemolished: evolve_building_demolished,
    PopulationChanged: evolve_population_changed,
    GoodsProduced: evolve_goods_produced,
    ResourcesHarvested: evolve_resources_harvested,
    SeasonEnded: evolve_season_ended,
}

# Every good a table mentions must be a field of the stock, or an event could not record it.
assert all(
    good in GOODS
    for building in BUILDINGS.values()
    for good, _ in building.inputs + building.outputs + building.cost
)


# --- the running score ----------------------------------------------------------------------------


def colony_score(state: ColonyState) -> int:
    """The colony's running score (docs/rules/sectors.md, "Scores"): victory points plus the worth of
    worked goods, people, buildings and explored sectors. A function of public state only."""
    explored = state.explored()
    return (
        state.stock.victory_points * data.SCORE_PER_VICTORY_POINT
        + state.stock.coins * data.SCORE_PER_COIN
        + state.stock.lumber * data.SCORE_PER_LUMBER
        + sum(sector.population for _, _, sector in explored) * data.SCORE_PER_PERSON
        + sum(len(sector.buildings) for _, _, sector in explored) * data.SCORE_PER_BUILDING
        + len(explored) * data.SCORE_PER_EXPLORED_SECTOR
    )
