"""The realm's rules for its seats beyond the Decider: the season's timeout, and that a bot may play a city.

The room decides with these (events/room.py), so they are rules and the fingerprint covers them: a seat
misses the season's deadline (``room.deadline_missed``) and is handed to a bot (``room.seat_to_bot``) by
what ``deadlines`` names, and a create asking for seat bots is refused when the rules have none. How the
bot plays is ``bot.py``: a player, outside the fingerprint like ``policy.py``.
"""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Deadline, Dice
from almanac.games.realm.v1 import bot
from almanac.games.realm.v1.state import RealmState


def deadlines(state: RealmState, seated: tuple[str, ...]) -> tuple[Deadline, ...]:
    """The season's timeout: once it has passed, the clock forces the season to end (``end_season``) as the
    first seated player of the realm, as any player could. A timeout of 0 ("any time") sets no deadline:
    the clock would end every season the moment it began."""
    if state.over or state.season_timeout_ms <= 0:
        return ()
    player = next((seat for seat in seated if seat in state.players), None)
    if player is None:
        return ()
    return (
        Deadline(
            key=f"season:{state.season_index}",
            due_ms=state.season_started_ms + state.season_timeout_ms,
            player=player,
            command={"kind": "end_season"},
            # the season waits for the cities that have not ended their turn: they are the ones to warn
            concerns=tuple(seat for seat in state.players if seat not in state.turn_ended),
        ),
    )


def seat_bot(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    """A bot may play a city handed to it: the realm's seat bot (bot.py), from the seat's view alone."""
    return bot.play(view, player, dice, now_ms)
