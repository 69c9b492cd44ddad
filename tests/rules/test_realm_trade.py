"""Trades step by step: merchants, offers and counter-offers, binding agreement, dice, phantoms, cancellation, escape."""

from __future__ import annotations

import msgspec
from game_modules import game_module
from test_realm_support import Game, faces, of_type

audit = game_module("realm@1", "audit")
realm_events = game_module("realm@1", "events")
trade_side = game_module("realm@1", "rules").trade_side


def open_trade(game: Game, load: dict[str, int], buy: str = "food", want: str = "gold", dice: int = 1) -> str:
    """alice sends a merchant to bob, offers to buy, bob counters, alice agrees; returns the trade id."""
    sent = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": load}, dice=[])
    trade_id = sent[0].trade_id
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": buy, "dice": dice}, dice=[])
    game.send("bob", {"kind": "counter_offer", "trade_id": trade_id, "want": want}, dice=[])
    game.send("alice", {"kind": "agree_trade", "trade_id": trade_id}, dice=[])
    return trade_id


def test_the_seeds_trade_example_a_moon_buys_food_plus_phantom_food_and_a_blank_pays_a_thousand_gold() -> (
    None
):
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    found = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    (rolled,) = of_type(found, realm_events.TradeRolled)
    assert (rolled.buyer.dice, rolled.buyer.counted, rolled.buyer.demanded, rolled.buyer.phantom) == (
        ("moon",),
        1,
        1_000,
        1_000,
    )
    assert (rolled.seller.dice, rolled.seller.counted, rolled.seller.demanded) == (("blank",), 1, 1_000)
    moves = {(t.source, t.target, t.resource, t.amount, t.phantom) for t in rolled.transfers}
    assert moves == {
        ("bob", "alice", "food", 1_000, False),
        (f"merchant:{trade_id}", "bob", "gold", 1_000, False),
        ("", "alice", "food", 1_000, True),
    }
    # alice gets 2,000 food, bob gives only 1,000 of it; bob gets 1,000 gold from the merchant
    assert game.stock("alice", "food") == 12_000 and game.stock("bob", "food") == 9_000
    assert game.stock("bob", "gold") == 3_000 and game.game.merchants[trade_id].load["gold"] == 1_000
    assert rolled.home_after == game.city("alice").stock and rolled.host_after == game.city("bob").stock
    assert rolled.load_after == game.game.merchants[trade_id].load


def test_a_skull_and_two_stars_buy_a_thousand() -> None:
    side = trade_side("alice", "food", ("skull", "star", "star"))
    assert (side.stars, side.skulls, side.counted, side.demanded) == (2, 1, 1, 1_000)
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000}, dice=3)
    found = game.send(
        "bob",
        {"kind": "agree_trade", "trade_id": trade_id},
        dice=faces("skull", "2 star", "blank", "2 skull"),
    )
    (rolled,) = of_type(found, realm_events.TradeRolled)
    assert rolled.buyer.demanded == 1_000 and game.stock("alice", "food") == 11_000
    # no star at all still counts as one: bob takes 1,000 gold
    assert rolled.seller.counted == 1 and game.stock("bob", "gold") == 3_000


def test_a_trade_whose_dice_exceed_the_merchants_load_cancels_and_he_loses_half() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 1_000, "wood": 3_000}, dice=2)
    found = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("2 star", "2 star"))
    rolled, cancelled, returned = (
        of_type(found, realm_events.TradeRolled)[0],
        of_type(found, realm_events.TradeCancelled)[0],
        of_type(found, realm_events.MerchantReturned)[0],
    )
    assert rolled.cancelled and rolled.transfers == () and rolled.seller.demanded == 2_000
    assert cancelled.lost == {"gold": 500, "wood": 1_500}
    assert returned.delivered == {"gold": 500, "wood": 1_500}
    assert game.stock("alice", "gold") == 1_500 and game.stock("alice", "wood") == 2_500
    assert game.stock("alice", "food") == 10_000 and game.stock("bob", "gold") == 2_000
    assert trade_id not in game.game.merchants and game.city("alice").merchant == ""
    lost = [entry for entry in game.game.ledger if entry.target == "lost"]
    assert {(entry.resource, entry.amount) for entry in lost} == {("gold", 500), ("wood", 1_500)}


def test_agreement_is_binding_the_dice_roll_as_soon_as_both_agree() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    found = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "star"))
    assert [type(event) for event in found] == [realm_events.TradeAgreed, realm_events.TradeRolled]
    merchant = game.game.merchants[trade_id]
    assert merchant.agreed == () and merchant.rounds == 1 and merchant.buy == ""


