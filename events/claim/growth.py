"""Timber and growth: growth-adjusted age, volume, grade and value, in exact arithmetic from timestamps."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

from events.claim import data


class Stand(NamedTuple):
    """What a parcel's timber is worth at one moment."""

    age_ms: int
    adjusted_hours: Fraction
    board_feet: int
    grade: str
    value_cents: int

    @property
    def logs(self) -> int:
        return -(-self.board_feet // data.BOARD_FEET_PER_LOG)


def adjusted_hours(species: str, planted_ms: int, at_ms: int) -> Fraction:
    """Real age (clamped at zero: a timestamp before planting means a seedling) x the growth factor."""
    return Fraction(max(0, at_ms - planted_ms), data.MS_PER_HOUR) * data.SPECIES[species].growth


def curve_board_feet(hours: Fraction) -> Fraction:
    """The volume curve at ``hours`` for a stand factor of 1: linear between points, flat after."""
    points = data.VOLUME_CURVE
    if hours >= points[-1][0]:
        return Fraction(points[-1][1])
    for (h0, v0), (h1, v1) in zip(points, points[1:], strict=False):
        if hours < h1:
            return v0 + (v1 - v0) * (hours - h0) / (h1 - h0)
    raise AssertionError("unreachable: hours below the last point fall in a segment")


def grade_of(hours: Fraction) -> tuple[str, Fraction]:
    name, factor = data.GRADES[0][1], data.GRADES[0][2]
    for start, grade_name, grade_factor in data.GRADES:
        if hours >= start:
            name, factor = grade_name, grade_factor
    return name, factor


def stand(species: str, planted_ms: int, at_ms: int) -> Stand:
    """The parcel's stand at ``at_ms``: board feet rounded down, value in cents rounded down."""
    spec = data.SPECIES[species]
    hours = adjusted_hours(species, planted_ms, at_ms)
    board_feet = math.floor(curve_board_feet(hours) * spec.stand)
    grade, factor = grade_of(hours)
    value = math.floor(Fraction(board_feet * spec.price_cents_per_mbf, 1000) * factor)
    return Stand(max(0, at_ms - planted_ms), hours, board_feet, grade, value)
