"""board@2's manifest: board@1's around board@2's Decider, with the turn limit's deadlines (seats.py) for the clock.

board@2 adds an option the seed does not have, so it is opt-in by its full name, never the default
(games/board/RULES.md, "Version 2"). Its fingerprint covers the whole board package: version 2 decides
with version 1's code wherever it does not override it.
"""

from __future__ import annotations

import dataclasses

from almanac.games.board.v1.manifest import MANIFEST as MANIFEST_V1, BoardResources, BoardView
from almanac.games.board.v2 import seats
from almanac.games.board.v2.game import DECIDER


class BoardViewV2(BoardView, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """board@1's view, the turn limit (None: none) and when the current turn's time is up (server time)."""

    turn_limit_s: int | None
    turn_due_ms: int | None


class BoardResourcesV2(BoardResources, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """board@1's resources and the turns that timed out."""

    timed_out: int


MANIFEST = dataclasses.replace(MANIFEST_V1, decider=DECIDER, version=2, default=False,
                               source="almanac.games.board", view_type=BoardViewV2, deadlines=seats.deadlines,
                               resources_type=BoardResourcesV2)
