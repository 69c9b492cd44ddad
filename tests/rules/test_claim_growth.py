"""Timber and growth: the documented tables, exact arithmetic, and growth that only ever adds wood."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from events.claim import data
from events.claim.growth import adjusted_hours, curve_board_feet, stand, stand_exact

HOUR = data.MS_PER_HOUR


def test_there_are_nine_species_with_names_growth_stand_and_price() -> None:
    assert list(data.SPECIES) == ["rc", "cw", "wh", "gf", "wp", "df", "l", "lp", "pp"]
    assert all(isinstance(s.growth, Fraction) and isinstance(s.stand, Fraction) for s in data.SPECIES.values())
    mixed = {k for z in data.ZONES.values() for k, _ in z.mix} | {k for z in data.ZONES.values() for k in z.replant}
    assert mixed == set(data.SPECIES)


def test_growth_adjusted_age_is_real_age_times_the_growth_factor() -> None:
    assert adjusted_hours("cw", 0, 10 * HOUR) == 15
    assert adjusted_hours("rc", 0, 10 * HOUR) == Fraction(15, 2)
    assert adjusted_hours("df", 5 * HOUR, 0) == 0  # a time before planting is a seedling


@pytest.mark.parametrize(
    ("species", "hours", "board_feet", "grade", "value_cents"),
    [
        ("df", 20, 6_000, "sawlogs", 6_000),  # the documented examples
        ("df", 40, 15_000, "clears", 18_750),
        ("wp", 52, 16_700, "clears", 31_312),
        ("cw", 12, 5_100, "sawlogs", 2_040),
        ("df", 4, 0, "poles", 0),  # nothing merchantable before 4 adjusted hours
        ("df", 6, 500, "poles", 250),
        ("rc", 200, 24_000, "clears", 36_000),  # flat after 72 adjusted hours: 20000 x 6/5
    ],
)
def test_volume_grade_and_value_follow_the_documented_table(species, hours, board_feet, grade, value_cents) -> None:
    s = stand(species, 0, hours * HOUR)
    assert (s.board_feet, s.grade, s.value_cents) == (board_feet, grade, value_cents)
    assert s.logs == -(-board_feet // 200)


def test_the_volume_curve_interpolates_exactly() -> None:
    assert curve_board_feet(Fraction(15)) == 3_750
    assert curve_board_feet(Fraction(1, 3) + 10) == 1_650
    assert curve_board_feet(Fraction(1000)) == 20_000


@settings(max_examples=300, deadline=None)
@given(species=st.sampled_from(list(data.SPECIES)), age_ms=st.integers(0, 120 * HOUR), later=st.integers(0, 20 * HOUR))
def test_the_integer_stand_equals_the_fraction_definition_and_never_shrinks(species, age_ms, later) -> None:
    now = stand(species, 0, age_ms)
    assert now == stand_exact(species, 0, age_ms)
    after = stand(species, 0, age_ms + later)
    assert after.board_feet >= now.board_feet and after.value_cents >= now.value_cents
