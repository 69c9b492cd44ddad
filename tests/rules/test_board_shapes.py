"""Rotation and mirroring of every deck shape, and where a placement's anchor puts the cells."""

from __future__ import annotations

import pytest
from game_modules import game_module, game_names
from test_board_support import dealt_game

PlaceElement = game_module("board@1", "commands").PlaceElement
DECK, ELEMENTS, ROTATIONS = game_names("board@1", "data", "DECK", "ELEMENTS", "ROTATIONS")
(distinct_orientations, shape_offsets) = game_names(
    "board@1", "rules", "distinct_orientations", "shape_offsets")

# The deck table of issue 5 as printed: number, time, terrain, the three shape rows.
ISSUE_TABLE = """
1 2 water 111 000 000
2 2 village 111 000 000
3 1 forest 110 011 000
4 2 farm 111 001 000
5 2 forest 111 001 000
6 2 village 111 010 000
7 2 farm 111 010 000
8 1 village 110 100 000
9 1 village 111 110 000
10 1 farm 110 011 000
11 1 farm 010 111 010
12 2 water 111 100 100
13 2 water 100 111 100
14 2 forest 110 011 001
15 2 forest 110 011 000
16 2 water 110 110 000
"""


def test_the_deck_is_the_issues_table_four_of_each_terrain_and_27_time_units():
    printed = [line.split() for line in ISSUE_TABLE.strip().splitlines()]
    assert [(e.number, e.time, e.terrain, *e.shape) for e in DECK] == [
        (int(number), int(time), terrain, *rows) for number, time, terrain, *rows in printed
    ]
    assert sorted(e.terrain for e in DECK) == sorted(["forest", "village", "farm", "water"] * 4)
    assert sum(e.time for e in DECK) == 27


def picture_cells(rows: list[str]) -> tuple[tuple[int, int], ...]:
    """Filled cells of a pictured shape, moved so the filled bounding box starts at (0, 0)."""
    cells = [(r, c) for r, line in enumerate(rows) for c, mark in enumerate(line) if mark == "1"]
    top, left = min(r for r, _ in cells), min(c for _, c in cells)
    return tuple(sorted((r - top, c - left) for r, c in cells))


def turn_picture_clockwise(rows: list[str]) -> list[str]:
    """The picture turned a quarter clockwise: the first column read bottom-up becomes the first row."""
    return ["".join(line[column] for line in reversed(rows)) for column in range(len(rows[0]))]


@pytest.mark.parametrize("element", DECK, ids=lambda e: f"element{e.number}")
@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("rotation", ROTATIONS)
def test_every_shape_turns_and_mirrors_like_its_picture(element, rotation, mirror):
    rows = list(element.shape)
    if mirror:
        rows = [line[::-1] for line in rows]
    for _ in range(rotation // 90):
        rows = turn_picture_clockwise(rows)
    assert shape_offsets(element, rotation, mirror) == picture_cells(rows)
    assert len(shape_offsets(element, rotation, mirror)) == "".join(element.shape).count("1")


@pytest.mark.parametrize(
    ("number", "rotation", "mirror", "cells"),
    [
        (1, 0, False, ((0, 0), (0, 1), (0, 2))),
        (1, 90, False, ((0, 0), (1, 0), (2, 0))),
        (4, 90, False, ((0, 1), (1, 1), (2, 0), (2, 1))),  # 111/001 turned: a J
        (4, 0, True, ((0, 0), (0, 1), (0, 2), (1, 0))),  # mirrored: 111/100
        (4, 90, True, ((0, 0), (0, 1), (1, 1), (2, 1))),  # mirrored first, then turned
        (3, 0, True, ((0, 1), (0, 2), (1, 0), (1, 1))),  # 110/011 mirrored: 011/110
        (12, 180, False, ((0, 2), (1, 2), (2, 0), (2, 1), (2, 2))),
        (14, 90, False, ((0, 2), (1, 1), (1, 2), (2, 0), (2, 1))),
        (11, 270, True, ((0, 1), (1, 0), (1, 1), (1, 2), (2, 1))),  # the plus never changes
        (16, 180, True, ((0, 0), (0, 1), (1, 0), (1, 1))),  # nor the square
    ],
)
def test_hand_worked_orientations_give_the_expected_cells(number, rotation, mirror, cells):
    assert shape_offsets(ELEMENTS[number], rotation, mirror) == cells


@pytest.mark.parametrize(
    ("number", "count"),
    [(1, 2), (3, 4), (4, 8), (6, 4), (8, 4), (9, 8), (11, 1), (12, 4), (13, 4), (14, 4), (16, 1)],
)
def test_distinct_orientations_drop_the_repeats_of_symmetric_shapes(number, count):
    assert len(distinct_orientations(ELEMENTS[number])) == count


def test_a_placement_puts_the_top_left_of_the_filled_bounding_box_at_the_given_cell():
    game = dealt_game((11,))
    placed = game.play(PlaceElement(row=6, column=6))[0]
    # the plus: the anchor (6, 6) itself is empty, the cells start one column right
    assert placed.cells == ((6, 7), (7, 6), (7, 7), (7, 8), (8, 7))
    assert all(game.game.board[r][c] == "farm" for r, c in placed.cells)
    assert game.game.board[6][6] == ""
