"""The board commands: place the current element, or skip it when it fits nowhere."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.games.board.v1.data import SIZE

Cell = Annotated[int, msgspec.Meta(ge=0, le=SIZE - 1, description="0 .. 10")]
Rotation = Annotated[int, msgspec.Meta(ge=0, le=270, description="0, 90, 180 or 270")]
ElementNumber = Annotated[int, msgspec.Meta(ge=0, le=999, description="an element's number")]


class PlaceElement(msgspec.Struct, frozen=True, kw_only=True, tag="place_element", tag_field="kind",
                   forbid_unknown_fields=True):
    """Place the current element with the top-left cell of its filled bounding box at (row, column).

    Rows and columns are zero-based (0 .. 10). The shape is mirrored left-right first when
    ``mirror`` is set, then rotated clockwise by ``rotation`` degrees (0, 90, 180 or 270).
    ``element`` optionally names the element the player means; a mismatch is refused.
    """

    row: Cell
    column: Cell
    rotation: Rotation = 0
    mirror: bool = False
    element: ElementNumber | None = None


class SkipElement(msgspec.Struct, frozen=True, kw_only=True, tag="skip_element", tag_field="kind",
                   forbid_unknown_fields=True):
    """Skip the current element; allowed only when it fits nowhere on the map. Its time still counts."""

    element: ElementNumber | None = None
