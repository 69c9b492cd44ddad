"""The board events: the stored format (tags never change, new fields only with defaults)."""

from __future__ import annotations

import msgspec

from almanac.games.board.v1.data import CardLetter, MissionKey, SeasonName, Terrain


class MissionScore(msgspec.Struct, frozen=True, kw_only=True):
    """The points one mission card (by letter A-D and key) gave at one season's end."""

    card: CardLetter
    mission: MissionKey
    points: int


class ElementPlaced(msgspec.Struct, frozen=True, kw_only=True, tag="board.element_placed"):
    """The current element was placed; ``cells`` are the zero-based (row, column) cells it filled."""

    element: int
    terrain: Terrain
    time: int
    row: int
    column: int
    rotation: int
    mirror: bool
    cells: tuple[tuple[int, int], ...]
    time_after: int


class ElementSkipped(msgspec.Struct, frozen=True, kw_only=True, tag="board.element_skipped"):
    """The current element fitted nowhere and was skipped; its time still counts."""

    element: int
    time: int
    time_after: int


class SeasonEnded(msgspec.Struct, frozen=True, kw_only=True, tag="board.season_ended"):
    """A season ended: its two missions scored on the board as it stood, plus the mountain bonus if on."""

    season: int
    name: SeasonName
    time: int
    missions: tuple[MissionScore, ...]
    mountain_bonus: int = 0
    total: int = 0


class DeckShuffled(msgspec.Struct, frozen=True, kw_only=True, tag="board.deck_shuffled"):
    """The deck ran out and was reshuffled; ``order`` is the new draw order (left out when redacted)."""

    size: int
    order: tuple[int, ...] = ()
    hidden: bool = False


class GameEnded(msgspec.Struct, frozen=True, kw_only=True, tag="board.game_ended"):
    """Time reached 28: the game is over; points per mission card over the four seasons, and the total."""

    time: int
    missions: tuple[MissionScore, ...]
    mountain_bonus: int
    total: int


EVENT_TYPES: tuple[type, ...] = (ElementPlaced, ElementSkipped, SeasonEnded, DeckShuffled, GameEnded)
