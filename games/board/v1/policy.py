"""A simple placement policy for benchmarks, demos and property tests: a dice-chosen legal placement."""

from __future__ import annotations

from almanac.events.manifest import Dice
from almanac.games.board.v1.commands import PlaceElement, SkipElement
from almanac.games.board.v1.rules import current_element, in_map_placements, is_free, legal_placements
from almanac.games.board.v1.state import BoardState

TRIES = 32
"""Placements drawn at random before falling back to listing every legal one."""


def choose_command(state: BoardState, player: str, dice: Dice) -> PlaceElement | SkipElement | None:
    """The command ``player`` plays next, or None when the game is over or the map is not theirs.

    A placement is drawn uniformly among those that stay on the map and kept if its cells are
    empty (so it is uniform among the legal ones); after TRIES misses every legal placement is
    listed and one is drawn; an element that fits nowhere is skipped.
    """
    if state.over or player != state.player or not state.deck:
        return None
    element = current_element(state)
    candidates = in_map_placements(element)
    for _ in range(TRIES):
        command, cells = candidates[dice.randbelow(len(candidates))]
        if is_free(state.board, cells):
            return command
    legal = legal_placements(state.board, element)
    if not legal:
        return SkipElement(element=element.number)
    return legal[dice.randbelow(len(legal))]
