"""The claim's options, setup and state: the owner's cash, the 64 parcels, the landing deck and the wagon."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Name, free
from almanac.games.claim.data import Block, BuildingKey, Owner, SpeciesKey, ZoneKey


class ClaimOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Creation options. ``owner`` defaults to the creator; ``block`` to the room id.

    Unknown fields are refused, so nobody believes they chose the staking time (the server does).
    """

    owner: Annotated[Name, free("the player who stakes the claim")] | None = None  # a joinable name; "" is refused (nobody could take the seat)
    # A block is a surveyor's label ("valley-1/SE"): any printable text; the rules refuse a blank one.
    block: Annotated[str, msgspec.Meta(max_length=80, pattern=r"^[^\x00-\x1f\x7f]*(?!\n)$"),
                     free("the block's label, as the surveyor gives it")] = ""


class Terrain(msgspec.Struct, frozen=True, kw_only=True):
    """The fixed facts of one parcel: pure functions of its position (see seeding.TERRAIN)."""

    index: int
    name: Annotated[str, free("the parcel's name: its column letter and row number (A1)")]
    zone: ZoneKey
    slope: bool
    meadow: bool
    road: bool


class ParcelRecord(Terrain, frozen=True, kw_only=True):
    """One parcel as seeded: its terrain, and for timbered parcels the seed's draws and result.

    ``age_hours`` and ``planted_ms`` are the seed's doubles, exactly as its loop computes them:
    planted = createdAt - age * 3600000, not rounded; growth reads ``planted_ms`` as the exact rational
    a double is.
    """

    old: bool = False
    age_hours: float | None = None
    species: str | None = None
    planted_ms: float | None = None


class ClaimSetup(msgspec.Struct, frozen=True, kw_only=True):
    """The staked claim, recorded in room.created: who owns which block, and every parcel."""

    owner: Owner
    block: Block
    created_at_ms: int  # the server's time on the command that staked the claim
    lcg_seed: int  # created_at_ms // 1000 mod 2^32
    parcels: tuple[ParcelRecord, ...]


class Parcel(msgspec.Struct, frozen=True, kw_only=True):
    """What can change on a parcel; its terrain lives in seeding.TERRAIN by index."""

    species: SpeciesKey | None = None  # None: no timber (meadow, cut, or built on)
    planted_ms: int | float | None = None  # a replant's event time, or the seed's double
    building: BuildingKey | None = None
    crop_ripe_ms: int | None = None  # hay growing on a meadow parcel, ripe at this time


class DeckLot(msgspec.Struct, frozen=True, kw_only=True):
    """The logs of one cut, waiting at the landing."""

    parcel: int
    species: SpeciesKey
    logs: int
    board_feet: int
    value_cents: int


class ClaimState(msgspec.Struct, frozen=True, kw_only=True):
    owner: Owner
    block: Block
    created_at_ms: int
    clock_ms: int  # the latest event time seen: the only "now" a state knows
    cash_cents: int
    parcels: tuple[Parcel, ...]
    deck: tuple[DeckLot, ...] = ()
    wagon_back_ms: int = 0  # the wagon is at the landing from this time on
    trips: int = 0
    logs_hauled: int = 0
    board_feet_hauled: int = 0
    timber_sales_cents: int = 0
    hay_sales_cents: int = 0
    parcels_cut: int = 0
    parcels_replanted: int = 0
    proved_up_ms: int | None = None
    final_score: int | None = None
