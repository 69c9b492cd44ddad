"""The claim's state: the owner's cash, the 64 parcels, the landing deck and the wagon."""

from __future__ import annotations

import msgspec


class Parcel(msgspec.Struct, frozen=True, kw_only=True):
    """What can change on a parcel; its terrain lives in seeding.TERRAIN by index."""

    species: str | None = None  # None: no timber (meadow, cut, or built on)
    planted_ms: int | float | None = None  # a replant's event time, or the seed's double
    building: str | None = None
    crop_ripe_ms: int | None = None  # hay growing on a meadow parcel, ripe at this time


class DeckLot(msgspec.Struct, frozen=True, kw_only=True):
    """The logs of one cut, waiting at the landing."""

    parcel: int
    species: str
    logs: int
    board_feet: int
    value_cents: int


class ClaimState(msgspec.Struct, frozen=True, kw_only=True):
    owner: str
    block: str
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
