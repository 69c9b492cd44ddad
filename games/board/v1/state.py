"""The board's options, setup and state: the map, the draw pile, the time and the season scores."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Name
from almanac.games.board.v1.data import EMPTY, MOUNTAIN, MOUNTAINS, SIZE, Cell, MissionKey, Player
from almanac.games.board.v1.events import SeasonEnded

Board = tuple[tuple[Cell, ...], ...]
"""SIZE rows of SIZE terrain names; ``""`` is an empty cell, ``"mountain"`` a printed mountain."""

STARTING_BOARD: Board = tuple(
    tuple(MOUNTAIN if (row, column) in MOUNTAINS else EMPTY for column in range(SIZE)) for row in range(SIZE)
)
"""The empty 11x11 map with its five mountains."""


class BoardOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Creation options; all off by default. ``player`` owns the map (default: the room's creator)."""

    mountain_bonus: bool = False
    extended_pool: bool = False
    player: Annotated[Name, *Player.__metadata__] | None = None


class BoardSetup(msgspec.Struct, frozen=True, kw_only=True):
    """The resolved setup stored in ``room.created``: the owner, the options, the deck order and cards A-D."""

    player: Player
    mountain_bonus: bool
    extended_pool: bool
    deck: tuple[int, ...]
    missions: tuple[MissionKey, ...]


class BoardState(msgspec.Struct, frozen=True, kw_only=True):
    """One player's map. ``deck`` is the draw pile, the current element first; it is never shown."""

    player: Player
    mountain_bonus: bool
    extended_pool: bool
    missions: tuple[MissionKey, ...]
    board: Board
    deck: tuple[int, ...]
    time: int = 0
    season: int = 0
    seasons: tuple[SeasonEnded, ...] = ()  # the seasons scored so far, as their events
    total: int = 0
    placed: int = 0
    skipped: int = 0
    shuffles: int = 0
    over: bool = False
