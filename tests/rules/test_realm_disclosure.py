"""What a rival may learn in the realm: public scores, a cancelled trade, a trade roll, and the hidden marker."""

from __future__ import annotations

import msgspec
from game_modules import game_module
from test_realm_audit import full_trade, open_trade
from test_realm_support import Game, faces, of_type

from almanac.events import codec
from almanac.projections.read_model_rows import leaderboard_scores, room_summary

DECIDER = game_module("realm@1", "game").DECIDER
realm_events = game_module("realm@1", "events")

HIDDEN_JSON = {"hidden": True}


def as_json(event: object) -> dict:
    return msgspec.json.decode(codec.to_json(event))


def test_public_scores_do_not_move_when_a_city_finds_food_wood_or_herbs() -> None:
    """Given three cities, when alice forages, cuts wood and finds herbs, then her score moves but the
    scores anyone may read (the /scores route, the room summary, the leaderboards) do not."""
    game = Game(players=("alice", "bob", "carol"))
    before = leaderboard_scores(game.state)
    full_before = DECIDER.scores(game.game)
    game.send("alice", {"kind": "get_food", "method": "gather", "moon": "double"}, dice=faces("2 star", "blank"))
    game.send("alice", {"kind": "cut_wood"}, dice=faces("3 star"))
    game.send("alice", {"kind": "find_herbs"}, dice=faces("3 star", "3 blank"))
    assert DECIDER.scores(game.game)["alice"] > full_before["alice"]
    assert leaderboard_scores(game.state) == before
    assert room_summary(game.state, 0)["scores"] == before
    assert DECIDER.view(game.game, "carol")["scores"] == before
    assert DECIDER.view(game.game, "alice")["own_score"] == DECIDER.scores(game.game)["alice"]
    assert DECIDER.public_scores(game.game) == before


def test_public_scores_follow_what_everyone_sees_and_are_complete_once_the_game_is_over() -> None:
    game = Game(players=("alice", "bob", "carol"), years=1)
    game.send("alice", {"kind": "cut_wood"}, dice=faces("3 star"))
    assert DECIDER.public_scores(game.game) != DECIDER.scores(game.game)
    while not game.game.over:
        game.end_season()
    assert DECIDER.public_scores(game.game) == DECIDER.scores(game.game)


def test_a_cancelled_trade_tells_an_outsider_neither_the_demand_nor_the_load() -> None:
    """Given a trade cancelled because bob's dice demand more wood than the merchant carries, when carol reads
    it, then the reason (which names both amounts) is hidden like the loads; the parties read it whole."""
    game = Game(players=("alice", "bob", "carol"))
    full_trade(game)
    (cancelled,) = of_type(game.events, realm_events.TradeCancelled)
    assert "2000" in cancelled.reason and "1000" in cancelled.reason
    for_carol = as_json(DECIDER.redact(cancelled, "carol"))
    assert for_carol["reason"] == HIDDEN_JSON
    assert not any(str(n) in msgspec.json.encode(for_carol).decode() for n in (2000, 1000, 1500, 500))
    assert DECIDER.redact(cancelled, "bob").reason == cancelled.reason


def test_an_outsiders_copy_of_a_trade_roll_keeps_nothing_the_transfers_follow_from() -> None:
    """Given a trade round, when carol reads it, then both sides' dice, stars, demands and phantom goods are
    hidden with the transfers; she sees which trade, which round and whether it was cancelled."""
    game = Game(players=("alice", "bob", "carol"))
    trade_id = open_trade(game, {"gold": 2_000})
    (_, rolled) = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    for_carol = as_json(DECIDER.redact(rolled, "carol"))
    public = {k for k, v in for_carol.items() if v != HIDDEN_JSON}
    assert public == {"type", "trade_id", "round", "cancelled"}
    assert DECIDER.redact(rolled, "alice").seller == rolled.seller


def test_a_hidden_field_is_marked_hidden_never_shown_as_a_plausible_zero() -> None:
    """Given alice rolls no star (a real zero), when bob reads the event, then her stars, dice and find read
    {"hidden": true}, which no real value can be; alice reads her zero."""
    game = Game(players=("alice", "bob", "carol"))
    (mined,) = game.send("alice", {"kind": "mine", "ore": "gold"}, dice=faces("8 blank"))
    assert mined.stars == 0
    for_bob = as_json(DECIDER.redact(mined, "bob"))
    for field in ("amount", "stars", "dice", "outcome", "found"):
        assert for_bob[field] == HIDDEN_JSON, field
    assert for_bob["city"] == "alice" and for_bob["ore"] == "gold"
    assert as_json(DECIDER.redact(mined, "alice"))["stars"] == 0

