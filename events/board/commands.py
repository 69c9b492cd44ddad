"""The board commands: place the current element, or skip it when it fits nowhere."""

from __future__ import annotations

import msgspec


class PlaceElement(msgspec.Struct, frozen=True, kw_only=True, tag="place_element", tag_field="kind"):
    """Place the current element with the top-left cell of its filled bounding box at (row, column).

    Rows and columns are zero-based (0 .. 10). The shape is mirrored left-right first when
    ``mirror`` is set, then rotated clockwise by ``rotation`` degrees (0, 90, 180 or 270).
    ``element`` optionally names the element the player means; a mismatch is refused.
    """

    row: int
    column: int
    rotation: int = 0
    mirror: bool = False
    element: int | None = None


class SkipElement(msgspec.Struct, frozen=True, kw_only=True, tag="skip_element", tag_field="kind"):
    """Skip the current element; allowed only when it fits nowhere on the map. Its time still counts."""

    element: int | None = None
