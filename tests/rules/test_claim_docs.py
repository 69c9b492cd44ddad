"""The rules page says what the code does: its tables and numbers are read back against claim@1's data module."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

from game_modules import game_module
from test_claim_support import ClaimGame

from almanac.events import codec

data = game_module("claim@1", "data")
dollars = game_module("claim@1", "rules").dollars

DOC = (Path(__file__).resolve().parents[2] / "games" / "claim" / "RULES.md").read_text()


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def test_the_species_table_is_the_data() -> None:
    for s in data.SPECIES.values():
        price = dollars(s.price_cents_per_mbf).removesuffix(".00")
        assert _row(s.key, s.name, _fraction_text(s.growth), _fraction_text(s.stand), price) in DOC, s.key


def test_the_zone_table_is_the_seeds_mix_and_replant_lists() -> None:
    for z in data.ZONES.values():
        mix = ", ".join(f"{key} {share:g}" for key, share in z.mix)
        assert _row(z.name, mix, ", ".join(z.replant)) in DOC, z.key


def test_the_volume_curve_and_grades_are_the_data() -> None:
    points = " ".join(f"({h} h, {bf:,})" for h, bf in data.VOLUME_CURVE)
    assert points in " ".join(DOC.split())
    (_, poles, f0), (sawlogs_from, sawlogs, f1), (clears_from, clears, f2) = data.GRADES
    line = (
        f"under {sawlogs_from} h **{poles}** x{_fraction_text(f0)}, {sawlogs_from}-{clears_from} h "
        f"**{sawlogs}** x{_fraction_text(f1)}, from {clears_from} h **{clears}** x{_fraction_text(f2)}"
    )
    assert line in DOC
    assert f"logs = ceil(board feet / {data.BOARD_FEET_PER_LOG})" in DOC


def test_the_play_numbers_are_the_data() -> None:
    hour = data.MS_PER_HOUR
    said = [
        f"starts with **{dollars(data.START_CASH_CENTS).removesuffix('.00')}**",
        f"| {dollars(data.CUT_COST_CENTS).removesuffix('.00')}, "
        f"{dollars(data.CUT_COST_CENTS * data.STEEP_CUT_FACTOR).removesuffix('.00')} on the ridge |",
        f"back {data.WAGON_TRIP_MS // hour} h later",
        f"{dollars(data.HAUL_FEE_CENTS).removesuffix('.00')} teamster per trip",
        f"| {dollars(data.REPLANT_COST_CENTS).removesuffix('.00')} |",
        f"ripe {data.CROP_RIPE_MS // hour} h later | {dollars(data.FARM_COST_CENTS).removesuffix('.00')} |",
        f"sells ripe hay: {dollars(data.HAY_SALE_CENTS).removesuffix('.00')}, or "
        f"{dollars(data.HAY_SALE_CENTS * data.BARN_HAY_FACTOR.numerator // data.BARN_HAY_FACTOR.denominator)}"
        " with a barn",
        f"sell for {_fraction_text(data.MILL_PRICE_FACTOR)} of their value",
        f"deck holds {data.DECK_CAPACITY_LOGS} logs",
        f"less than {data.PROVE_UP_MIN_MS // hour} h since the claim was staked",
        f"fewer than {data.PROVE_UP_MIN_COVER} of the 61 counting parcels",
    ]
    for b in data.BUILDINGS.values():
        sites = re.escape(dollars(b.cost_cents).removesuffix(".00"))
        assert re.search(rf"{b.key} {sites} \(([a-z, ]+)\)", DOC), b.key
        where = re.search(rf"{b.key} {sites} \(([a-z, ]+)\)", DOC).group(1).replace(" or ", ", ").split(", ")
        assert where == list(b.sites), b.key
    missing = [text for text in said if text not in DOC]
    assert missing == []


def test_the_parcel_spellings_the_refusal_table_forgives_are_one_parcel_recorded_in_one_spelling() -> None:
    row = next(line for line in DOC.splitlines() if "`claim.unknown_parcel`" in line)
    forgiven = re.search(r"case and spaces are forgiven: (.*) are one parcel, recorded as `([^`]+)`", row)
    assert forgiven, row
    spellings, recorded = re.findall(r"`([^`]+)`", forgiven.group(1)), forgiven.group(2)
    assert len(spellings) >= 3 and any(" " in typed for typed in spellings)
    for typed in spellings:
        body = {"kind": "cut", "parcel": typed}
        assert codec.recorded_body(body, codec.decode_command("claim", body)) == {"kind": "cut", "parcel": recorded}
        game = ClaimGame()
        game.do(body)
        assert game.parcel(recorded).species is None, typed