def test_a_new_offer_or_counter_offer_clears_earlier_agreement() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    assert game.game.merchants[trade_id].agreed == ("alice",)
    game.send("bob", {"kind": "counter_offer", "trade_id": trade_id, "want": "wood"}, dice=[])
    assert game.game.merchants[trade_id].agreed == ()
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=[])
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "stone", "pay": "gold"}, dice=[])
    merchant = game.game.merchants[trade_id]
    assert (merchant.agreed, merchant.buy, merchant.want) == ((), "stone", "gold")


def test_the_merchant_stays_for_more_rounds_and_goes_home_when_his_load_runs_out() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "star"))
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "wood", "pay": "gold"}, dice=[])
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=[])
    found = game.send("alice", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "star"))
    (rolled,) = of_type(found, realm_events.TradeRolled)
    (returned,) = of_type(found, realm_events.MerchantReturned)
    assert rolled.round == 2 and rolled.load_after["gold"] == 0 and returned.delivered == {}
    assert trade_id not in game.game.merchants
    assert game.stock("alice", "wood") == 5_000 and game.stock("bob", "gold") == 4_000


def test_declining_sends_the_merchant_home_with_everything() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    found = game.send("bob", {"kind": "decline_trade", "trade_id": trade_id}, dice=[])
    assert [type(event) for event in found] == [realm_events.TradeDeclined, realm_events.MerchantReturned]
    assert game.stock("alice", "gold") == 2_000 and not game.game.merchants


def test_the_host_pays_what_it_holds_and_the_shortfall_is_recorded() -> None:
    game = Game(starting_stock={"iron": 0})
    trade_id = open_trade(game, {"gold": 2_000}, buy="iron")
    found = game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "star"))
    (rolled,) = of_type(found, realm_events.TradeRolled)
    assert rolled.shortfall == 1_000 and game.stock("bob", "iron") == 0


def test_an_npc_village_names_its_price_and_agrees_at_once() -> None:
    game = Game(villages=1)
    sent = game.send(
        "alice", {"kind": "send_merchant", "to": "village-1", "load": {"food": 3_000, "gold": 1_000}}, dice=[]
    )
    trade_id = sent[0].trade_id
    found = game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "wood"}, dice=[])
    assert [type(event) for event in found] == [
        realm_events.TradeOffered,
        realm_events.TradeCountered,
        realm_events.TradeAgreed,
    ]
    assert found[1].want == "food" and found[2].by == "village-1"
    rolled = game.send("alice", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("2 star"))[-1]
    assert game.stock("alice", "wood") == 5_000 and game.stock("village-1", "food") == 9_000
    assert rolled.load_after["food"] == 2_000


def besiege_bob_and_fail(game: Game) -> None:
    """carol attacks bob with 4,000 soldiers and fails: bob is under attack this season, carol keeps 3,000."""
    game.send("carol", {"kind": "raise_army", "soldiers": 3_000}, dice=[])
    game.send("carol", {"kind": "besiege", "target": "bob"}, dice=faces("4 blank", "4 blank"))
    assert game.city("carol").army.soldiers == 3_000 and game.city("bob").attacked_by == "carol"


def test_a_merchant_entering_a_city_under_attack_escapes_with_a_higher_roll() -> None:
    game = Game(players=("alice", "bob", "carol"))
    besiege_bob_and_fail(game)
    found = game.send(
        "alice",
        {"kind": "send_merchant", "to": "bob", "load": {"gold": 2_000}},
        dice=faces("3 blank", "star", "4 blank"),
    )
    (caught,) = of_type(found, realm_events.MerchantIntercepted)
    assert (caught.at, caught.attacker, caught.escaped) == ("bob", "carol", True)
    assert len(caught.merchant_dice) == 5 and caught.seized == {}
    assert found[0].trade_id in game.game.merchants


def test_a_merchant_who_does_not_outroll_the_army_loses_his_load_to_it() -> None:
    game = Game(players=("alice", "bob", "carol"))
    besiege_bob_and_fail(game)
    found = game.send(
        "alice",
        {"kind": "send_merchant", "to": "bob", "load": {"gold": 2_000}},
        dice=faces("star", "2 blank", "5 blank"),
    )
    (caught,) = of_type(found, realm_events.MerchantIntercepted)
    assert not caught.escaped and caught.seized == {"gold": 2_000}
    assert game.stock("carol", "gold") == 4_000 and game.stock("alice", "gold") == 0
    assert not game.game.merchants and game.city("alice").merchant == ""


def test_sending_a_merchant_takes_the_whole_turn_and_replies_are_free() -> None:
    """Given alice's turn is fresh, when she sends a merchant, then it takes her whole turn (every action
    of the season: the seed's "spend a turn sending a merchant"), while offers and agreements stay free."""
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    assert game.game.actions_used == {"alice": game.game.actions_per_season}
    assert game.refused("alice", {"kind": "cut_wood"}).code == "realm.no_actions_left"
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("star", "star"))
    assert game.game.actions_used == {"alice": game.game.actions_per_season}


