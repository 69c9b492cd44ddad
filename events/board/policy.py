"""A simple placement policy for benchmarks, demos and property tests: a dice-chosen legal placement."""

from __future__ import annotations

from typing import Any

from events.board.commands import PlaceElement, SkipElement
from events.board.rules import current_element, legal_placements
from events.board.state import BoardState
from events.dice import Dice


def choose_command(state: BoardState, player: str, dice: Dice) -> PlaceElement | SkipElement | None:
    """The command ``player`` plays next: one legal placement of the current element picked with the
    dice, a skip when it fits nowhere, or None when the game is over or the map is not theirs."""
    if state.over or player != state.player or not state.deck:
        return None
    options: list[Any] = legal_placements(state.board, current_element(state))
    if not options:
        return SkipElement(element=state.deck[0])
    return options[dice.randbelow(len(options))]
