"""The claim's rules: one pure function per command (decide_*) and per event (evolve_*)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError
from almanac.games.claim import data
from almanac.games.claim.commands import Build, Cruise, Cut, Farm, Harvest, Haul, ProveUp, Replant
from almanac.games.claim.events import (
    BuildingBuilt,
    ClaimProvedUp,
    CropHarvested,
    DeckHauled,
    MeadowFarmed,
    ParcelCut,
    ParcelReplanted,
    TimberCruised,
)
from almanac.games.claim.growth import stand
from almanac.games.claim.seeding import COUNTING, FARMABLE, INDEX_BY_NAME, TERRAIN
from almanac.games.claim.state import ClaimSetup, ClaimState, DeckLot, Parcel, Terrain

replace = msgspec.structs.replace

# --- setup and reading the state -----------------------------------------------------------------


def initial_state(setup: ClaimSetup) -> ClaimState:
    return ClaimState(
        owner=setup.owner,
        block=setup.block,
        created_at_ms=setup.created_at_ms,
        clock_ms=setup.created_at_ms,
        cash_cents=data.START_CASH_CENTS,
        parcels=tuple(Parcel(species=p.species, planted_ms=p.planted_ms) for p in setup.parcels),
    )


def site_of(index: int) -> str:
    """The ground a building stands on: "meadow", or the parcel's zone."""
    terrain = TERRAIN[index]
    return "meadow" if terrain.meadow else terrain.zone


def cover_parcels(state: ClaimState) -> int:
    """Counting parcels (the 61 outside the meadow) with timber standing, seedlings included."""
    return sum(1 for i in COUNTING if state.parcels[i].species is not None)


def deck_logs(state: ClaimState) -> int:
    return sum(lot.logs for lot in state.deck)


def deck_board_feet(state: ClaimState) -> int:
    return sum(lot.board_feet for lot in state.deck)


def cut_cost(index: int) -> int:
    """The felling crew for one parcel: double on the steep ridge."""
    return data.CUT_COST_CENTS * (data.STEEP_CUT_FACTOR if TERRAIN[index].slope else 1)


def standing_timber(state: ClaimState, at_ms: int) -> tuple[int, int]:
    """(board feet, value in cents) of all standing timber at ``at_ms``."""
    board_feet = value = 0
    for parcel in state.parcels:
        if parcel.species is not None and parcel.planted_ms is not None:
            s = stand(parcel.species, parcel.planted_ms, at_ms)
            board_feet += s.board_feet
            value += s.value_cents
    return board_feet, value


def worth_cents(state: ClaimState) -> int:
    """Cash + logs on the deck + standing timber at the claim's clock (the last event's time)."""
    return (
        state.cash_cents
        + sum(lot.value_cents for lot in state.deck)
        + standing_timber(state, state.clock_ms)[1]
    )


def score(state: ClaimState) -> int:
    """The claim's worth in whole dollars, rounded down; frozen when the claim is proved up."""
    if state.final_score is not None:
        return state.final_score
    return worth_cents(state) // 100


def has_building(state: ClaimState, building: str) -> bool:
    return any(p.building == building for p in state.parcels)


def hours_text(hours: Fraction) -> str:
    """Hours to one decimal, rounded down, without floats."""
    tenths = math.floor(hours * 10)
    return f"{tenths // 10}.{tenths % 10}"


