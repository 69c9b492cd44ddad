"""The board's rules for its seats beyond the Decider: that a bot may play a seat handed to it.

The room decides with this (events/room.py refuses a create asking for seat bots when the rules have
none), so it is rules and the fingerprint covers it. How the bot plays is ``bot.py``: a player, outside
the fingerprint like ``policy.py``. board@1 names no deadlines: its game has no clock (board@2's turn
limit is in ``v2/seats.py``).
"""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.board.v1 import bot


def seat_bot(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    """A bot may play a seat handed to it: the board's seat bot (bot.py), from the seat's view alone."""
    return bot.play(view, player, dice, now_ms)
