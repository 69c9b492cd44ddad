"""The board rules: shapes and placement, one decide function per command, one evolve per event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError
from almanac.games.board.v1.commands import PlaceElement, SkipElement
from almanac.games.board.v1.data import (
    CARD_LETTERS,
    DECK_NUMBERS,
    ELEMENTS,
    EMPTY,
    GAME_LENGTH,
    MOUNTAIN,
    MOUNTAIN_BONUS_POINTS,
    MOUNTAINS,
    ROTATIONS,
    SEASON_CARDS,
    SEASON_ENDS,
    SEASON_NAMES,
    SIZE,
    Element,
)
from almanac.games.board.v1.events import (
    DeckShuffled,
    ElementPlaced,
    ElementSkipped,
    GameEnded,
    MissionScore,
    SeasonEnded,
)
from almanac.games.board.v1.missions import neighbours, score
from almanac.games.board.v1.state import Board, BoardState

Cells = tuple[tuple[int, int], ...]

# --- shapes -----------------------------------------------------------------------------------


def shape_offsets(element: Element, rotation: int, mirror: bool) -> Cells:
    """The filled cells of an element's shape, mirrored left-right first if asked, then rotated
    clockwise, as (row, column) offsets from the top-left cell of the filled bounding box, sorted."""
    cells = [(r, c) for r, line in enumerate(element.shape) for c, mark in enumerate(line) if mark == "1"]
    if mirror:
        cells = [(r, 2 - c) for r, c in cells]
    for _ in range(rotation // 90):
        cells = [(c, 2 - r) for r, c in cells]
    top = min(r for r, _ in cells)
    left = min(c for _, c in cells)
    return tuple(sorted((r - top, c - left) for r, c in cells))


def placement_cells(element: Element, row: int, column: int, rotation: int, mirror: bool) -> Cells:
    """The map cells an element would cover with the anchor at (row, column); some may be off the map."""
    return tuple((row + r, column + c) for r, c in _ORIENTATIONS[element.number][(rotation, mirror)])


def _orientation_table() -> dict[int, dict[tuple[int, bool], Cells]]:
    return {
        element.number: {
            (rotation, mirror): shape_offsets(element, rotation, mirror)
            for mirror in (False, True)
            for rotation in ROTATIONS
        }
        for element in ELEMENTS.values()
    }


_ORIENTATIONS = _orientation_table()


def distinct_orientations(element: Element) -> tuple[tuple[int, bool, Cells], ...]:
    """(rotation, mirror, offsets) for each orientation giving a different shape, first one kept."""
    seen: list[Cells] = []
    result = []
    for (rotation, mirror), offsets in _ORIENTATIONS[element.number].items():
        if offsets not in seen:
            seen.append(offsets)
            result.append((rotation, mirror, offsets))
    return tuple(result)


def is_free(board: Board, cells: Cells) -> bool:
    """Whether every cell (all on the map) is empty."""
    return all(board[row][column] == EMPTY for row, column in cells)


def _in_map_placements(element: Element) -> tuple[tuple[PlaceElement, Cells], ...]:
    result = []
    for rotation, mirror, offsets in distinct_orientations(element):
        height = 1 + max(r for r, _ in offsets)
        width = 1 + max(c for _, c in offsets)
        for row in range(SIZE - height + 1):
            for column in range(SIZE - width + 1):
                command = PlaceElement(
                    row=row, column=column, rotation=rotation, mirror=mirror, element=element.number
                )
                result.append((command, tuple((row + r, column + c) for r, c in offsets)))
    return tuple(result)


_IN_MAP = {number: _in_map_placements(element) for number, element in ELEMENTS.items()}
"""Every placement of each element that stays on the map, one per distinct set of cells: orientation by
orientation (as ``distinct_orientations`` lists them), each row by row, left to right."""


def in_map_placements(element: Element) -> tuple[tuple[PlaceElement, Cells], ...]:
    """Every (placement, cells) of the element that stays on the map, whether the cells are empty or not."""
    return _IN_MAP[element.number]


def legal_placements(board: Board, element: Element) -> list[PlaceElement]:
    """Every placement of the element that fits, one per distinct covered set of cells."""
    return [command for command, cells in _IN_MAP[element.number] if is_free(board, cells)]


def any_placement(board: Board, element: Element) -> PlaceElement | None:
    """The first placement of the element that fits (in the order of ``_IN_MAP``), or None when it fits nowhere."""
    return next((command for command, cells in _IN_MAP[element.number] if is_free(board, cells)), None)


def current_element(state: BoardState) -> Element:
    return ELEMENTS[state.deck[0]]


def _named(cells: Cells) -> str:
    return ", ".join(f"({row}, {column})" for row, column in cells)


# --- scoring ----------------------------------------------------------------------------------


def surrounded_mountains(board: Board) -> int:
    """How many mountains have all four orthogonal neighbours filled."""
    return sum(
        1 for row, column in MOUNTAINS if all(board[r][c] != EMPTY for r, c in neighbours(row, column))
    )


def season_end(state: BoardState) -> SeasonEnded:
    """The season's scoring on the current board: its two cards, then the mountain bonus if on."""
    season = state.season
    scored = tuple(
        MissionScore(
            card=CARD_LETTERS[index],
            mission=state.missions[index],
            points=score(state.missions[index], state.board),
        )
        for index in SEASON_CARDS[season]
    )
    bonus = MOUNTAIN_BONUS_POINTS * surrounded_mountains(state.board) if state.mountain_bonus else 0
    return SeasonEnded(
        season=season,
        name=SEASON_NAMES[season],
        time=state.time,
        missions=scored,
        mountain_bonus=bonus,
        total=sum(m.points for m in scored) + bonus,
    )


