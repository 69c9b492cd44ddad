"""Setup, seats, turns and seasons: no action runs out of turn or out of season; the timeout; the end of the game."""

from __future__ import annotations

import pytest
from game_modules import game_module
from test_realm_support import Game, faces, of_type

from almanac.events.errors import RuleError

realm_events = game_module("realm@1", "events")


def test_options_default_to_two_seats_and_one_village() -> None:
    game = Game(players=("alice", "bob"))
    assert game.game.players == ("alice", "bob")
    assert list(game.game.cities) == ["alice", "bob", "village-1"]
    alice = game.city("alice")
    assert (alice.population, alice.hit_points, alice.army.soldiers, alice.stock["food"]) == (
        5_000,
        10,
        1_000,
        10_000,
    )


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"players": ["solo"]}, "realm.invalid_players"),
        ({"players": ["a", "a"]}, "realm.invalid_players"),
        ({"players": ["a", "village-1"]}, "realm.invalid_players"),
        ({"players": ["a", "b"], "starting_stock": {"mithril": 5}}, "realm.invalid_stock"),
        # Numbers out of their declared range are refused by the schema before the rules look.
        ({"players": ["a", "b"], "villages": 9}, "invalid_options"),
        ({"players": ["a", "b"], "years": 0}, "invalid_options"),
    ],
)
def test_invalid_setups_are_refused(options: dict[str, object], code: str) -> None:
    with pytest.raises(RuleError) as refused:
        Game(players=options.pop("players"), **options)  # type: ignore[arg-type]
    assert refused.value.code == code


def test_only_seated_players_may_join() -> None:
    game = Game()
    assert game.refused("mallory", {"kind": "join_room"}).code == "no_seat"


def test_no_action_after_the_player_has_ended_the_turn() -> None:
    game = Game()
    game.send("alice", {"kind": "end_turn"}, dice=[])
    assert game.refused("alice", {"kind": "cut_wood"}).code == "realm.turn_ended"
    assert game.refused("alice", {"kind": "end_turn"}).code == "realm.turn_ended"
    game.send("bob", {"kind": "cut_wood"}, dice=faces("3 star"))


def test_no_more_actions_than_the_season_allows() -> None:
    game = Game()
    for _ in range(3):
        game.send("alice", {"kind": "cut_wood"}, dice=faces("3 blank"))
    error = game.refused("alice", {"kind": "cut_wood"})
    assert error.code == "realm.no_actions_left"
    game.end_season()
    game.send("alice", {"kind": "cut_wood"}, dice=faces("3 blank"))


def test_trade_replies_need_an_open_turn() -> None:
    game = Game()
    trade_id = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])[
        0
    ].trade_id
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "food"}, dice=[])
    game.send("bob", {"kind": "end_turn"}, dice=[])
    error = game.refused("bob", {"kind": "counter_offer", "trade_id": trade_id, "want": "gold"})
    assert error.code == "realm.turn_ended"


def test_the_season_advances_when_every_player_has_ended_the_turn() -> None:
    game = Game(villages=1)
    first = game.send("alice", {"kind": "end_turn"}, dice=[])
    assert [type(e) for e in first] == [realm_events.TurnEnded] and game.game.season_index == 0
    second = game.send("bob", {"kind": "end_turn"}, dice=[], now_ms=9_000)
    assert [type(e) for e in second] == [
        realm_events.TurnEnded,
        realm_events.VillageProduced,
        realm_events.SeasonEnded,
    ]
    assert (second[-1].season, second[-1].year, second[-1].at_ms) == ("spring", 1, 9_000)
    assert game.game.season_index == 1 and game.game.actions_used == {} and game.game.turn_ended == ()
    assert game.game.season_started_ms == 9_000


def test_a_season_may_be_forced_to_end_only_after_its_timeout_of_server_time() -> None:
    game = Game(season_timeout_ms=60_000)
    game.now_ms = 60_999
    error = game.refused("alice", {"kind": "end_season"})
    assert error.code == "realm.season_not_timed_out" and "1 ms" in error.message
    found = game.send("alice", {"kind": "end_season"}, dice=[], now_ms=61_000)
    assert found[-1].forced_by == "alice" and game.game.season_index == 1


def test_the_game_ends_after_the_last_winter_and_refuses_further_moves() -> None:
    game = Game(years=1)
    for _ in range(4):
        game.end_season()
    assert game.game.over and game.state.ended
    assert game.refused("alice", {"kind": "cut_wood"}).code == "room_ended"


def test_a_player_who_is_not_seated_cannot_act_in_the_rules_either() -> None:
    from almanac.events.decider import Context
    from almanac.events.dice import ScriptedDice
    DECIDER = game_module("realm@1", "game").DECIDER
    CutWood = game_module("realm@1", "commands").CutWood

    game = Game()
    ctx = Context(room="r", player="mallory", now_ms=0, version=9, dice=ScriptedDice([]))
    with pytest.raises(RuleError) as refused:
        DECIDER.decide(game.game, CutWood(), ctx)
    assert refused.value.code == "realm.not_a_player"


def test_unknown_commands_and_fields_are_refused_by_the_codec() -> None:
    game = Game()
    assert game.refused("alice", {"kind": "fly"}).code == "unknown_command"
    assert game.refused("alice", {"kind": "mine"}).code == "invalid_command"


def test_villages_produce_each_season_without_dice() -> None:
    game = Game(villages=2)
    found = game.end_season()
    produced = of_type(found, realm_events.VillageProduced)
    assert [e.city for e in produced] == ["village-1", "village-2"]
    assert game.stock("village-1", "food") == 9_000
