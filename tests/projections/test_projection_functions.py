"""Pure projection functions: rows depend only on the final state, never on how events were batched."""

from __future__ import annotations

from game_driver import PureRoom
from hypothesis import given, settings, strategies as st
from projection_games import BAZAAR  # noqa: F401 - registers the trading rule-set

from almanac.events import codec, room as room_rules
from almanac.events.room import RoomState
from almanac.projections.read_model_rows import leaderboard_scores, project_room, room_listing


def counter_game(moves: int = 9) -> PureRoom:
    game = PureRoom("c1")
    game.send("alice", {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["alice", "bob"]}})
    game.send("alice", {"kind": "join_room"}, now_ms=1_500)
    for index in range(moves):
        body = {"kind": "add", "amount": index + 1} if index % 3 else {"kind": "roll", "dice": 2}
        game.send("alice", body, now_ms=2_000 + index, command_id=f"c{index}")
    return game


def bazaar_game() -> PureRoom:
    game = PureRoom("b1")
    game.send("alice", {"kind": "create_room", "ruleset": "bazaar"})
    game.send("alice", {"kind": "join_room"})
    game.send("bob", {"kind": "join_room"})
    game.send("alice", {"kind": "offer", "trade_id": "t1", "to": "bob", "gold": 50}, now_ms=3_000)
    game.send("alice", {"kind": "settle", "trade_id": "t1"}, now_ms=4_000)
    return game


def decoded(game: PureRoom) -> list:
    return [(envelope, codec.decode_event(envelope)) for envelope in game.envelopes]


def folded(game: PureRoom, upto: int) -> RoomState | None:
    state = None
    for envelope, event in decoded(game)[:upto]:
        state = room_rules.evolve(state, event, envelope.room, envelope.version)
    return state


def test_a_room_summary_names_ruleset_players_version_scores_resources_and_progress():
    game = counter_game()
    update = project_room(None, game.state, decoded(game))
    total = game.state.game.total
    assert update.summary == {
        "room": "c1", "ruleset": "counter", "ruleset_version": 1, "version": game.version, "players": ["alice"],
        "scores": {"alice": total, "bob": total}, "resources": {"total": total}, "over": False,
        "ended": False, "end_reason": "", "challenge": None, "created_by": "alice", "created_at_ms": 1_000,
        "updated_at_ms": game.envelopes[-1].server_time_ms, "fork": None,  # a real room, not a sandbox fork
    }
    assert update.listing == room_listing(update.summary)
    assert "scores" not in update.listing and update.listing["version"] == game.version
    assert update.rows == {} and update.ledgers == {}  # the counter rule-set declares no read models


def test_an_ended_room_shows_as_ended_and_its_scores_stay_on_the_leaderboard():
    game = counter_game(3)
    game.send("alice", {"kind": "end_room", "reason": "bedtime"}, now_ms=9_000)
    update = project_room(None, game.state, decoded(game))
    assert update.summary["ended"] and update.summary["end_reason"] == "bedtime"
    assert update.scores == leaderboard_scores(game.state)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=6))
def test_any_batching_of_the_same_events_ends_in_the_same_rows(cuts):
    game = bazaar_game()
    events = decoded(game)
    whole = project_room(None, game.state, events)
    bounds = sorted({min(c, len(events)) for c in cuts} | {len(events)})
    start, rows, last = 0, [], None
    for end in bounds:
        if end <= start:
            continue
        last = project_room(folded(game, start), folded(game, end), events[start:end])
        rows += last.ledgers.get("bazaar_trades", [])
        start = end
    assert (last.summary, last.listing, last.scores) == (whole.summary, whole.listing, whole.scores)
    assert rows == whole.ledgers["bazaar_trades"]


def test_a_trade_step_becomes_one_row_of_the_rule_sets_ledger_read_model_at_its_version():
    game = bazaar_game()
    events = decoded(game)
    update = project_room(folded(game, 4), game.state, events[4:])
    ((version, row),) = update.ledgers["bazaar_trades"]
    assert version == 5
    assert (row["room"], row["version"], row["trade"], row["type"], row["player"], row["time_ms"]) == (
        "b1", 5, "t1", "bazaar.trade_settled", "alice", 4_000)
    assert set(row["detail"]) == {"trade_id", "dice", "stars", "transfers", "holdings_after"}
    assert row["summary"] == "bazaar.trade_settled t1"


def test_a_player_who_no_longer_scores_in_a_room_is_dropped_from_its_leaderboard_entry():
    game = bazaar_game()
    before = game.state
    # A later state where bob no longer holds anything: his (bob, room) entry must go.
    after = RoomState(**{**{f: getattr(before, f) for f in RoomState.__struct_fields__},
                         "game": before.game.__class__(purse=100, holdings={"alice": 150})})
    update = project_room(before, after, [])
    assert update.dropped_players == ("bob",) and update.scores == {"alice": 150}


def test_only_claim_rooms_enter_the_claim_registry_the_claim_manifest_declares():
    counter = counter_game(1)
    assert "claims" not in project_room(None, counter.state, decoded(counter)).rows
    claim = PureRoom("claim-1")
    claim.send("alice", {"kind": "create_room", "ruleset": "claim", "options": {"block": "Creek"}}, now_ms=86_400_000)
    row = project_room(None, claim.state, decoded(claim)).rows["claims"]
    assert (row["owner"], row["block"], row["room"], row["parcel_count"]) == ("alice", "Creek", "claim-1", 64)
    assert {"name", "zone", "species", "building"} == set(row["parcels"][0])
