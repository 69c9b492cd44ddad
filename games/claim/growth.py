"""Timber and growth: growth-adjusted age, volume, grade and value, in exact arithmetic from timestamps."""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from almanac.games.claim import data


class Stand(NamedTuple):
    """What a parcel's timber is worth at one moment."""

    age_ms: int  # real age in whole milliseconds, rounded down (for the record; nothing reads it)
    adjusted_hours: Fraction
    board_feet: int
    grade: str
    value_cents: int

    @property
    def logs(self) -> int:
        return -(-self.board_feet // data.BOARD_FEET_PER_LOG)


def stand(species: str, planted_ms: int | float, at_ms: int) -> Stand:
    """The stand of ``species`` planted at ``planted_ms``, measured at the event time ``at_ms``; exact.

    ``planted_ms`` is a replant's event time (an int) or the seed's double; either is an exact
    rational n / d, so no rounding enters. With real age = (at_ms * d - n) / d ms (clamped at zero: a
    time before planting is a seedling), the growth-adjusted age in hours is a / q with
    a = real age x d x growth numerator and q = d x growth denominator x 3,600,000; every step below is
    integer arithmetic over that denominator:

    - board feet = floor(curve(a / q) x stand factor); the curve is linear between its points, flat
      after the last;
    - grade = the last grade whose start is at or below a / q;
    - value in cents = floor(board feet x price per MBF / 1000 x grade factor).
    """
    spec = data.SPECIES[species]
    n, d = planted_ms.as_integer_ratio()
    age = max(0, at_ms * d - n)  # real age in ms, times d
    a = age * spec.growth.numerator
    q = d * spec.growth.denominator * data.MS_PER_HOUR
    points = data.VOLUME_CURVE
    if a >= points[-1][0] * q:
        num, den = points[-1][1], 1
    else:
        h0, v0 = points[0]
        for h1, v1 in points[1:]:
            if a < h1 * q:
                # v0 + (v1 - v0) * (a / q - h0) / (h1 - h0), over the denominator (h1 - h0) * q
                num, den = v0 * (h1 - h0) * q + (v1 - v0) * (a - h0 * q), (h1 - h0) * q
                break
            h0, v0 = h1, v1
    board_feet = (num * spec.stand.numerator) // (den * spec.stand.denominator)
    grade, factor = data.GRADES[0][1], data.GRADES[0][2]
    for start, grade_name, grade_factor in data.GRADES:
        if a >= start * q:
            grade, factor = grade_name, grade_factor
    value = (board_feet * spec.price_cents_per_mbf * factor.numerator) // (1000 * factor.denominator)
    return Stand(age // d, Fraction(a, q), board_feet, grade, value)
