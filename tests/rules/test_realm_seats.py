"""Who sits at a realm room: its creator always has a city, beside the players the options name."""

from __future__ import annotations

import pytest
from game_modules import game_module
from test_realm_support import Game

from almanac.events.errors import RuleError

DECIDER = game_module("realm@1", "game").DECIDER


def test_a_room_nina_creates_with_no_options_seats_her_beside_alice_and_bob():
    game = Game.created_by("nina", {})
    assert DECIDER.seats(game.game) == ("nina", "alice", "bob")
    assert set(game.game.cities) >= {"nina", "alice", "bob"}
    assert [type(e).__name__ for e in game.send("nina", {"kind": "join_room"})] == ["PlayerJoined"]


def test_the_creator_named_among_the_players_is_seated_once_in_the_order_given():
    game = Game.created_by("bob", {"players": ["alice", "bob"]})
    assert DECIDER.seats(game.game) == ("alice", "bob")


def test_a_creator_alone_is_refused_with_a_clear_message():
    with pytest.raises(RuleError) as refused:
        Game.created_by("alice", {"players": ["alice"]})
    assert refused.value.code == "realm.invalid_players"
    assert "two or more" in refused.value.message