def dollars(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def minutes_until(until_ms: int, now_ms: int) -> int:
    """Whole minutes from ``now_ms`` to ``until_ms``, rounded up."""
    return -(-(until_ms - now_ms) // 60_000)


# --- refusals shared by several commands ---------------------------------------------------------


def _parcel(state: ClaimState, name: str) -> tuple[int, Terrain, Parcel]:
    """A command's parcel by name (case and spaces forgiven): its index, its terrain and its state."""
    index = INDEX_BY_NAME.get(name.strip().upper())
    if index is None:
        raise RuleError(
            "claim.unknown_parcel",
            f"there is no parcel {name!r}; parcels are A1..H8 (columns A-H west to east, rows 1-8 north to south)",
            field="parcel",
            allowed=list(INDEX_BY_NAME),
        )
    return index, TERRAIN[index], state.parcels[index]


def _pay(state: ClaimState, cost: int, what: str) -> None:
    if cost > state.cash_cents:
        raise RuleError(
            "claim.not_enough_cash",
            f"{what} costs {dollars(cost)} but the claim has {dollars(state.cash_cents)}; haul logs or harvest hay first",
        )


def _not_built_on(state: ClaimState, index: int) -> None:
    building = state.parcels[index].building
    if building is not None:
        raise RuleError(
            "claim.built_on",
            f"{TERRAIN[index].name} has a {data.BUILDINGS[building].name} on it; nothing else can go there",
            field="parcel",
        )


# --- decide --------------------------------------------------------------------------------------


def decide_cut(state: ClaimState, command: Cut, ctx: Context) -> list[Any]:
    index, terrain, parcel = _parcel(state, command.parcel)
    if parcel.species is None or parcel.planted_ms is None:
        why = (
            "the landing is a road"
            if terrain.road
            else "the meadow grows no timber"
            if terrain.meadow
            else f"it has a {data.BUILDINGS[parcel.building].name}"
            if parcel.building
            else "it was cut and not replanted"
        )
        raise RuleError("claim.no_timber", f"{terrain.name} has no timber to cut: {why}", field="parcel")
    s = stand(parcel.species, parcel.planted_ms, ctx.now_ms)
    if s.board_feet == 0:
        raise RuleError(
            "claim.too_young",
            f"the {data.SPECIES[parcel.species].name} on {terrain.name} is {hours_text(s.adjusted_hours)} growth-adjusted "
            f"hours old; nothing is merchantable before {data.VOLUME_CURVE[1][0]} hours",
            field="parcel",
        )
    room = data.DECK_CAPACITY_LOGS - deck_logs(state)
    if s.logs > room:
        raise RuleError(
            "claim.deck_full",
            f"cutting {terrain.name} gives {s.logs} logs but the landing deck has room for {room} "
            f"(of {data.DECK_CAPACITY_LOGS}); haul the deck first",
            field="parcel",
        )
    cost = cut_cost(index)
    _pay(state, cost, f"logging {'steep ' if terrain.slope else ''}{terrain.name}")
    return [
        ParcelCut(
            at_ms=ctx.now_ms,
            parcel=index,
            species=parcel.species,
            age_ms=s.age_ms,
            grade=s.grade,
            board_feet=s.board_feet,
            logs=s.logs,
            value_cents=s.value_cents,
            cost_cents=cost,
        )
    ]


def decide_haul(state: ClaimState, command: Haul, ctx: Context) -> list[Any]:
    if ctx.now_ms < state.wagon_back_ms:
        raise RuleError(
            "claim.wagon_away",
            f"the wagon is on the road and back at the landing in "
            f"{minutes_until(state.wagon_back_ms, ctx.now_ms)} minutes",
        )
    if not state.deck:
        raise RuleError("claim.deck_empty", "there are no logs on the landing deck; cut a parcel first")
    value = sum(lot.value_cents for lot in state.deck)
    gross = math.floor(value * data.MILL_PRICE_FACTOR) if has_building(state, "mill") else value
    if state.cash_cents + gross < data.HAUL_FEE_CENTS:
        raise RuleError(
            "claim.not_enough_cash",
            f"the teamster's fee is {dollars(data.HAUL_FEE_CENTS)} but cash {dollars(state.cash_cents)} "
            f"plus the sale {dollars(gross)} does not cover it",
        )
    return [
        DeckHauled(
            at_ms=ctx.now_ms,
            logs=deck_logs(state),
            board_feet=deck_board_feet(state),
            gross_cents=gross,
            fee_cents=data.HAUL_FEE_CENTS,
            back_ms=ctx.now_ms + data.WAGON_TRIP_MS,
        )
    ]


def decide_replant(state: ClaimState, command: Replant, ctx: Context) -> list[Any]:
    index, terrain, parcel = _parcel(state, command.parcel)
    if terrain.meadow:
        what = "the landing (a road) in the meadow" if terrain.road else "meadow"
        raise RuleError(
            "claim.meadow_not_plantable",
            f"{terrain.name} is {what}; the meadow is never replanted (farm or build on it instead)",
            field="parcel",
        )
    _not_built_on(state, index)
    if parcel.species is not None:
        raise RuleError(
            "claim.timber_standing",
            f"{terrain.name} still has {data.SPECIES[parcel.species].name} standing; cut it before replanting",
            field="parcel",
        )
    zone = data.ZONES[terrain.zone]
    if command.species not in data.SPECIES:
        raise RuleError(
            "claim.unknown_species",
            f"there is no species {command.species!r}; species: {', '.join(data.SPECIES)}",
            field="species",
            allowed=list(data.SPECIES),
        )
    if command.species not in zone.replant:
        raise RuleError(
            "claim.species_not_allowed",
            f"{data.SPECIES[command.species].name} cannot be planted on {terrain.name} ({zone.name}); "
            f"allowed: {', '.join(zone.replant)}",
            field="species",
            allowed=list(zone.replant),
        )
    _pay(state, data.REPLANT_COST_CENTS, f"replanting {terrain.name}")
    return [
        ParcelReplanted(
            at_ms=ctx.now_ms, parcel=index, species=command.species, cost_cents=data.REPLANT_COST_CENTS
        )
    ]


def decide_farm(state: ClaimState, command: Farm, ctx: Context) -> list[Any]:
    index, terrain, parcel = _parcel(state, command.parcel)
    if terrain.road:
        raise RuleError(
            "claim.landing_not_farmable",
            f"{terrain.name} is the landing, a road; it cannot be farmed",
            field="parcel",
        )
    if not terrain.meadow:
        raise RuleError(
            "claim.not_meadow",
            f"{terrain.name} is not meadow; only the meadow can be farmed: {', '.join(FARMABLE)}",
            field="parcel",
            allowed=list(FARMABLE),
        )
    _not_built_on(state, index)
    if parcel.crop_ripe_ms is not None:
        raise RuleError(
            "claim.crop_growing", f"{terrain.name} already has hay growing; harvest it first", field="parcel"
        )
    _pay(state, data.FARM_COST_CENTS, f"sowing hay on {terrain.name}")
    return [
        MeadowFarmed(
            at_ms=ctx.now_ms,
            parcel=index,
            cost_cents=data.FARM_COST_CENTS,
            ripe_ms=ctx.now_ms + data.CROP_RIPE_MS,
        )
    ]


def decide_harvest(state: ClaimState, command: Harvest, ctx: Context) -> list[Any]:
    index, terrain, parcel = _parcel(state, command.parcel)
    if parcel.crop_ripe_ms is None:
        raise RuleError(
            "claim.no_crop", f"{terrain.name} has no hay growing; farm a meadow parcel first", field="parcel"
        )
    if ctx.now_ms < parcel.crop_ripe_ms:
        raise RuleError(
            "claim.crop_not_ripe",
            f"the hay on {terrain.name} is ripe in {minutes_until(parcel.crop_ripe_ms, ctx.now_ms)} minutes",
            field="parcel",
        )
    sale = data.HAY_SALE_CENTS
    if has_building(state, "barn"):
        sale = math.floor(sale * data.BARN_HAY_FACTOR)
    return [CropHarvested(at_ms=ctx.now_ms, parcel=index, sale_cents=sale)]


def decide_build(state: ClaimState, command: Build, ctx: Context) -> list[Any]:
    index, terrain, parcel = _parcel(state, command.parcel)
    building = data.BUILDINGS.get(command.building)
    if building is None:
        raise RuleError(
            "claim.unknown_building",
            f"there is no building {command.building!r}; buildings: {', '.join(data.BUILDINGS)}",
            field="building",
            allowed=list(data.BUILDINGS),
        )
    if terrain.road:
        raise RuleError(
            "claim.landing_no_building",
            f"{terrain.name} is the landing, a road; nothing is built on it",
            field="parcel",
        )
    _not_built_on(state, index)
    if has_building(state, building.key):
        raise RuleError(
            "claim.building_limit",
            f"the claim already has a {building.name}; one of each kind",
            field="building",
        )
    site = site_of(index)
    if site not in building.sites:
        raise RuleError(
            "claim.site_not_allowed",
            f"a {building.name} cannot stand on {terrain.name} ({site}); it may stand on: {', '.join(building.sites)}",
            field="parcel",
            allowed=[t.name for t in TERRAIN if site_of(t.index) in building.sites and not t.road],
        )
    if parcel.species is not None:
        raise RuleError(
            "claim.timber_standing",
            f"{terrain.name} has timber standing; cut it before building",
            field="parcel",
        )
    if parcel.crop_ripe_ms is not None:
        raise RuleError(
            "claim.crop_growing", f"{terrain.name} has hay growing; harvest it first", field="parcel"
        )
    _pay(state, building.cost_cents, f"a {building.name}")
    return [
        BuildingBuilt(at_ms=ctx.now_ms, parcel=index, building=building.key, cost_cents=building.cost_cents)
    ]


def decide_cruise(state: ClaimState, command: Cruise, ctx: Context) -> list[Any]:
    board_feet, value = standing_timber(state, ctx.now_ms)
    return [
        TimberCruised(
            at_ms=ctx.now_ms, board_feet=board_feet, value_cents=value, cover_parcels=cover_parcels(state)
        )
    ]


def decide_prove_up(state: ClaimState, command: ProveUp, ctx: Context) -> list[Any]:
    if not has_building(state, "cabin"):
        raise RuleError(
            "claim.no_cabin", "a claim is proved up only with a homestead cabin on it; build one first"
        )
    age = ctx.now_ms - state.created_at_ms
    if age < data.PROVE_UP_MIN_MS:
        hours = -(-(data.PROVE_UP_MIN_MS - age) // data.MS_PER_HOUR)
        raise RuleError(
            "claim.too_early",
            f"a claim is proved up no sooner than {data.PROVE_UP_MIN_MS // data.MS_PER_HOUR} hours after it was "
            f"staked; {hours} h to go",
        )
    cover = cover_parcels(state)
    if cover < data.PROVE_UP_MIN_COVER:
        raise RuleError(
            "claim.cover_too_low",
            f"only {cover} of {len(COUNTING)} parcels carry timber; proving up needs {data.PROVE_UP_MIN_COVER}: replant",
        )
    final = replace(state, clock_ms=max(state.clock_ms, ctx.now_ms))
    return [ClaimProvedUp(at_ms=ctx.now_ms, score=score(final), cover_parcels=cover)]


DECIDE: dict[type, Callable[[ClaimState, Any, Context], list[Any]]] = {
    Cut: decide_cut,
    Haul: decide_haul,
    Replant: decide_replant,
    Farm: decide_farm,
    Harvest: decide_harvest,
    Build: decide_build,
    Cruise: decide_cruise,
    ProveUp: decide_prove_up,
}


def decide(state: ClaimState, command: Any, ctx: Context) -> list[Any]:
    if ctx.player != state.owner:
        raise RuleError(
            "claim.not_owner",
            f"only the claim's owner {state.owner!r} may work it",
            field="player",
            allowed=[state.owner],
        )
    if state.proved_up_ms is not None:
        raise RuleError("claim.proved_up", "the claim is proved up; nothing more happens on it")
    if ctx.now_ms < state.created_at_ms:
        # No timber stood on the claim for anyone before it was staked: valuing (or cutting) it at an
        # earlier time would credit growth the owner never had. Refused, not moved to the staking time.
        raise RuleError(
            "claim.before_staking",
            f"the command is timed {ctx.now_ms} ms, before the claim was staked at {state.created_at_ms} ms",
            allowed={"min": state.created_at_ms},
        )
    handler = DECIDE.get(type(command))
    if handler is None:
        raise RuleError("unknown_command", f"the claim does not know the command {type(command).__name__}")
    return handler(state, command, ctx)


# --- evolve --------------------------------------------------------------------------------------


def _set_parcel(state: ClaimState, index: int, parcel: Parcel) -> tuple[Parcel, ...]:
    return state.parcels[:index] + (parcel,) + state.parcels[index + 1 :]


def evolve_parcel_cut(state: ClaimState, event: ParcelCut) -> ClaimState:
    lot = DeckLot(
        parcel=event.parcel,
        species=event.species,
        logs=event.logs,
        board_feet=event.board_feet,
        value_cents=event.value_cents,
    )
    return replace(
        state,
        parcels=_set_parcel(state, event.parcel, Parcel()),
        deck=(*state.deck, lot),
        cash_cents=state.cash_cents - event.cost_cents,
        parcels_cut=state.parcels_cut + 1,
    )


def evolve_deck_hauled(state: ClaimState, event: DeckHauled) -> ClaimState:
    return replace(
        state,
        deck=(),
        cash_cents=state.cash_cents + event.gross_cents - event.fee_cents,
        wagon_back_ms=event.back_ms,
        trips=state.trips + 1,
        logs_hauled=state.logs_hauled + event.logs,
        board_feet_hauled=state.board_feet_hauled + event.board_feet,
        timber_sales_cents=state.timber_sales_cents + event.gross_cents,
    )


def evolve_parcel_replanted(state: ClaimState, event: ParcelReplanted) -> ClaimState:
    return replace(
        state,
        parcels=_set_parcel(state, event.parcel, Parcel(species=event.species, planted_ms=event.at_ms)),
        cash_cents=state.cash_cents - event.cost_cents,
        parcels_replanted=state.parcels_replanted + 1,
    )


def evolve_meadow_farmed(state: ClaimState, event: MeadowFarmed) -> ClaimState:
    parcel = replace(state.parcels[event.parcel], crop_ripe_ms=event.ripe_ms)
    return replace(
        state,
        parcels=_set_parcel(state, event.parcel, parcel),
        cash_cents=state.cash_cents - event.cost_cents,
    )


def evolve_crop_harvested(state: ClaimState, event: CropHarvested) -> ClaimState:
    parcel = replace(state.parcels[event.parcel], crop_ripe_ms=None)
    return replace(
        state,
        parcels=_set_parcel(state, event.parcel, parcel),
        cash_cents=state.cash_cents + event.sale_cents,
        hay_sales_cents=state.hay_sales_cents + event.sale_cents,
    )


def evolve_building_built(state: ClaimState, event: BuildingBuilt) -> ClaimState:
    return replace(
        state,
        parcels=_set_parcel(state, event.parcel, Parcel(building=event.building)),
        cash_cents=state.cash_cents - event.cost_cents,
    )


def evolve_timber_cruised(state: ClaimState, event: TimberCruised) -> ClaimState:
    return state  # the cruise only moves the clock (done for every event in evolve)


def evolve_claim_proved_up(state: ClaimState, event: ClaimProvedUp) -> ClaimState:
    return replace(state, proved_up_ms=event.at_ms, final_score=event.score)


EVOLVE: dict[type, Callable[[ClaimState, Any], ClaimState]] = {
    ParcelCut: evolve_parcel_cut,
    DeckHauled: evolve_deck_hauled,
    ParcelReplanted: evolve_parcel_replanted,
    MeadowFarmed: evolve_meadow_farmed,
    CropHarvested: evolve_crop_harvested,
    BuildingBuilt: evolve_building_built,
    TimberCruised: evolve_timber_cruised,
    ClaimProvedUp: evolve_claim_proved_up,
}


def evolve(state: ClaimState, event: Any) -> ClaimState:
    state = EVOLVE[type(event)](state, event)
    # Every claim event carries its server time; the clock only moves forward.
    if event.at_ms > state.clock_ms:
        state = replace(state, clock_ms=event.at_ms)
    return state
