"""Each mission card scored on hand-built boards, base pool and extended pool."""

from __future__ import annotations

from game_modules import game_module, game_names
from test_board_support import board_from, with_terrain

missions = game_module("board@1", "missions")
BASE_MISSIONS, EXTENDED_MISSIONS = game_names("board@1", "data", "BASE_MISSIONS", "EXTENDED_MISSIONS")
MISSIONS = game_module("board@1", "missions").MISSIONS
surrounded_mountains = game_module("board@1", "rules").surrounded_mountains
STARTING_BOARD = game_module("board@1", "state").STARTING_BOARD


def test_every_card_of_both_pools_has_a_scoring_function_title_and_text():
    assert set(MISSIONS) == set(BASE_MISSIONS) | set(EXTENDED_MISSIONS)
    for key in BASE_MISSIONS + EXTENDED_MISSIONS:
        card = MISSIONS[key]
        assert card.title and card.text
        assert card.score(STARTING_BOARD) >= 0


def test_the_empty_map_scores_nothing_on_any_card():
    assert {key: MISSIONS[key].score(STARTING_BOARD) for key in MISSIONS} == {key: 0 for key in MISSIONS}


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
        "...........",
        "...........",
        "...........",
        "...........",
        "...........",
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
    board = with_terrain("forest", [(1, c) for c in range(11) if c != 1])  # row 1 around its mountain
    board = with_terrain("forest", [(0, c) for c in range(10)], board)  # row 0 one short
    board = with_terrain("village", [(r, 3) for r in range(11) if r not in (0, 1, 5)], board)  # column 3
    assert board[1][1] == board[5][3] == "mountain" and board[0][3] == board[1][3] == "forest"
    assert missions.borderlands(board) == 12  # row 1 and column 3 are full thanks to their mountains


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
    ]
    assert missions.tree_line(board_from(*rows)) == 8  # column 0 runs rows 0-3: four cells
    rows[3] = ".....V....."
    assert missions.tree_line(board_from(*rows)) == 6  # two runs of three tie: one counts


def test_watering_canal_scores_columns_with_as_many_farms_as_waters_at_least_one_each():
    board = board_from(
        "PPW........",
        "WWW........",
        "..P........",
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
    board = with_terrain("water", [(0, 1), (1, 0), (2, 2), (3, 9), (4, 8)])  # (2,2) is diagonal to (1,1): no
    assert missions.magicians_valley(board) == 3 * 4


def test_empty_site_scores_empty_cells_next_to_a_village_once_each():
    board = board_from(
        "V.V........",  # (0,1) next to two villages: 2 once; (1,0), (1,2), (0,3) -> 2 each
    )
    assert missions.empty_site(board) == 8


def test_row_of_houses_scores_two_per_cell_of_the_longest_horizontal_village_run():
    board = board_from(
        "VVV.VVVV...",
        "V..........",
        "V..........",
        "V..........",
        "V..........",  # a vertical run of five does not count
    )
    assert missions.row_of_houses(board) == 8


def test_odd_numbered_silos_scores_full_odd_columns_counting_mountains():
    # 1-based columns 1, 2 and 9 filled around their mountains: (2,2) in column 2, (4,9) in column 9
    board = with_terrain(
        "farm", [(r, c) for r in range(11) for c in (0, 1, 8) if (r, c) not in ((1, 1), (3, 8))]
    )
    assert missions.odd_numbered_silos(board) == 20  # columns 1 and 9 are odd; column 2 is even
    assert missions.odd_numbered_silos(with_terrain("", [(10, 0)], board)) == 10  # column 1 one short


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
    )
    assert missions.rich_countryside(board) == 4


def test_a_mountain_is_surrounded_only_when_all_four_neighbours_are_filled():
    around_one = [(0, 1), (2, 1), (1, 0), (1, 2)]  # all four around (1,1)
    three_of_four = [(2, 8), (4, 8), (3, 7)]  # three of the four around (3,8)
    assert surrounded_mountains(with_terrain("forest", around_one + three_of_four)) == 1
