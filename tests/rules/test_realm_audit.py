"""Trades auditable from the log alone: every step's dice, stars, phantoms, transfers and both sides' holdings;
the story and the ledger rebuilt from decoded envelopes; and what redaction and views let each player see."""

from __future__ import annotations

from typing import Any

import msgspec
from game_modules import game_module
from test_realm_support import Game, faces, of_type

from almanac.events import codec, room as room_rules
from almanac.events.disclosure import HIDDEN

DECIDER = game_module("realm@1", "game").DECIDER
audit = game_module("realm@1", "audit")
realm_events = game_module("realm@1", "events")

TRADE_STEPS = audit.TRADE_EVENTS


def open_trade(game: Game, load: dict[str, int], dice: int = 1, buy: str = "food", want: str = "gold") -> str:
    trade_id = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": load}, dice=[])[0].trade_id
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": buy, "dice": dice}, dice=[])
    game.send("bob", {"kind": "counter_offer", "trade_id": trade_id, "want": want}, dice=[])
    game.send("alice", {"kind": "agree_trade", "trade_id": trade_id}, dice=[])
    return trade_id


def full_trade(game: Game) -> str:
    """Two rounds (the seed's moon/blank example, then a cancellation) on one merchant, then home."""
    trade_id = open_trade(game, {"gold": 2_000, "wood": 1_000})
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    game.send(
        "alice",
        {"kind": "offer_trade", "trade_id": trade_id, "buy": "stone", "pay": "wood", "dice": 2},
        dice=[],
    )
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=[])
    # bob's two stars demand 2,000 wood; the merchant carries 1,000: cancelled, half of the load lost
    game.send("alice", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "blank", "2 star"))
    return trade_id


def test_every_trade_step_records_both_sides_holdings_after_and_what_moved() -> None:
    """Given a full trade, when each step is applied, then the step's home, host and merchant holdings
    equal the live state right after it, and its transfers name who gave what to whom."""
    game = Game()
    trade_id = full_trade(game)
    checked = 0
    state = None
    for envelope, event in zip(game.envelopes, game.events, strict=True):
        state = room_rules.evolve(state, event, envelope.room, envelope.version)
        if not isinstance(event, TRADE_STEPS):
            continue
        realm = state.game
        assert event.home_after == realm.cities["alice"].stock, type(event)
        assert event.host_after == realm.cities["bob"].stock, type(event)
        load = realm.merchants[trade_id].load if trade_id in realm.merchants else None
        if load is not None:
            assert event.load_after == load, type(event)
        else:
            assert not any(event.load_after.values()), type(event)
        assert (audit.home_of(event), audit.host_of(event)) == ("alice", "bob")
        checked += 1
    assert checked == len(audit.trade_story(game.game_events(), trade_id)) == 12
    sent, cancelled, returned = (
        of_type(game.events, realm_events.MerchantSent)[0],
        of_type(game.events, realm_events.TradeCancelled)[0],
        of_type(game.events, realm_events.MerchantReturned)[0],
    )
    cart = f"merchant:{trade_id}"
    moves = lambda event: {(t.source, t.target, t.resource, t.amount) for t in event.transfers}  # noqa: E731
    assert moves(sent) == {("alice", cart, "gold", 2_000), ("alice", cart, "wood", 1_000)}
    assert moves(cancelled) == {(cart, "lost", "gold", 500), (cart, "lost", "wood", 500)}
    assert moves(returned) == {(cart, "alice", "gold", 500), (cart, "alice", "wood", 500)}


def decoded_log(game: Game) -> list[Any]:
    """The room's events as an auditor gets them: decoded from the stored envelopes, nothing else."""
    stored = [(e.room, e.version, codec.encode_envelope(e)) for e in game.envelopes]
    return [codec.decode_event(codec.decode_envelope(data, room, version)) for room, version, data in stored]


def test_a_full_trades_story_is_rebuilt_from_the_decoded_log_alone() -> None:
    """Given only the stored envelopes of a room, when an auditor asks for a trade's story, then every step
    is there with its dice, counted stars, phantoms, transfers and holdings, the arithmetic checks out,
    and replaying the transfers from the first step's holdings reproduces every later step's holdings."""
    game = Game()
    trade_id = full_trade(game)
    events = decoded_log(game)
    story = audit.trade_story(events, trade_id)
    assert [step["type"] for step in story] == [
        "realm.merchant_sent",
        "realm.trade_offered",
        "realm.trade_countered",
        "realm.trade_agreed",
        "realm.trade_agreed",
        "realm.trade_rolled",
        "realm.trade_offered",
        "realm.trade_agreed",
        "realm.trade_agreed",
        "realm.trade_rolled",
        "realm.trade_cancelled",
        "realm.merchant_returned",
    ][: len(story)] and len(story) == 12
    first = story[5]
    assert list(first["buyer"]["dice"]) == ["moon"] and first["buyer"]["counted"] == 1
    assert first["buyer"]["phantom"] == 1_000 and list(first["seller"]["dice"]) == ["blank"]
    assert {
        (t["source"], t["target"], t["resource"], t["amount"], t["phantom"]) for t in first["transfers"]
    } == {
        ("bob", "alice", "food", 1_000, False),
        (f"merchant:{trade_id}", "bob", "gold", 1_000, False),
        ("", "alice", "food", 1_000, True),
    }
    assert audit.check_trade(events, trade_id) == []
    # Holdings rebuilt from the story alone: the first step's holdings plus each step's transfers.
    holdings = audit.replay_holdings(events, trade_id)
    assert holdings[-1] == {
        "alice": game.city("alice").stock,
        "bob": game.city("bob").stock,
        f"merchant:{trade_id}": {name: 0 for name in game.city("alice").stock},
    }
    text = audit.story_text(events, trade_id)
    for fact in ("moon", "phantom", "1000 food from bob to alice", "cancelled", "lost", "home in alice"):
        assert fact in text, fact
    # The ledger the state keeps is the ledger the log tells.
    assert [msgspec_row(row) for row in game.game.ledger] == audit.ledger(events)


