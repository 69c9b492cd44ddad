"""The sectors game's rules for its seats beyond the Decider: that a bot may play a seat handed to it.

The room decides with this (events/room.py refuses a create asking for seat bots when the rules have
none), so it is rules and the fingerprint covers it. How the bot plays is ``bot.py``: a player, outside
the fingerprint like ``policy.py``. Sectors names no deadlines.
"""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.sectors import bot


def seat_bot(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    """A bot may play a seat handed to it: the sectors game's seat bot (bot.py), from the seat's view alone."""
    return bot.play(view, player, dice, now_ms)
