"""Timber and growth: the documented tables, exact arithmetic, and growth that only ever adds wood."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from game_modules import game_module
from hypothesis import given, settings, strategies as st

data = game_module("claim@1", "data")
stand = game_module("claim@1", "growth").stand

HOUR = data.MS_PER_HOUR


def reference(species: str, planted_ms: int | float, at_ms: int) -> tuple[Fraction, int, str, int]:
    """The rules page's definition, step by step in Fractions: (adjusted hours, board feet, grade, value)."""
    spec = data.SPECIES[species]
    hours = max(Fraction(0), at_ms - Fraction(planted_ms)) / data.MS_PER_HOUR * spec.growth
    points = data.VOLUME_CURVE
    curve = Fraction(points[-1][1])
    for (h0, v0), (h1, v1) in zip(points, points[1:], strict=False):
        if hours < h1:
            curve = v0 + (v1 - v0) * (hours - h0) / (h1 - h0)
            break
    board_feet = math.floor(curve * spec.stand)
    grade, factor = next((name, f) for start, name, f in reversed(data.GRADES) if hours >= start)
    value = math.floor(Fraction(board_feet * spec.price_cents_per_mbf, 1000) * factor)
    return hours, board_feet, grade, value


def test_there_are_nine_species_with_names_growth_stand_and_price() -> None:
    assert list(data.SPECIES) == ["rc", "cw", "wh", "gf", "wp", "df", "l", "lp", "pp"]
    assert all(
        isinstance(s.growth, Fraction) and isinstance(s.stand, Fraction) for s in data.SPECIES.values()
    )
    mixed = {k for z in data.ZONES.values() for k, _ in z.mix} | {
        k for z in data.ZONES.values() for k in z.replant
    }
    assert mixed == set(data.SPECIES)


def test_growth_adjusted_age_is_real_age_times_the_growth_factor() -> None:
    assert stand("cw", 0, 10 * HOUR).adjusted_hours == 15
    assert stand("rc", 0, 10 * HOUR).adjusted_hours == Fraction(15, 2)
    seedling = stand("df", 5 * HOUR, 0)  # a time before planting is a seedling
    assert (seedling.adjusted_hours, seedling.age_ms, seedling.board_feet) == (0, 0, 0)


@pytest.mark.parametrize(
    ("species", "hours", "board_feet", "grade", "value_cents"),
    [
        ("df", 20, 6_000, "sawlogs", 6_000),  # the documented examples
        ("df", 40, 15_000, "clears", 18_750),
        ("wp", 52, 16_700, "clears", 31_312),
        ("cw", 12, 5_100, "sawlogs", 2_040),
        ("df", 4, 0, "poles", 0),  # nothing merchantable before 4 adjusted hours
        ("df", 6, 500, "poles", 250),
        ("df", 15, 3_750, "sawlogs", 3_750),  # 1500 + 4500 x 5/10
        ("df", 12, 2_400, "sawlogs", 2_400),  # sawlogs from 12 adjusted hours
        ("rc", 200, 24_000, "clears", 36_000),  # flat after 72 adjusted hours: 20000 x 6/5
    ],
)
def test_volume_grade_and_value_follow_the_documented_table(
    species, hours, board_feet, grade, value_cents
) -> None:
    s = stand(species, 0, hours * HOUR)
    assert (s.board_feet, s.grade, s.value_cents) == (board_feet, grade, value_cents)
    assert s.logs == -(-board_feet // 200)


def test_the_volume_curve_interpolates_exactly() -> None:
    # df at 10 1/3 hours: 1500 + 4500 x (1/3) / 10 = 1650 exactly (a float would give 1649.99...).
    assert stand("df", 0, 10 * HOUR + HOUR // 3).board_feet == 1_650
    assert stand("df", 0, 1000 * HOUR).board_feet == 20_000


def test_a_planting_time_with_a_fraction_of_a_millisecond_is_read_exactly() -> None:
    # Given Douglas-fir planted at 0.25 ms (a seeded planting time is the seed's double),
    # when it is measured 4 h 14,400 ms later in event time (250 board feet an hour after 4 h: 1 board
    # foot per 14,400 ms),
    # then the real age is 14,399.75 ms past 4 h: not yet one board foot, and the age is whole ms down.
    s = stand("df", 0.25, 4 * HOUR + 14_400)
    assert (s.board_feet, s.value_cents, s.age_ms) == (0, 0, 4 * HOUR + 14_399)
    assert isinstance(s.board_feet, int) and isinstance(s.value_cents, int) and isinstance(s.age_ms, int)
    assert s.adjusted_hours == Fraction(4 * HOUR + 14_400, HOUR) - Fraction(1, 4 * HOUR)
    assert stand("df", 0.25, 4 * HOUR + 14_401).board_feet == 1


@settings(max_examples=300, deadline=None)
@given(
    species=st.sampled_from(list(data.SPECIES)),
    planted=st.one_of(
        st.integers(-HOUR, HOUR), st.floats(-HOUR, HOUR, allow_nan=False, allow_infinity=False)
    ),
    at=st.integers(-HOUR, 120 * HOUR),
    later=st.integers(0, 20 * HOUR),
)
def test_the_stand_equals_the_fraction_definition_and_never_shrinks(species, planted, at, later) -> None:
    now = stand(species, planted, at)
    assert (now.adjusted_hours, now.board_feet, now.grade, now.value_cents) == reference(species, planted, at)
    assert now.age_ms == math.floor(max(Fraction(0), at - Fraction(planted)))
    after = stand(species, planted, at + later)
    assert after.board_feet >= now.board_feet and after.value_cents >= now.value_cents
