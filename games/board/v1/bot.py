"""The board's seat bot: the simple policy played from the seat's view (the current element only, never the deck)."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.board.v1.policy import choose_command
from almanac.games.board.v1.state import BoardState


def state_from_view(view: dict[str, Any]) -> BoardState:
    """A state the policy can read, built from the view alone: the draw pile is the current element only
    (the rest of the deck order is hidden from the owner too, and the policy never looks past the first)."""
    current = view.get("current_element")
    return BoardState(
        player=view["player"],
        mountain_bonus=view["mountain_bonus"],
        extended_pool=False,  # the cards dealt are in the view; the pool they came from is not read
        missions=tuple(card["mission"] for card in view["missions"]),
        board=tuple(tuple(cell or "" for cell in row) for row in view["board"]),  # the API shows "" as null
        deck=(current["number"],) if current else (),
        time=view["time"],
        over=view["over"],
    )


def play(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    return choose_command(state_from_view(view), player, dice)