def msgspec_row(row: Any) -> dict[str, Any]:
    return msgspec.to_builtins(row)


def test_a_forged_step_is_caught_by_the_audit() -> None:
    """Given a trade log, when one recorded count disagrees with its dice, then the audit names the step."""
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    events = decoded_log(game)
    index = next(i for i, e in enumerate(events) if isinstance(e, realm_events.TradeRolled))
    rolled = events[index]
    forged_side = msgspec.structs.replace(rolled.buyer, counted=2, demanded=2_000)
    events[index] = msgspec.structs.replace(rolled, buyer=forged_side)
    problems = audit.check_trade(events, trade_id)
    assert problems and "step 6" in problems[0]


def test_a_seized_merchants_goods_are_in_the_state_ledger_as_in_the_logs() -> None:
    game = Game(players=("alice", "bob", "carol"))
    game.send("carol", {"kind": "raise_army", "soldiers": 3_000}, dice=[])
    game.send("carol", {"kind": "besiege", "target": "bob"}, dice=faces("4 blank", "4 blank"))
    game.send(
        "alice",
        {"kind": "send_merchant", "to": "bob", "load": {"gold": 2_000}},
        dice=faces("star", "2 blank", "5 blank"),
    )
    (row,) = game.game.ledger
    assert (row.source, row.target, row.resource, row.amount) == ("merchant:trade-7", "carol", "gold", 2_000)
    assert [msgspec_row(r) for r in game.game.ledger] == audit.ledger(decoded_log(game))


def test_each_side_sees_its_own_ledger_rows_including_its_merchants() -> None:
    """Given the seed's example trade, when alice and bob look at their views, then each sees every row
    of the trade it is party to (alice's merchant's payments too) and carol sees none."""
    game = Game(players=("alice", "bob", "carol"))
    trade_id = open_trade(game, {"gold": 2_000})
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    rows = {(r["source"], r["target"]) for r in DECIDER.view(game.game, "alice")["ledger"]}
    assert rows == {("bob", "alice"), (f"merchant:{trade_id}", "bob"), ("phantom", "alice")}
    assert len(DECIDER.view(game.game, "bob")["ledger"]) == 3
    assert DECIDER.view(game.game, "carol")["ledger"] == []


def test_a_party_sees_its_own_holdings_and_the_trade_but_not_the_other_sides_storage() -> None:
    """Given a trade round between alice and bob watched by carol, when each redacts the events, then alice
    sees her holdings and the merchant's, bob his own and the merchant's, carol neither nor the transfers."""
    game = Game(players=("alice", "bob", "carol"))
    trade_id = open_trade(game, {"gold": 2_000})
    (_, rolled) = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    for_alice, for_bob, for_carol = (DECIDER.redact(rolled, p) for p in ("alice", "bob", "carol"))
    assert for_alice.home_after == rolled.home_after and for_alice.host_after is HIDDEN
    assert for_bob.host_after == rolled.host_after and for_bob.home_after is HIDDEN
    assert for_alice.transfers == for_bob.transfers == rolled.transfers
    assert for_alice.load_after == for_bob.load_after == rolled.load_after
    assert (for_carol.home_after, for_carol.host_after, for_carol.load_after, for_carol.transfers) == (
        HIDDEN,
        HIDDEN,
        HIDDEN,
        HIDDEN,
    )
    for event in game.game_events():
        if isinstance(event, TRADE_STEPS):
            assert DECIDER.redact(event, "bob").home_after is HIDDEN
            assert DECIDER.redact(event, "alice").host_after is HIDDEN
            assert DECIDER.redact(event, "carol").load_after is HIDDEN


def test_healing_reveals_no_herbs_to_others() -> None:
    game = Game()
    game.send("alice", {"kind": "raise_army", "soldiers": 4_000}, dice=[])
    game.send("alice", {"kind": "besiege", "target": "bob"}, dice=faces("5 star", "4 blank"))
    game.end_season()
    (healed,) = game.send("bob", {"kind": "heal_army", "points": 1}, dice=[])
    hidden = DECIDER.redact(healed, "alice")
    assert (hidden.points, hidden.herbs, hidden.damage_after) == (HIDDEN, HIDDEN, HIDDEN)
    assert DECIDER.redact(healed, "bob") == healed
