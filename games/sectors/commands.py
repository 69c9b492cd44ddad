"""What the colony's owner can order: explore, move people, build, demolish, end the season."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import AMOUNT_CEILING, Key
from almanac.games.sectors.data import MAXIMUM_GRID_SIDE

# Rows and columns of the largest grid; the rules check the colony's own size.
Row = Annotated[int, msgspec.Meta(ge=0, le=MAXIMUM_GRID_SIDE - 1, description="0 .. 63")]
Column = Row
People = Annotated[int, msgspec.Meta(ge=1, le=AMOUNT_CEILING, description="1 .. 10^15")]
Position = Annotated[int, msgspec.Meta(ge=0, le=999, description="0 = the oldest building")]


class Explore(msgspec.Struct, frozen=True, kw_only=True, tag="explore", tag_field="kind",
             forbid_unknown_fields=True):
    """Explore the sector at (row, column), next to an explored one; its type is drawn now."""

    row: Row
    column: Column


class MovePeople(msgspec.Struct, frozen=True, kw_only=True, tag="move_people", tag_field="kind",
             forbid_unknown_fields=True):
    """Move ``count`` people from one explored sector to another."""

    from_row: Row
    from_column: Column
    to_row: Row
    to_column: Column
    count: People


class Build(msgspec.Struct, frozen=True, kw_only=True, tag="build", tag_field="kind",
             forbid_unknown_fields=True):
    """Build ``building`` in an explored sector, paying its cost from the global stock."""

    row: Row
    column: Column
    building: Key


class Demolish(msgspec.Struct, frozen=True, kw_only=True, tag="demolish", tag_field="kind",
             forbid_unknown_fields=True):
    """Pull down the building at ``position`` (0 = oldest) of a sector; nothing is refunded.

    ``building``, when given, must name the building at that position: a guard against acting on
    a stale view after another demolition shifted the positions.
    """

    row: Row
    column: Column
    position: Position
    building: Key | None = None


class EndSeason(msgspec.Struct, frozen=True, kw_only=True, tag="end_season", tag_field="kind",
             forbid_unknown_fields=True):
    """Run the season's three phases over every explored sector, then move on to the next season."""


COMMAND_TYPES: tuple[type, ...] = (Explore, MovePeople, Build, Demolish, EndSeason)
