"""The claim's map and its seeding, exactly as seed 001 defines them (the one IEEE-double part)."""

from __future__ import annotations

import msgspec

from almanac.games.claim import data
from almanac.games.claim.state import ParcelRecord, Terrain

replace = msgspec.structs.replace


def parcel_name(index: int) -> str:
    """A1..H8: column letter west to east, row number north to south."""
    r, c = divmod(index, data.N)
    return f"{'ABCDEFGH'[c]}{r + 1}"


def is_slope(r: int, c: int) -> bool:
    return (r + c >= 9 and r <= 4) or (r <= 1 and c >= 4)


def is_meadow(r: int, c: int) -> bool:
    return r == 7 and c <= 2


def zone_of(r: int, c: int) -> str:
    # The seed's zoneOf: the meadow parcels fall in "bottom" here; their meadow flag sets them apart.
    if is_slope(r, c):
        return "ridge"
    if r >= 6:
        return "bottom"
    return "bench"


def _terrain(index: int) -> Terrain:
    r, c = divmod(index, data.N)
    return Terrain(
        index=index,
        name=parcel_name(index),
        zone=zone_of(r, c),
        slope=is_slope(r, c),
        meadow=is_meadow(r, c),
        road=index == data.LANDING_INDEX,
    )


TERRAIN: tuple[Terrain, ...] = tuple(_terrain(i) for i in range(data.PARCELS))
INDEX_BY_NAME: dict[str, int] = {t.name: t.index for t in TERRAIN}
# The 61 parcels that count for forest cover: everything but the meadow.
COUNTING: tuple[int, ...] = tuple(t.index for t in TERRAIN if not t.meadow)
# The meadow parcels that may be farmed: all but the landing (A8 and C8).
FARMABLE: tuple[str, ...] = tuple(t.name for t in TERRAIN if t.meadow and not t.road)


class Lcg:
    """The seed's generator: s = s * 1664525 + 1013904223 mod 2^32; rand() steps, then returns s / 2^32."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed % data.LCG_MODULUS

    def rand(self) -> float:
        self.state = (self.state * data.LCG_MULTIPLIER + data.LCG_INCREMENT) % data.LCG_MODULUS
        # Exact in doubles: the state is below 2^32 and the divisor a power of two.
        return self.state / data.LCG_MODULUS


def lcg_seed(created_at_ms: int) -> int:
    """The generator's start: the creation time in whole seconds (mod 2^32, the LCG's word)."""
    return (created_at_ms // 1000) % data.LCG_MODULUS


def pick_species(zone: str, x: float) -> str:
    """Walk the zone's mix in the table's order, adding weights; the first running total above x wins."""
    total = 0.0
    mix = data.ZONES[zone].mix
    for key, weight in mix:
        total += weight
        if total > x:
            return key
    # Unreachable with the seed's mixes (each sums to exactly 1.0 in doubles and x < 1); kept total.
    return mix[-1][0]


# Each parcel's record before any draw: its terrain only (the meadow's records stay so).
_UNDRAWN: tuple[ParcelRecord, ...] = tuple(ParcelRecord(**msgspec.structs.asdict(t)) for t in TERRAIN)


def seed_parcels(created_at_ms: int) -> tuple[ParcelRecord, ...]:
    """The 64 parcel records of a claim staked at ``created_at_ms``, following the seed's loop.

    Meadow parcels draw nothing; every other parcel draws three numbers: the old/young test, the age,
    then the species. planted = createdAt - age * 3600000, in doubles and nothing more.
    """
    rng = Lcg(lcg_seed(created_at_ms))
    created = float(created_at_ms)  # exact: a millisecond time is far below 2^53
    records: list[ParcelRecord] = []
    for t, undrawn in zip(TERRAIN, _UNDRAWN, strict=True):
        if t.meadow:
            records.append(undrawn)
            continue
        old = rng.rand() < data.OLD_CHANCE
        if old:
            age = data.OLD_AGE_MIN_HOURS + rng.rand() * data.OLD_AGE_SPAN_HOURS
        else:
            age = data.YOUNG_AGE_MIN_HOURS + rng.rand() * data.YOUNG_AGE_SPAN_HOURS
        species = pick_species(t.zone, rng.rand())
        planted = created - age * float(data.MS_PER_HOUR)
        records.append(replace(undrawn, old=old, age_hours=age, species=species, planted_ms=planted))
    return tuple(records)
