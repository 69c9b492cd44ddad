"""The claim rule-set's manifest: its Decider, the simple policy, the claim registry and the seeding figures."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.manifest import (
    BenchScenario,
    Comparison,
    Dice,
    ReadModel,
    RoomId,
    RoomState,
    RuleSet,
    free,
    one_of,
)
from almanac.games.claim import data, seats
from almanac.games.claim.data import Block, BuildingKey, GradeName, Owner, SpeciesKey, ZoneKey
from almanac.games.claim.game import DECIDER
from almanac.games.claim.policy import choose_command
from almanac.games.claim.seeding import Lcg, lcg_seed, parcel_name, seed_parcels

T0 = 1_700_000_000_000
DRAWS_PER_CLAIM = 61 * 3  # three draws for each parcel outside the meadow


def policy(state: Any, player: str, dice: Dice, now_ms: int) -> Any:
    return choose_command(state, player, now_ms, dice)


def claim_entry(state: RoomState) -> dict[str, Any]:
    """Claim registry row: owner, block and the parcels they hold."""
    game = state.game
    # The claim's view is public (anyone may walk a claim) and names every parcel.
    view = DECIDER.view(game, game.owner)
    parcels = [
        {
            "name": parcel.get("name"),
            "zone": parcel.get("zone"),
            "species": parcel.get("species"),
            "building": parcel.get("building"),
        }
        for parcel in view.get("parcels", [])
    ]
    return {
        "room": state.room,
        "owner": game.owner,
        "block": game.block,
        "created_at_ms": state.created_at_ms,
        "proved_up_ms": view.get("proved_up_ms"),
        "score": view.get("score"),
        "parcel_count": len(parcels),
        "timbered_parcels": sum(1 for p in parcels if p["species"]),
        "buildings": sorted(p["building"] for p in parcels if p["building"]),
        "parcels": parcels,
    }


def seed_claims(count: int) -> int:
    """The seed's map generation alone, one claim per creation second."""
    for second in range(count):
        seed_parcels(T0 + second * 1000)
    return count


def bare_lcg(count: int) -> int:
    """Baseline: the same number of LCG draws (183 per claim) in a plain loop, nothing built."""
    for second in range(count):
        rng = Lcg(lcg_seed(T0 + second * 1000))
        for _ in range(DRAWS_PER_CLAIM):
            rng.rand()
    return count


ParcelName = Annotated[str, one_of(parcel_name(index) for index in range(data.PARCELS))]
Hours = Annotated[str, free("growth-adjusted hours, to one decimal (rounded down)", pattern=r"^[0-9]+\.[0-9]$")]


class _View(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class ParcelView(_View):
    name: ParcelName
    zone: ZoneKey
    slope: bool
    meadow: bool
    road: bool
    species: SpeciesKey | None
    planted_ms: float | None  # the seeding draws it as an IEEE double (games/claim/RULES.md)
    building: BuildingKey | None
    crop_ripe_ms: int | None
    adjusted_hours: Hours | None = None  # these four when a stand grows there
    board_feet: int | None = None
    grade: GradeName | None = None
    value_cents: int | None = None


class LotView(_View):
    parcel: int
    species: SpeciesKey
    logs: int
    board_feet: int
    value_cents: int


class ClaimResources(_View):
    cash_cents: int
    deck_logs: int
    deck_board_feet: int
    board_feet_hauled: int
    logs_hauled: int
    forest_cover_parcels: int
    forest_cover_of: int
    forest_cover_permille: int


class ClaimView(_View):
    """What anyone sees of a claim (game.ClaimDecider.view): nothing on it is secret."""

    owner: Owner
    block: Block
    created_at_ms: int
    clock_ms: int
    cash_cents: int
    deck: list[LotView]
    wagon_back_ms: int | None
    proved_up_ms: int | None
    score: int
    resources: ClaimResources
    parcels: list[ParcelView]


class ClaimParcel(_View):
    name: ParcelName
    zone: ZoneKey
    species: SpeciesKey | None
    building: BuildingKey | None


class ClaimRow(_View):
    """A row of the claims read model (claim_entry)."""

    room: RoomId
    owner: Owner
    block: Block
    created_at_ms: int
    proved_up_ms: int | None
    score: int
    parcel_count: int
    timbered_parcels: int
    buildings: list[BuildingKey]
    parcels: list[ClaimParcel]


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays the seed as written (docs/architecture.md, "Rule-set versions").
    default=True,
    policy=policy,
    seat_bot=seats.seat_bot,  # the room decides with it: a rule, in seats.py, which the fingerprint covers
    bench=BenchScenario(
        description="claims from staking to proving up, the simple policy acting every 20 minutes",
        start_ms=T0,
        step_ms=20 * 60_000,
        seconds=3,
        comparisons=(
            Comparison(label="claims seeded (64 parcels, 183 LCG draws)", unit="claims/s", work=seed_claims,
                       baseline_label="183 bare LCG draws per claim", baseline=bare_lcg, batch=200),
        ),
    ),
    read_models=(
        ReadModel(
            name="claims",
            description="the claim registry: which claim and parcels each player owns",
            room_row=claim_entry,
            order_by=("owner", "block", "room"),
            filters=("owner",),
            columns=("owner", "block", "room", "parcel_count", "timbered_parcels", "buildings", "score"),
            row_type=ClaimRow,
        ),
    ),
    console_picture="almanac.games.claim:picture.js",
    rulebook="games/claim/RULES.md",
    examples=("examples/claim.jsonl",),
    # The words the rules accept (rules.py refuses others with these as ``allowed``): enums in the API.
    allowed_values={"replant.species": tuple(data.SPECIES), "build.building": tuple(data.BUILDINGS)},
    view_type=ClaimView,
    resources_type=ClaimResources,
    demo_moves=24,
)
