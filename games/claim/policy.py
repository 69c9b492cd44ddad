"""A simple legal-move policy for the claim: benchmarks, demos and property tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from almanac.events.manifest import Context, Dice, RuleError
from almanac.games.claim import data, rules
from almanac.games.claim.commands import Build, Cruise, Cut, Farm, Harvest, Haul, ProveUp, Replant
from almanac.games.claim.growth import stand
from almanac.games.claim.seeding import COUNTING, FARMABLE, INDEX_BY_NAME, TERRAIN
from almanac.games.claim.state import ClaimState

# Keep a margin above the prove-up cover so that cutting never strands the claim.
_CUT_COVER_FLOOR = data.PROVE_UP_MIN_COVER + 2


def _legal(state: ClaimState, command: Any, ctx: Context) -> bool:
    try:
        rules.decide(state, command, ctx)
    except RuleError:
        return False
    return True


def choose_command(
    state: ClaimState, player: str, now_ms: int, dice: Dice, *, prove_up: bool = True
) -> Any | None:
    """A legal command for ``player`` at ``now_ms``, or None when the player has nothing to do.

    Greedy and plain: harvest ripe hay, prove up when allowed, haul a loaded deck, build a cabin (then
    a barn and a mill) on bare ground, sow idle meadow, replant bare parcels, cut the best stand
    while cover allows, else cruise. Dice break ties so that games differ.
    """
    if player != state.owner or state.proved_up_ms is not None:
        return None
    ctx = Context(room="policy", player=player, now_ms=now_ms, version=0, dice=dice)
    for command in _candidates(state, now_ms, dice, prove_up):
        if _legal(state, command, ctx):
            return command
    return Cruise()  # always legal for the owner of a claim not yet proved up


def _candidates(state: ClaimState, now_ms: int, dice: Dice, prove_up: bool) -> Iterator[Any]:
    # A generator, so that the costly stand valuations run only when nothing cheaper is legal.
    for name in FARMABLE:
        if state.parcels[INDEX_BY_NAME[name]].crop_ripe_ms is not None:
            yield Harvest(parcel=name)
    if prove_up:
        yield ProveUp()
    if state.deck:
        yield Haul()
    bare = [
        t
        for t in TERRAIN
        if not t.meadow and state.parcels[t.index].species is None and not state.parcels[t.index].building
    ]
    if not rules.has_building(state, "cabin"):
        yield from (Build(parcel=t.name, building="cabin") for t in bare if not t.slope)
    if not rules.has_building(state, "barn"):
        yield Build(parcel=FARMABLE[-1], building="barn")
    if not rules.has_building(state, "mill") and state.cash_cents > 3 * data.BUILDINGS["mill"].cost_cents:
        yield from (Build(parcel=t.name, building="mill") for t in bare if not t.slope)
    for name in FARMABLE:
        parcel = state.parcels[INDEX_BY_NAME[name]]
        if parcel.crop_ripe_ms is None and parcel.building is None:
            yield Farm(parcel=name)
    if bare and state.cash_cents >= data.REPLANT_COST_CENTS:
        t = bare[dice.randbelow(len(bare))]
        replant = data.ZONES[t.zone].replant
        yield Replant(parcel=t.name, species=replant[dice.randbelow(len(replant))])
    if rules.cover_parcels(state) > _CUT_COVER_FLOOR:
        stands = []
        for i in COUNTING:
            parcel = state.parcels[i]
            if parcel.species is not None and parcel.planted_ms is not None:
                value = stand(parcel.species, parcel.planted_ms, now_ms).value_cents
                if value >= 3 * rules.cut_cost(i):
                    stands.append((value, i))
        stands.sort(reverse=True)
        top = stands[:3]
        if top:
            yield Cut(parcel=TERRAIN[top[dice.randbelow(len(top))][1]].name)
