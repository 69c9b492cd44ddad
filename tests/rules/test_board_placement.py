"""Placing and skipping: what is accepted, and refusals that name the rule and the cells."""

from __future__ import annotations

import msgspec
import pytest
from test_board_support import Game, deal_dice

from events.board.commands import PlaceElement, SkipElement
from events.board.data import BASE_MISSIONS, DECK_NUMBERS
from events.board.events import ElementPlaced, ElementSkipped
from events.errors import RuleError
from events.room import CreateRoom, JoinRoom


def identity_game(**options) -> Game:
    """A game whose deck is dealt in printed order (element 1 first) and cards A-D in base order."""
    return Game().create(options, dice=deal_dice(DECK_NUMBERS, BASE_MISSIONS, BASE_MISSIONS))


def refusal(game: Game, command) -> RuleError:
    before = game.state
    with pytest.raises(RuleError) as caught:
        game.play(command)
    assert game.state is before, "a refused command changes nothing"
    return caught.value


def test_placing_the_current_element_fills_its_cells_and_spends_its_time():
    game = identity_game()
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
    error = refusal(identity_game(), PlaceElement(row=10, column=9))
    assert error.code == "board.off_map"
    assert "(10, 11)" in error.message and "(10, 10)" not in error.message
    error = refusal(identity_game(), PlaceElement(row=9, column=0, rotation=90))
    assert error.code == "board.off_map" and "(11, 0)" in error.message and error.field == "row"


def test_covering_a_mountain_is_refused_naming_the_mountain():
    error = refusal(identity_game(), PlaceElement(row=1, column=0))
    assert error.code == "board.overlaps_mountain"
    assert "(1, 1)" in error.message


def test_covering_a_filled_cell_is_refused_naming_the_cell_and_its_terrain():
    game = identity_game()
    game.play(PlaceElement(row=0, column=0))
    error = refusal(game, PlaceElement(row=0, column=2, rotation=90))
    assert error.code == "board.overlaps_filled"
    assert "(0, 2) water" in error.message


def test_naming_another_element_than_the_current_one_is_refused():
    error = refusal(identity_game(), PlaceElement(row=4, column=4, element=7))
    assert error.code == "board.not_current_element"
    assert error.field == "element" and error.allowed == [1]
    assert refusal(identity_game(), SkipElement(element=2)).code == "board.not_current_element"


def test_a_rotation_other_than_quarter_turns_is_refused_with_the_allowed_values():
    error = refusal(identity_game(), PlaceElement(row=4, column=4, rotation=45))
    assert error.code == "board.invalid_rotation" and error.allowed == [0, 90, 180, 270]


def test_skipping_an_element_that_still_fits_is_refused_with_an_example_placement():
    error = refusal(identity_game(), SkipElement())
    assert error.code == "board.placement_possible"
    assert "row 0, column 0" in error.message


def test_an_element_that_fits_nowhere_is_skipped_and_its_time_still_counts():
    game = identity_game()
    # fill every empty cell but a checkerboard of holes: no two empty cells touch, so nothing fits
    board = tuple(
        tuple(cell if cell else ("" if (r + c) % 2 == 0 else "village") for c, cell in enumerate(line))
        for r, line in enumerate(game.game.board)
    )
    game.state = msgspec.structs.replace(game.state, game=msgspec.structs.replace(game.game, board=board))
    refused = refusal(game, PlaceElement(row=0, column=0))
    assert refused.code == "board.overlaps_filled"
    events = game.play(SkipElement(element=1))
    assert events == [ElementSkipped(element=1, time=2, time_after=2)]
    assert game.game.time == 2 and game.game.skipped == 1 and game.game.deck[0] == 2
    assert game.game.board == board


def test_only_the_maps_owner_may_join_and_play():
    game = Game(player="ada")
    game.create({"player": "ada"}, dice=deal_dice(DECK_NUMBERS, BASE_MISSIONS, BASE_MISSIONS))
    with pytest.raises(RuleError) as caught:
        game.play(JoinRoom(), player="bob")
    assert caught.value.code == "no_seat" and caught.value.allowed == ["ada"]


def test_the_owner_defaults_to_the_creator_and_can_be_named_in_the_options():
    assert (
        Game(player="cy").create(dice=deal_dice(DECK_NUMBERS, BASE_MISSIONS, BASE_MISSIONS)).game.player
        == "cy"
    )
    game = Game(player="host")
    game.play(
        CreateRoom(ruleset="board", options={"player": "dee"}),
        dice=deal_dice(DECK_NUMBERS, BASE_MISSIONS, BASE_MISSIONS),
    )
    assert game.game.player == "dee"
    game.play(JoinRoom(), player="dee")
    assert game.state.players == ("dee",)
