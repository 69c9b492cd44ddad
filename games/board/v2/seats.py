"""board@2's rules for its seats beyond the Decider: the turn limit as a deadline (board@1's seat bot plays on).

The room decides with this (events/room.py): a seat misses a turn's deadline (``room.deadline_missed``) and
is handed to a bot (``room.seat_to_bot``) by what ``deadlines`` names, so it is rules and the fingerprint
covers it (docs/rules/board.md, "Version 2").
"""

from __future__ import annotations

from almanac.events.manifest import Deadline
from almanac.games.board.v2.rules import BoardStateV2, turn_due_ms, turn_number


def deadlines(state: BoardStateV2, seated: tuple[str, ...]) -> tuple[Deadline, ...]:
    """The current turn's limit: once passed, the clock sends ``time_out`` for that turn as the map's owner."""
    due = turn_due_ms(state)
    if due is None or state.player not in seated:  # the rules refuse a command from a seat not joined
        return ()
    turn = turn_number(state)
    return (Deadline(key=f"turn:{turn}", due_ms=due, player=state.player,
                     command={"kind": "time_out", "turn": turn}, concerns=(state.player,)),)
