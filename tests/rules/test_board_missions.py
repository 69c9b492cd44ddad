"""Each mission card scored on hand-built boards, base pool and extended pool."""

from __future__ import annotations

from test_board_support import board_from

from events.board import missions
from events.board.data import BASE_MISSIONS, EXTENDED_MISSIONS
from events.board.missions import MISSIONS
from events.board.rules import surrounded_mountains
from events.board.state import starting_board

EMPTY_ROW = "..........."


def test_every_card_of_both_pools_has_a_scoring_function_title_and_text():
    assert set(MISSIONS) == set(BASE_MISSIONS) | set(EXTENDED_MISSIONS)
    for key in BASE_MISSIONS + EXTENDED_MISSIONS:
        card = MISSIONS[key]
        assert card.title and card.text
        assert card.score(starting_board()) >= 0


def test_the_empty_map_scores_nothing_on_any_card():
    board = starting_board()
    assert {key: MISSIONS[key].score(board) for key in MISSIONS} == {key: 0 for key in MISSIONS}


def test_edge_of_the_forest_counts_each_ring_forest_cell_once_corners_included():
    board = board_from(
        "FF.......FF",
        "F.........F",
        "...........",
        "....F......",  # inner forest: not on the edge
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "F....F....F",
    )
    # top row 4 (two corners), sides 2 at rows 1, bottom row 3 (two corners): 9 cells, each once
    assert missions.edge_of_the_forest(board) == 9


def test_sleepy_valley_scores_rows_with_exactly_three_forests_not_two_or_four():
    board = board_from(
        "FFF........",  # three: 4
        "F.F.F......",  # three, apart: 4
        "FF.........",  # two: 0
        "FFFF.......",  # four: 0
        "F..F..F..VV",  # three: 4
        EMPTY_ROW,
        EMPTY_ROW,
        EMPTY_ROW,
        EMPTY_ROW,
        EMPTY_ROW,
        "WWW........",  # three waters: 0
    )
    assert missions.sleepy_valley(board) == 12


def test_watering_potatoes_counts_a_water_next_to_two_farms_once():
    board = board_from(
        "PWP........",  # one water between two farms: 2 points, not 4
        "...........",
        "....W......",  # diagonal farm does not count
        ".....P.....",
        "...........",
        "........W..",
        "........P..",  # water above a farm: 2
        "WW.........",  # waters with no farm: 0
        "...........",
        "...........",
        "P.........W",
    )
    assert missions.watering_potatoes(board) == 4


def test_borderlands_counts_full_rows_and_columns_with_mountains_filling_them():
    rows = [list(line) for line in starting_board()]
    picture = [["M" if cell == "mountain" else "." for cell in line] for line in rows]
    picture[1] = list("FMFFFFFFFFF")  # row 1 holds the mountain at column 1: full
    picture[0] = list("FFFFFFFFFF.")  # row 0 one short
    for row in range(11):
        if picture[row][3] == ".":
            picture[row][3] = "V"  # column 3 holds the mountain at row 5: full
    board = board_from(*("".join(line) for line in picture))
    assert board[5][3] == "mountain"
    assert missions.borderlands(board) == 12


def test_borderlands_counts_a_full_map_as_eleven_rows_and_eleven_columns():
    board = board_from(*(["FFFFFFFFFFF"] * 11))
    assert missions.borderlands(board) == 6 * 22


def test_tree_line_scores_two_per_cell_of_the_longest_vertical_forest_run_once():
    rows = [
        "F....F.....",
        "F....F.....",
        "F....F.....",
        "F....V.....",
        "..FFFFFFFF.",  # a long horizontal run does not count
    ] + [EMPTY_ROW] * 6
    assert missions.tree_line(board_from(*rows)) == 8  # column 0 runs rows 0-3: four cells
    rows[3] = ".....V....."
    assert missions.tree_line(board_from(*rows)) == 6  # two runs of three tie: one counts


def test_watering_canal_scores_columns_with_as_many_farms_as_waters_at_least_one_each():
    board = board_from(
        "PPW........",
        "WWW........",
        "..P........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
    )
    # column 0: 1 farm 1 water -> 4; column 1: same -> 4; column 2: 1 farm 2 waters -> 0
    assert missions.watering_canal(board) == 8


def test_wealthy_town_scores_villages_touching_three_different_terrains():
    board = board_from(
        ".F.........",
        "WVP........",  # village next to forest, water, farm: 3
        ".F.........",
        "...........",
        "....M......",
        "...FVV.....",  # (5,4): mountain, forest, village -> 3; (5,5): village only -> 0
        "...........",
        "...........",
        "...........",
        "...........",
        "VV.........",  # corner village next to a village only: 0
    )
    assert missions.wealthy_town(board) == 6


def test_magicians_valley_scores_waters_next_to_a_mountain():
    board = starting_board()
    grid = [list(line) for line in board]
    for row, column in ((0, 1), (1, 0), (2, 2), (3, 9), (4, 8)):  # (2,2) is diagonal to (1,1): no
        grid[row][column] = "water"
    board = tuple(tuple(line) for line in grid)
    assert missions.magicians_valley(board) == 3 * 4


def test_empty_site_scores_empty_cells_next_to_a_village_once_each():
    board = board_from(
        "V.V........",  # (0,1) next to two villages: 2 once; (1,0), (1,2), (0,3) -> 2 each
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
    )
    assert missions.empty_site(board) == 8


def test_row_of_houses_scores_two_per_cell_of_the_longest_horizontal_village_run():
    board = board_from(
        "VVV.VVVV...",
        "V..........",
        "V..........",
        "V..........",
        "V..........",  # a vertical run of five does not count
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
    )
    assert missions.row_of_houses(board) == 8


def test_odd_numbered_silos_scores_full_columns_one_three_five_counting_mountains():
    picture = [["M" if cell == "mountain" else "." for cell in line] for line in starting_board()]
    for row in range(11):
        for column in (0, 1, 4):  # 1-based columns 1, 2, 5; column 5 (0-based 4) has no mountain
            if picture[row][column] == ".":
                picture[row][column] = "P"
    board = board_from(*("".join(line) for line in picture))
    assert missions.odd_numbered_silos(board) == 20  # columns 1 and 5 are odd; column 2 is even


def test_rich_countryside_scores_rows_holding_five_terrains_mountain_included():
    board = board_from(
        "FVPW.......",  # four terrains: 0
        "FMVPW......",  # five with the mountain: 4
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
        "FVPWFVPWFVP",  # four: 0
        "...........",
    )
    assert missions.rich_countryside(board) == 4


def test_a_mountain_is_surrounded_only_when_all_four_neighbours_are_filled():
    grid = [list(line) for line in starting_board()]
    for row, column in ((0, 1), (2, 1), (1, 0), (1, 2)):  # around (1,1)
        grid[row][column] = "forest"
    for row, column in ((2, 8), (4, 8), (3, 7)):  # three of four around (3,8)
        grid[row][column] = "forest"
    assert surrounded_mountains(tuple(tuple(line) for line in grid)) == 1
