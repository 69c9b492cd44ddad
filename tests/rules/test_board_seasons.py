"""Cumulative time: seasons that end on or past 7/14/21/28, overflow, reshuffles, the mountain bonus, the end."""

from __future__ import annotations

import pytest
from game_modules import game_module, game_names
from test_board_support import Game, dealt_game

from almanac.events.dice import Dice
from almanac.events.errors import RuleError

DECIDER = game_module("board@1", "game").DECIDER
PlaceElement = game_module("board@1", "commands").PlaceElement
DECK_NUMBERS = game_module("board@1", "data").DECK_NUMBERS
(DeckShuffled, ElementPlaced, ElementSkipped, GameEnded, MissionScore, SeasonEnded) = game_names(
    "board@1", "events", "DeckShuffled", "ElementPlaced", "ElementSkipped", "GameEnded", "MissionScore", "SeasonEnded")


def test_a_two_time_element_crossing_the_season_end_is_scored_in_the_ending_season():
    game = dealt_game((3, 8, 1, 2, 5, 4, 6, 7))
    game.play(PlaceElement(row=4, column=4))  # forest inside, time 1
    game.play(PlaceElement(row=8, column=0))  # village, time 2
    game.play(PlaceElement(row=10, column=5))  # water, time 4
    game.play(PlaceElement(row=6, column=6))  # village, time 6
    events = game.play(PlaceElement(row=0, column=0, element=5))  # forest on the edge, 2 time: 8
    placed, season = events
    assert isinstance(placed, ElementPlaced) and placed.time_after == 8
    assert season == SeasonEnded(
        season=0,
        name="spring",
        time=8,
        missions=(
            # the crossing element counts: three of its cells on the top edge, three forests in row 0
            MissionScore(card="A", mission="edge_of_the_forest", points=3),
            MissionScore(card="B", mission="sleepy_valley", points=4),
        ),
        mountain_bonus=0,
        total=7,
    )
    assert game.game.season == 1 and game.game.time == 8


def test_the_overflow_past_a_season_end_counts_toward_the_next_season():
    game = dealt_game((3, 8, 1, 2, 5, 4, 6, 7))
    for row in (0, 2, 4, 6, 8):
        game.play(PlaceElement(row=row, column=5))  # times 1, 2, 4, 6, 8: spring ends at 8
    assert game.game.season == 1
    assert not any(isinstance(e, SeasonEnded) for e in game.play(PlaceElement(row=0, column=0)))  # 10
    assert not any(isinstance(e, SeasonEnded) for e in game.play(PlaceElement(row=3, column=0)))  # 12
    last = game.play(PlaceElement(row=6, column=0))  # 14: summer lasted 6, not 7
    assert [e.name for e in last if isinstance(e, SeasonEnded)] == ["summer"]
    assert game.game.time == 14 and game.game.season == 2


def test_the_mountain_bonus_scores_a_surrounded_mountain_at_every_season_end_when_on():
    game = dealt_game((1, 2, 8, 4, 6, 7), {"mountain_bonus": True})
    game.play(PlaceElement(row=0, column=0, rotation=90))  # water (0,0),(1,0),(2,0)
    game.play(PlaceElement(row=0, column=1))  # village (0,1),(0,2),(0,3)
    game.play(PlaceElement(row=1, column=1, rotation=180))  # village (1,2),(2,1),(2,2): (1,1) surrounded
    spring = game.play(PlaceElement(row=6, column=6))[-1]  # time 7
    assert spring.name == "spring" and spring.mountain_bonus == 1 and spring.total == 1
    game.play(PlaceElement(row=8, column=0))
    game.play(PlaceElement(row=6, column=0))
    summer = [e for e in game.play(PlaceElement(row=4, column=5, element=3)) if isinstance(e, SeasonEnded)]
    assert summer == [] and game.game.time == 12
    summer = game.play(PlaceElement(row=9, column=7))[-1]  # forest 5: (9,7),(9,8),(9,9),(10,9), time 14
    assert summer.name == "summer" and summer.mountain_bonus == 1
    assert [m.points for m in summer.missions] == [4, 0] and summer.total == 4 + 0 + 1
    assert game.game.total == 1 + 5


def test_the_mountain_bonus_is_off_by_default_and_recorded_in_the_setup():
    game = dealt_game((1, 2, 8, 4))
    assert game.state.game.mountain_bonus is False
    game.play(PlaceElement(row=0, column=0, rotation=90))
    game.play(PlaceElement(row=0, column=1))
    game.play(PlaceElement(row=1, column=1, rotation=180))
    spring = game.play(PlaceElement(row=6, column=6))[-1]
    assert spring.mountain_bonus == 0 and spring.total == 0
    created = game.events[0]
    assert created.setup.mountain_bonus is False and created.setup.extended_pool is False


def test_a_reshuffle_draws_the_new_order_with_the_rooms_dice_at_that_version():
    game = Game(seed=b"reshuffle seed").create().play_out()
    for index, event in enumerate(game.events):
        if isinstance(event, DeckShuffled):
            # the decision began with the placement that spent the deck; its version seeds the dice
            start = max(i for i in range(index) if isinstance(game.events[i], ElementPlaced | ElementSkipped))
            expected = Dice(game.seed, game.room_id, start + 1).shuffle(DECK_NUMBERS)
            assert event.order == expected and sorted(event.order) == list(DECK_NUMBERS)
    assert game.game.shuffles >= 1  # 27 time units in a deck: a game always needs a second pass


def test_the_game_ends_when_time_reaches_28_with_four_seasons_scored():
    game = Game(seed=b"ending seed").create().play_out()
    assert game.game.time >= 28 and game.game.over and DECIDER.is_over(game.game)
    assert [s.name for s in game.game.seasons] == ["spring", "summer", "autumn", "winter"]
    ended = [e for e in game.events if isinstance(e, GameEnded)]
    assert len(ended) == 1 and ended[0].total == sum(s.total for s in game.game.seasons)
    with pytest.raises(RuleError) as caught:
        DECIDER.decide(game.game, PlaceElement(row=0, column=0), game.context())
    assert caught.value.code == "game_over"
    with pytest.raises(RuleError) as caught:
        game.play(PlaceElement(row=0, column=0))
    assert caught.value.code == "room_ended"
