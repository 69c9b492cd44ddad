"""The mission cards: one pure function per card from a board (rows of terrain names) to points."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from almanac.games.board.v1.data import EMPTY, FARM, FOREST, MOUNTAIN, SIZE, VILLAGE, WATER
from almanac.games.board.v1.state import Board


def neighbours(row: int, column: int) -> Iterator[tuple[int, int]]:
    """The orthogonal neighbours of a cell that lie on the map (up, down, left, right)."""
    if row > 0:
        yield row - 1, column
    if row < SIZE - 1:
        yield row + 1, column
    if column > 0:
        yield row, column - 1
    if column < SIZE - 1:
        yield row, column + 1


def _cells(board: Board) -> Iterator[tuple[int, int, str]]:
    for row, cells in enumerate(board):
        for column, terrain in enumerate(cells):
            yield row, column, terrain


def _columns(board: Board) -> list[tuple[str, ...]]:
    return list(zip(*board, strict=True))  # column c is (board[0][c], board[1][c], ...)


def _longest_run(lines: list[tuple[str, ...]], terrain: str) -> int:
    best = 0
    for line in lines:
        run = 0
        for cell in line:
            run = run + 1 if cell == terrain else 0
            best = max(best, run)
    return best


def _next_to(board: Board, terrain: str, neighbour: str) -> int:
    """How many ``terrain`` cells have at least one ``neighbour`` cell as an orthogonal neighbour.

    The same count as testing ``neighbours`` cell by cell, written as plain index tests: a season's scoring
    ran it over all 121 cells through two generators, and that was most of what the season's last placement
    cost to decide (docs/capacity.md, tenth pass).
    """
    count = 0
    last = SIZE - 1
    for row, cells in enumerate(board):
        if terrain not in cells:
            continue
        above = board[row - 1] if row > 0 else None
        below = board[row + 1] if row < last else None
        for column, here in enumerate(cells):
            if here == terrain and (
                (above is not None and above[column] == neighbour)
                or (below is not None and below[column] == neighbour)
                or (column > 0 and cells[column - 1] == neighbour)
                or (column < last and cells[column + 1] == neighbour)
            ):
                count += 1
    return count


def _full(line: tuple[str, ...]) -> bool:
    return EMPTY not in line


# --- the base cards (seed 002 and docs/design-rulings.md) --------------------------------------------------


def edge_of_the_forest(board: Board) -> int:
    """1 point per forest cell on the map's outer ring (a corner cell is one cell, counted once)."""
    # The top and bottom rows whole, then the first and last cell of each row between (corners once).
    inner = board[1:SIZE - 1]
    return (board[0].count(FOREST) + board[SIZE - 1].count(FOREST)
            + sum(1 for cells in inner if cells[0] == FOREST) + sum(1 for cells in inner if cells[SIZE - 1] == FOREST))


def sleepy_valley(board: Board) -> int:
    """4 points per row with exactly three forest cells (not two, not four)."""
    return sum(4 for cells in board if cells.count(FOREST) == 3)


def watering_potatoes(board: Board) -> int:
    """2 points per water cell with a farm as an orthogonal neighbour (one next to two farms counts once)."""
    return 2 * _next_to(board, WATER, FARM)


def borderlands(board: Board) -> int:
    """6 points per full row and per full column (mountains count as filled)."""
    return 6 * (
        sum(1 for cells in board if _full(cells)) + sum(1 for cells in _columns(board) if _full(cells))
    )


# --- the extended pool (our definitions, docs/rules/board.md) ---------------------------------


def tree_line(board: Board) -> int:
    """2 points per cell of the longest unbroken vertical run of forest cells in any column (one run only)."""
    return 2 * _longest_run(_columns(board), FOREST)


def watering_canal(board: Board) -> int:
    """4 points per column holding as many farm cells as water cells, at least one of each."""
    return sum(4 for cells in _columns(board) if cells.count(FARM) == cells.count(WATER) >= 1)


def wealthy_town(board: Board) -> int:
    """3 points per village cell whose orthogonal neighbours show three different terrains or more (village
    and mountain count, empty cells do not)."""
    points = 0
    for row, column, terrain in _cells(board):
        if terrain == VILLAGE:
            kinds = {board[r][c] for r, c in neighbours(row, column)} - {EMPTY}
            if len(kinds) >= 3:
                points += 3
    return points


def magicians_valley(board: Board) -> int:
    """3 points per water cell with a mountain as an orthogonal neighbour."""
    return 3 * _next_to(board, WATER, MOUNTAIN)


def empty_site(board: Board) -> int:
    """2 points per empty cell with at least one village as an orthogonal neighbour (counted once per cell)."""
    return 2 * _next_to(board, EMPTY, VILLAGE)


def row_of_houses(board: Board) -> int:
    """2 points per cell of the longest unbroken horizontal run of village cells in any row (one run only)."""
    return 2 * _longest_run(list(board), VILLAGE)


def odd_numbered_silos(board: Board) -> int:
    """10 points per full column with an odd 1-based number (1, 3, 5, 7, 9, 11; mountains count as filled)."""
    return sum(10 for index, cells in enumerate(_columns(board)) if index % 2 == 0 and _full(cells))


def rich_countryside(board: Board) -> int:
    """4 points per row holding five different terrains: forest, village, farm, water and mountain (so only
    the five rows with a mountain can score)."""
    return sum(4 for cells in board if len(set(cells) - {EMPTY}) >= 5)


# --- the cards --------------------------------------------------------------------------------


class Mission(msgspec.Struct, frozen=True, kw_only=True):
    """A mission card: its key, printed title, rule text (its scoring function's docstring) and scoring function."""

    key: str
    title: str
    text: str
    score: Callable[[Board], int]


def _card(key: str, title: str, score: Callable[[Board], int]) -> Mission:
    return Mission(key=key, title=title, text=" ".join((score.__doc__ or "").split()), score=score)


MISSIONS: dict[str, Mission] = {
    card.key: card
    for card in (
        _card("edge_of_the_forest", "Edge of the forest", edge_of_the_forest),
        _card("sleepy_valley", "Sleepy valley", sleepy_valley),
        _card("watering_potatoes", "Watering potatoes", watering_potatoes),
        _card("borderlands", "Borderlands", borderlands),
        _card("tree_line", "Tree line", tree_line),
        _card("watering_canal", "Watering canal", watering_canal),
        _card("wealthy_town", "Wealthy town", wealthy_town),
        _card("magicians_valley", "Magicians' valley", magicians_valley),
        _card("empty_site", "Empty site", empty_site),
        _card("row_of_houses", "Row of houses", row_of_houses),
        _card("odd_numbered_silos", "Odd numbered silos", odd_numbered_silos),
        _card("rich_countryside", "Rich countryside", rich_countryside),
    )
}
"""Every card by key, in the order of the base pool then the extended pool."""


def score(key: str, board: Board) -> int:
    """The points one mission card gives a board."""
    return MISSIONS[key].score(board)
