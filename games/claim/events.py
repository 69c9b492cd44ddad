"""The claim's events: the stored format (tags never change; new fields only with defaults)."""

from __future__ import annotations

import msgspec

from almanac.games.claim.data import GradeName


class ParcelCut(msgspec.Struct, frozen=True, kw_only=True, tag="claim.parcel_cut"):
    at_ms: int
    parcel: int
    species: str
    age_ms: int  # real age at the cut, whole milliseconds rounded down
    grade: GradeName
    board_feet: int
    logs: int
    value_cents: int  # mill value at sawlog prices x grade, before any mill bonus
    cost_cents: int


class DeckHauled(msgspec.Struct, frozen=True, kw_only=True, tag="claim.deck_hauled"):
    at_ms: int
    logs: int
    board_feet: int
    gross_cents: int  # what the mill paid, mill bonus included
    fee_cents: int
    back_ms: int  # when the wagon is back at the landing


class ParcelReplanted(msgspec.Struct, frozen=True, kw_only=True, tag="claim.parcel_replanted"):
    at_ms: int
    parcel: int
    species: str
    cost_cents: int


class MeadowFarmed(msgspec.Struct, frozen=True, kw_only=True, tag="claim.meadow_farmed"):
    at_ms: int
    parcel: int
    cost_cents: int
    ripe_ms: int


class CropHarvested(msgspec.Struct, frozen=True, kw_only=True, tag="claim.crop_harvested"):
    at_ms: int
    parcel: int
    sale_cents: int


class BuildingBuilt(msgspec.Struct, frozen=True, kw_only=True, tag="claim.building_built"):
    at_ms: int
    parcel: int
    building: str
    cost_cents: int


class TimberCruised(msgspec.Struct, frozen=True, kw_only=True, tag="claim.timber_cruised"):
    at_ms: int
    board_feet: int
    value_cents: int
    cover_parcels: int


class ClaimProvedUp(msgspec.Struct, frozen=True, kw_only=True, tag="claim.proved_up"):
    at_ms: int
    score: int
    cover_parcels: int


EVENTS: tuple[type, ...] = (
    ParcelCut,
    DeckHauled,
    ParcelReplanted,
    MeadowFarmed,
    CropHarvested,
    BuildingBuilt,
    TimberCruised,
    ClaimProvedUp,
)
