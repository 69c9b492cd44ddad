"""What the colony's owner can order: explore, move people, build, demolish, end the season."""

from __future__ import annotations

import msgspec


class Explore(msgspec.Struct, frozen=True, kw_only=True, tag="explore", tag_field="kind"):
    """Explore the sector at (row, column), next to an explored one; its type is drawn now."""

    row: int
    column: int


class MovePeople(msgspec.Struct, frozen=True, kw_only=True, tag="move_people", tag_field="kind"):
    """Move ``count`` people from one explored sector to another."""

    from_row: int
    from_column: int
    to_row: int
    to_column: int
    count: int


class Build(msgspec.Struct, frozen=True, kw_only=True, tag="build", tag_field="kind"):
    """Build ``building`` in an explored sector, paying its cost from the global stock."""

    row: int
    column: int
    building: str


class Demolish(msgspec.Struct, frozen=True, kw_only=True, tag="demolish", tag_field="kind"):
    """Pull down the building at ``position`` (0 = oldest) of a sector; nothing is refunded.

    ``building``, when given, must name the building at that position: a guard against acting on
    a stale view after another demolition shifted the positions.
    """

    row: int
    column: int
    position: int
    building: str | None = None


class EndSeason(msgspec.Struct, frozen=True, kw_only=True, tag="end_season", tag_field="kind"):
    """Run the season's three phases over every explored sector, then move on to the next season."""


COMMAND_TYPES: tuple[type, ...] = (Explore, MovePeople, Build, Demolish, EndSeason)
