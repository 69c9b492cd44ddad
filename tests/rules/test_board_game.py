"""A full scripted game with a known deal reaches the hand-computed score of every season and card."""

from __future__ import annotations

from game_modules import game_module, game_names
from test_board_support import Game, dealt_game, shuffle_values

from almanac.events.dice import ScriptedDice
from almanac.events.room import RoomEnded

DECIDER = game_module("board@1", "game").DECIDER
PlaceElement = game_module("board@1", "commands").PlaceElement
DECK_NUMBERS = game_module("board@1", "data").DECK_NUMBERS
(DeckShuffled, GameEnded, MissionScore, SeasonEnded) = game_names(
    "board@1", "events", "DeckShuffled", "GameEnded", "MissionScore", "SeasonEnded")

# The deck dealt in printed order; cards A Edge of the forest, B Sleepy valley, C Watering
# potatoes, D Borderlands. (element, row, column, rotation) and the time after each placement.
PLAN = [
    (1, 0, 0, 0),  # water (0,0)-(0,2)                                        time 2
    (2, 10, 0, 0),  # village (10,0)-(10,2)                                   time 4
    (3, 0, 4, 0),  # forest (0,4),(0,5),(1,5),(1,6): two on the edge          time 5
    (4, 3, 0, 0),  # farm (3,0),(3,1),(3,2),(4,2)                             time 7: spring
    (5, 5, 0, 0),  # forest (5,0),(5,1),(5,2),(6,2): row 5 has three forests  time 9
    (6, 8, 0, 0),  # village (8,0),(8,1),(8,2),(9,1)                          time 11
    (7, 1, 1, 180),  # farm (1,2),(2,1),(2,2),(2,3): (1,2) waters (0,2)       time 13
    (8, 7, 8, 0),  # village (7,8),(7,9),(8,8)                                time 14: summer
    (9, 9, 8, 180),  # village (9,9),(9,10),(10,8),(10,9),(10,10)             time 15
    (10, 9, 2, 0),  # farm (9,2),(9,3),(10,3),(10,4)                          time 16
    (11, 4, 8, 0),  # farm plus (4,9),(5,8),(5,9),(5,10),(6,9)                time 17
    (12, 8, 5, 180),  # water (8,7),(9,7),(10,5),(10,6),(10,7): row 10 full   time 19
    (13, 6, 4, 0),  # water (6,4),(7,4),(7,5),(7,6),(8,4)                      time 21: autumn
    (14, 0, 8, 0),  # forest (0,8),(0,9),(1,9),(1,10),(2,10): four on the edge time 23
    (15, 1, 3, 0),  # forest (1,3),(1,4),(2,4),(2,5)                          time 25
    (16, 3, 5, 0),  # water (3,5),(3,6),(4,5),(4,6); the deck is spent        time 27
    (1, 6, 5, 0),  # water again after the reshuffle (6,5)-(6,7)              time 29: winter, over
]

# Worked by hand from the plan:
#   spring (A+B): edge 2 ((0,4),(0,5)); sleepy 0                                      = 2
#   summer (B+C): sleepy 4 (row 5); watering 2 (water (0,2) over farm (1,2))           = 6
#   autumn (C+D): watering 4 ((0,2); (10,5) beside farm (10,4)); borderlands 6 (row 10) = 10
#   winter (D+A): borderlands 6; edge 7 ((0,4),(0,5),(5,0),(0,8),(0,9),(1,10),(2,10))   = 13
EXPECTED = {
    "spring": ((("A", 2), ("B", 0)), 2),
    "summer": ((("B", 4), ("C", 2)), 6),
    "autumn": ((("C", 4), ("D", 6)), 10),
    "winter": ((("D", 6), ("A", 7)), 13),
}


def play_the_plan() -> Game:
    """Given the printed deal, when the plan is played (the reshuffle dealt in printed order again)."""
    game = dealt_game()
    for element, row, column, rotation in PLAN:
        spent = game.game.deck == (16,)
        dice = ScriptedDice(shuffle_values(DECK_NUMBERS, DECK_NUMBERS) if spent else [])
        game.play(PlaceElement(row=row, column=column, rotation=rotation, element=element), dice=dice)
    return game


def test_the_scripted_game_reaches_the_hand_computed_scores_per_season_and_card():
    game = play_the_plan()
    seasons = [event for event in game.events if isinstance(event, SeasonEnded)]
    got = {s.name: (tuple((m.card, m.points) for m in s.missions), s.total) for s in seasons}
    assert got == EXPECTED
    assert [s.time for s in seasons] == [7, 14, 21, 29]
    ended = next(event for event in game.events if isinstance(event, GameEnded))
    assert ended.missions == (
        MissionScore(card="A", mission="edge_of_the_forest", points=9),
        MissionScore(card="B", mission="sleepy_valley", points=4),
        MissionScore(card="C", mission="watering_potatoes", points=6),
        MissionScore(card="D", mission="borderlands", points=12),
    )
    assert ended.total == 31 and ended.time == 29
    assert DECIDER.scores(game.game) == {"ada": 31}


def test_the_scripted_game_reshuffles_once_and_ends_the_room():
    game = play_the_plan()
    shuffles = [event for event in game.events if isinstance(event, DeckShuffled)]
    assert shuffles == [DeckShuffled(size=16, order=DECK_NUMBERS)]
    assert isinstance(game.events[-1], RoomEnded) and game.state.ended
    assert game.game.over and game.game.placed == 17 and game.game.shuffles == 1


def test_the_resources_report_points_per_season_and_per_card():
    resources = DECIDER.resources(play_the_plan().game)
    assert [season["total"] for season in resources["per_season"]] == [2, 6, 10, 13]
    assert resources["per_season"][3]["missions"] == {"D": 6, "A": 7}
    assert {card: entry["points"] for card, entry in resources["per_mission"].items()} == {
        "A": 9,
        "B": 4,
        "C": 6,
        "D": 12,
    }
    assert resources["total"] == 31 and resources["time_remaining"] == 0