def test_a_merchant_cannot_be_sent_once_the_turn_has_been_used_for_something_else() -> None:
    """Given alice has cut wood this season, when she sends a merchant, then it is refused: the merchant
    needs a whole turn; next season she may send him."""
    game = Game()
    game.send("alice", {"kind": "cut_wood"}, dice=faces("3 star"))
    error = game.refused("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}})
    assert error.code == "realm.merchant_needs_the_turn"
    game.end_season()
    game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])


def test_trade_steps_are_refused_to_the_wrong_side() -> None:
    game = Game(players=("alice", "bob", "carol"))
    sent = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])
    trade_id = sent[0].trade_id
    assert (
        game.refused("bob", {"kind": "offer_trade", "trade_id": trade_id, "buy": "food"}).code
        == "realm.not_your_merchant"
    )
    assert (
        game.refused("bob", {"kind": "counter_offer", "trade_id": trade_id, "want": "gold"}).code
        == "realm.no_offer"
    )
    assert (
        game.refused("alice", {"kind": "agree_trade", "trade_id": trade_id}).code == "realm.terms_incomplete"
    )
    game.send("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "food"}, dice=[])
    assert (
        game.refused("alice", {"kind": "counter_offer", "trade_id": trade_id, "want": "gold"}).code
        == "realm.not_the_host"
    )
    assert game.refused("carol", {"kind": "agree_trade", "trade_id": trade_id}).code == "realm.not_a_party"
    assert (
        game.refused("alice", {"kind": "offer_trade", "trade_id": trade_id, "buy": "food", "dice": 4}).field
        == "dice"
    )
    assert game.refused("alice", {"kind": "agree_trade", "trade_id": "trade-0"}).code == "realm.unknown_trade"
    game.end_season()
    second = game.refused("alice", {"kind": "send_merchant", "to": "carol", "load": {"food": 1}})
    assert second.code == "realm.merchant_away"


def test_a_merchant_cannot_carry_more_than_the_city_holds_or_nothing() -> None:
    game = Game()
    assert (
        game.refused("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 2_001}}).code
        == "realm.not_enough_gold"
    )
    assert (
        game.refused("alice", {"kind": "send_merchant", "to": "bob", "load": {}}).code == "realm.empty_load"
    )
    assert (
        game.refused("alice", {"kind": "send_merchant", "to": "nowhere", "load": {"gold": 1}}).field == "to"
    )


def test_a_trades_story_and_the_ledger_come_from_the_log_alone() -> None:
    game = Game()
    trade_id = open_trade(game, {"gold": 2_000})
    game.send("bob", {"kind": "agree_trade", "trade_id": trade_id}, dice=faces("moon", "blank"))
    game.send("alice", {"kind": "decline_trade", "trade_id": trade_id}, dice=[])
    events = game.game_events()
    story = audit.trade_story(events, trade_id)
    assert [step["type"] for step in story] == [
        "realm.merchant_sent",
        "realm.trade_offered",
        "realm.trade_countered",
        "realm.trade_agreed",
        "realm.trade_agreed",
        "realm.trade_rolled",
        "realm.trade_declined",
        "realm.merchant_returned",
    ]
    assert [step["step"] for step in story] == list(range(1, 9))
    rolled = story[5]
    assert list(rolled["buyer"]["dice"]) == ["moon"] and rolled["buyer"]["phantom"] == 1_000
    assert "phantom" in rolled["text"] and rolled["home_after"]["food"] == 12_000
    assert audit.trade_ids(events) == [trade_id]
    rows = audit.ledger(events)
    assert {(r["source"], r["target"], r["resource"], r["amount"], r["phantom"]) for r in rows} == {
        ("bob", "alice", "food", 1_000, False),
        (f"merchant:{trade_id}", "bob", "gold", 1_000, False),
        ("phantom", "alice", "food", 1_000, True),
    }
    assert len(game.game.ledger) == 3


def test_an_offer_paying_nothing_but_dice_reads_without_a_stray_comma() -> None:
    """Given alice's merchant at bob's, when she offers to buy food with her dice alone (no pay), then the event's
    text reads 'with 1 dice' (it read 'with , 1 dice'); an offer that pays names what it pays."""
    summarize = game_module("realm@1", "summaries").summarize
    game = Game()
    sent = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 2_000}}, dice=[])
    (offered,) = of_type(game.send("alice", {"kind": "offer_trade", "trade_id": sent[0].trade_id, "buy": "food",
                                             "dice": 1}, dice=[]), realm_events.TradeOffered)
    assert offered.pay == "" and summarize(offered) == f"{offered.trade_id}: alice offered to buy food with 1 dice"
    paying = msgspec.structs.replace(offered, pay="wood")
    assert summarize(paying) == f"{offered.trade_id}: alice offered to buy food with wood, 1 dice"