def mission_totals(state: BoardState) -> tuple[MissionScore, ...]:
    """Points per card A-D over the seasons scored so far."""
    return tuple(
        MissionScore(
            card=letter,
            mission=state.missions[index],
            points=sum(m.points for season in state.seasons for m in season.missions if m.card == letter),
        )
        for index, letter in enumerate(CARD_LETTERS)
    )


# --- decide -----------------------------------------------------------------------------------


def _check_element(state: BoardState, named: int | None) -> Element:
    element = current_element(state)
    if named is not None and named != element.number:
        raise RuleError(
            "board.not_current_element",
            f"element {named} is not the current element; the current element is {element.number} "
            f"({element.terrain}, time {element.time})",
            field="element",
            allowed=[element.number],
        )
    return element


def decide_place_element(state: BoardState, command: PlaceElement, ctx: Context) -> list[Any]:
    element = _check_element(state, command.element)
    if command.rotation not in ROTATIONS:
        raise RuleError(
            "board.invalid_rotation",
            f"rotation {command.rotation} is not allowed; rotate by 0, 90, 180 or 270 degrees clockwise",
            field="rotation",
            allowed=list(ROTATIONS),
        )
    cells = placement_cells(element, command.row, command.column, command.rotation, command.mirror)
    off = tuple((r, c) for r, c in cells if not (0 <= r < SIZE and 0 <= c < SIZE))
    if off:
        raise RuleError(
            "board.off_map",
            f"element {element.number} at row {command.row}, column {command.column} would hang off the map at "
            f"{_named(off)}; rows and columns run 0 to {SIZE - 1}",
            field="row" if any(not 0 <= r < SIZE for r, _ in off) else "column",
        )
    mountains = tuple(cell for cell in cells if state.board[cell[0]][cell[1]] == MOUNTAIN)
    if mountains:
        raise RuleError(
            "board.overlaps_mountain",
            f"element {element.number} would cover the mountain at {_named(mountains)}; mountains cannot be covered",
            field="row",
        )
    filled = tuple(cell for cell in cells if state.board[cell[0]][cell[1]] != EMPTY)
    if filled:
        what = ", ".join(f"({r}, {c}) {state.board[r][c]}" for r, c in filled)
        raise RuleError(
            "board.overlaps_filled",
            f"element {element.number} would cover filled cells {what}; place it on empty cells only",
            field="row",
        )
    placed = ElementPlaced(
        element=element.number,
        terrain=element.terrain,
        time=element.time,
        row=command.row,
        column=command.column,
        rotation=command.rotation,
        mirror=command.mirror,
        cells=cells,
        time_after=state.time + element.time,
    )
    return [placed, *_consequences(evolve_element_placed(state, placed), ctx)]


