"""board@2's manifest: board@1's around board@2's Decider, with the turn limit as a deadline for the clock.

board@2 adds an option the seed does not have, so it is opt-in by its full name, never the default
(docs/rules/board.md, "Version 2"). Its fingerprint covers the whole board package: version 2 decides
with version 1's code wherever it does not override it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from almanac.events.manifest import Deadline
from almanac.games.board.v1.manifest import MANIFEST as MANIFEST_V1, BoardResources, BoardView
from almanac.games.board.v2.game import DECIDER
from almanac.games.board.v2.rules import turn_due_ms, turn_number


class BoardViewV2(BoardView, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """board@1's view, the turn limit (None: none) and when the current turn's time is up (server time)."""

    turn_limit_s: int | None
    turn_due_ms: int | None


class BoardResourcesV2(BoardResources, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """board@1's resources and the turns that timed out."""

    timed_out: int


def deadlines(state: Any, seated: tuple[str, ...]) -> tuple[Deadline, ...]:
    """The current turn's limit: once passed, the clock sends ``time_out`` for that turn as the map's owner."""
    due = turn_due_ms(state)
    if due is None or state.player not in seated:  # the rules refuse a command from a seat not joined
        return ()
    turn = turn_number(state)
    return (Deadline(key=f"turn:{turn}", due_ms=due, player=state.player,
                     command={"kind": "time_out", "turn": turn}, concerns=(state.player,)),)


MANIFEST = dataclasses.replace(MANIFEST_V1, decider=DECIDER, version=2, default=False,
                               source="almanac.games.board", view_type=BoardViewV2, deadlines=deadlines,
                               resources_type=BoardResourcesV2)
