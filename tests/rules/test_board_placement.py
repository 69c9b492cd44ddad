"""Placing and skipping: what is accepted, and refusals that name the rule and the cells."""

from __future__ import annotations

import msgspec
import pytest
from game_modules import game_names
from test_board_support import Game, deal, dealt_game

from almanac.events.errors import RuleError
from almanac.events.room import CreateRoom, JoinRoom

PlaceElement, SkipElement = game_names("board@1", "commands", "PlaceElement", "SkipElement")
ElementPlaced, ElementSkipped = game_names("board@1", "events", "ElementPlaced", "ElementSkipped")


def on_board(game: Game, board) -> Game:
    """The same game with its map replaced by ``board`` (to stage a crowded map quickly)."""
    game.state = msgspec.structs.replace(game.state, game=msgspec.structs.replace(game.game, board=board))
    return game


def refusal(game: Game, command) -> RuleError:
    before = game.state
    with pytest.raises(RuleError) as caught:
        game.play(command)
    assert game.state is before, "a refused command changes nothing"
    return caught.value


def test_placing_the_current_element_fills_its_cells_and_spends_its_time():
    game = dealt_game()
    events = game.play(PlaceElement(row=0, column=0, element=1))
    assert events == [
        ElementPlaced(
            element=1,
            terrain="water",
            time=2,
            row=0,
            column=0,
            rotation=0,
            mirror=False,
            cells=((0, 0), (0, 1), (0, 2)),
            time_after=2,
        )
    ]
    assert game.game.board[0][:4] == ("water", "water", "water", "")
    assert game.game.time == 2 and game.game.deck[0] == 2


def test_hanging_off_the_map_is_refused_naming_the_cells_off_it():
    error = refusal(dealt_game(), PlaceElement(row=10, column=9))
    assert error.code == "board.off_map"
    assert "(10, 11)" in error.message and "(10, 10)" not in error.message
    error = refusal(dealt_game(), PlaceElement(row=9, column=0, rotation=90))
    assert error.code == "board.off_map" and "(11, 0)" in error.message and error.field == "row"


def test_covering_a_mountain_is_refused_naming_the_mountain():
    error = refusal(dealt_game(), PlaceElement(row=1, column=0))
    assert error.code == "board.overlaps_mountain"
    assert "(1, 1)" in error.message


def test_covering_a_filled_cell_is_refused_naming_the_cell_and_its_terrain():
    game = dealt_game()
    game.play(PlaceElement(row=0, column=0))
    error = refusal(game, PlaceElement(row=0, column=2, rotation=90))
    assert error.code == "board.overlaps_filled"
    assert "(0, 2) water" in error.message


def test_naming_another_element_than_the_current_one_is_refused():
    error = refusal(dealt_game(), PlaceElement(row=4, column=4, element=7))
    assert error.code == "board.not_current_element"
    assert error.field == "element" and error.allowed == [1]
    assert refusal(dealt_game(), SkipElement(element=2)).code == "board.not_current_element"


def test_a_rotation_other_than_quarter_turns_is_refused_with_the_allowed_values():
    error = refusal(dealt_game(), PlaceElement(row=4, column=4, rotation=45))
    assert error.code == "board.invalid_rotation" and error.allowed == [0, 90, 180, 270]


def test_skipping_an_element_that_still_fits_is_refused_with_an_example_placement():
    error = refusal(dealt_game(), SkipElement())
    assert error.code == "board.placement_possible"
    assert "row 0, column 0" in error.message


def test_an_element_that_fits_nowhere_is_skipped_and_its_time_still_counts():
    game = dealt_game()
    # fill every empty cell but a checkerboard of holes: no two empty cells touch, so nothing fits
    board = tuple(
        tuple(cell if cell else ("" if (r + c) % 2 == 0 else "village") for c, cell in enumerate(line))
        for r, line in enumerate(game.game.board)
    )
    on_board(game, board)
    refused = refusal(game, PlaceElement(row=0, column=0))
    assert refused.code == "board.overlaps_filled"
    events = game.play(SkipElement(element=1))
    assert events == [ElementSkipped(element=1, time=2, time_after=2)]
    assert game.game.time == 2 and game.game.skipped == 1 and game.game.deck[0] == 2
    assert game.game.board == board


def test_a_skip_is_refused_while_the_element_fits_only_turned_and_then_it_is_placed_there():
    # given element 8 (110/100) and a full map but for (0,9), (0,10), (1,10): it fits only turned a quarter
    holes = {(0, 9), (0, 10), (1, 10)}
    game = dealt_game((8,))
    full = tuple(
        tuple(cell or ("" if (r, c) in holes else "farm") for c, cell in enumerate(line))
        for r, line in enumerate(game.game.board)
    )
    on_board(game, full)
    # when the player skips, then the skip is refused with the one placement that fits
    error = refusal(game, SkipElement(element=8))
    assert error.code == "board.placement_possible"
    assert "row 0, column 9, rotation 90, mirror false" in error.message
    # when it is placed unturned, then the refusal names the filled cell it would cover
    error = refusal(game, PlaceElement(row=0, column=9, element=8))
    assert error.code == "board.overlaps_filled" and "(1, 9) farm" in error.message
    # when it is placed mirrored instead (011/001 is the same L), then it fills the holes
    placed = game.play(PlaceElement(row=0, column=9, mirror=True, element=8))[0]
    assert set(placed.cells) == holes and game.game.time == 1


def test_the_map_prints_the_five_mountains_of_the_seed_converted_to_zero_based_cells():
    # given the seed's 1-based (row, column) mountains, when a game starts, then exactly those cells are mountains
    seed_cells = [(2, 2), (4, 9), (6, 4), (9, 10), (10, 6)]
    board = dealt_game().game.board
    mountains = [
        (r + 1, c + 1) for r, line in enumerate(board) for c, cell in enumerate(line) if cell == "mountain"
    ]
    assert mountains == seed_cells
    assert all(cell == "" for line in board for cell in line if cell != "mountain")


def test_only_the_maps_owner_may_join_and_play():
    game = dealt_game(options={"player": "ada"})
    with pytest.raises(RuleError) as caught:
        game.play(JoinRoom(), player="bob")
    assert caught.value.code == "no_seat" and caught.value.allowed == ["ada"]


def test_the_owner_defaults_to_the_creator_and_can_be_named_in_the_options():
    assert dealt_game(player="cy").game.player == "cy"
    game = Game(player="host")
    game.play(CreateRoom(ruleset="board", options={"player": "dee"}), dice=deal())
    assert game.game.player == "dee"
    game.play(JoinRoom(), player="dee")
    assert game.state.players == ("dee",)