def decide_skip_element(state: BoardState, command: SkipElement, ctx: Context) -> list[Any]:
    element = _check_element(state, command.element)
    possible = any_placement(state.board, element)
    if possible is not None:
        raise RuleError(
            "board.placement_possible",
            f"element {element.number} still fits on the map (for example row {possible.row}, column "
            f"{possible.column}, rotation {possible.rotation}, mirror {str(possible.mirror).lower()}); "
            "an element may be skipped only when it fits nowhere",
            field="kind",
        )
    skipped = ElementSkipped(element=element.number, time=element.time, time_after=state.time + element.time)
    return [skipped, *_consequences(evolve_element_skipped(state, skipped), ctx)]


def _consequences(state: BoardState, ctx: Context) -> list[Any]:
    """After time moved: end the season if its threshold was reached, end the game at 28, and
    reshuffle the whole deck (drawn with the room's dice) when it ran out before the end."""
    events: list[Any] = []
    if state.season < len(SEASON_ENDS) and state.time >= SEASON_ENDS[state.season]:
        ended = season_end(state)
        events.append(ended)
        state = evolve_season_ended(state, ended)
    if state.time >= GAME_LENGTH:
        totals = mission_totals(state)
        bonus = sum(season.mountain_bonus for season in state.seasons)
        events.append(GameEnded(time=state.time, missions=totals, mountain_bonus=bonus, total=state.total))
    elif not state.deck:
        events.append(DeckShuffled(size=len(DECK_NUMBERS), order=ctx.dice.shuffle(DECK_NUMBERS)))
    return events


# --- evolve -----------------------------------------------------------------------------------


def evolve_element_placed(state: BoardState, event: ElementPlaced) -> BoardState:
    rows = list(state.board)
    touched: dict[int, list[str]] = {}
    for row, column in event.cells:
        line = touched.get(row)
        if line is None:
            line = touched[row] = list(rows[row])
        line[column] = event.terrain
    for row, line in touched.items():
        rows[row] = tuple(line)
    return msgspec.structs.replace(
        state,
        board=tuple(rows),
        deck=state.deck[1:],
        time=state.time + event.time,
        placed=state.placed + 1,
    )


def evolve_element_skipped(state: BoardState, event: ElementSkipped) -> BoardState:
    return msgspec.structs.replace(
        state, deck=state.deck[1:], time=state.time + event.time, skipped=state.skipped + 1
    )


def evolve_season_ended(state: BoardState, event: SeasonEnded) -> BoardState:
    return msgspec.structs.replace(
        state, season=event.season + 1, seasons=(*state.seasons, event), total=state.total + event.total
    )


def evolve_deck_shuffled(state: BoardState, event: DeckShuffled) -> BoardState:
    return msgspec.structs.replace(state, deck=event.order, shuffles=state.shuffles + 1)


def evolve_game_ended(state: BoardState, event: GameEnded) -> BoardState:
    return msgspec.structs.replace(state, over=True)


DECIDE: dict[type, Callable[[BoardState, Any, Context], list[Any]]] = {
    PlaceElement: decide_place_element,
    SkipElement: decide_skip_element,
}

EVOLVE: dict[type, Callable[[BoardState, Any], BoardState]] = {
    ElementPlaced: evolve_element_placed,
    ElementSkipped: evolve_element_skipped,
    SeasonEnded: evolve_season_ended,
    DeckShuffled: evolve_deck_shuffled,
    GameEnded: evolve_game_ended,
}
