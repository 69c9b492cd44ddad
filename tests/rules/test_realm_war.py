"""Armies, raids, sieges, pillage, surrender and tax, the ways out of control, and restarting a destroyed city."""

from __future__ import annotations

from game_modules import game_module
from test_realm_support import Game, faces, of_type

realm_events = game_module("realm@1", "events")


def raid(
    game: Game, dice: list[int], player: str = "alice", target: str = "bob", resource: str = "food"
) -> realm_events.Raided:
    found = game.send(player, {"kind": "raid", "target": target, "resource": resource}, dice=dice)
    (event,) = of_type(found, realm_events.Raided)
    return event


def conquer(game: Game, if_taken: str) -> list[object]:
    """alice raises 4,000 more soldiers (five dice) and takes bob's ten hit points in two sieges."""
    game.send("alice", {"kind": "raise_army", "soldiers": 4_000}, dice=[])
    # bob defends with the townsfolk, his army and two dice of walls: 5 stars against 4 blanks
    first = game.send(
        "alice", {"kind": "besiege", "target": "bob", "if_taken": if_taken}, dice=faces("5 star", "4 blank")
    )
    assert first[0].hit_points_after == 5 and game.city("bob").army.damage == 1
    # now the townsfolk and one die of walls (his damaged army rolls none)
    return game.send(
        "alice", {"kind": "besiege", "target": "bob", "if_taken": if_taken}, dice=faces("5 star", "2 blank")
    )


def test_a_failed_raid_costs_a_quarter_of_the_troops_rounded_down_to_the_hundred() -> None:
    game = Game()
    game.send("alice", {"kind": "raise_army", "soldiers": 500}, dice=[])
    event = raid(game, faces("blank", "star", "3 blank"))
    assert not event.battle.attacker_won
    assert (event.battle.troops_lost, event.battle.army_after) == (300, 1_200)  # 375 -> 300
    assert game.city("alice").army.soldiers == 1_200
    assert game.city("bob").stock["food"] == 10_000


def test_an_army_under_a_thousand_disbands_into_the_population() -> None:
    game = Game()
    game.send("alice", {"kind": "raise_army", "soldiers": 200}, dice=[])
    assert game.city("alice").population == 4_800
    event = raid(game, faces("blank", "star", "3 blank"))
    assert (event.battle.troops_lost, event.battle.disbanded) == (300, True)
    assert game.city("alice").army is None
    assert game.city("alice").population == 4_800 + 900


def test_a_won_raid_takes_half_of_the_resource() -> None:
    game = Game()
    event = raid(game, faces("star", "4 blank"), resource="food")
    assert event.battle.attacker_won and event.taken == 5_000
    assert game.stock("alice", "food") == 15_000 and game.stock("bob", "food") == 5_000
    assert game.city("bob").attacked_season == 0 and game.city("bob").attacked_by == "alice"


def test_the_defender_wins_ties() -> None:
    event = raid(Game(), faces("star", "star", "3 blank"))
    assert (event.battle.attack_score, event.battle.defence_score, event.battle.attacker_won) == (1, 1, False)


def test_bronze_adds_a_die_unless_the_other_army_wears_bronze_or_better() -> None:
    game = Game(starting_stock={"smelted_bronze": 1_000, "smelted_iron": 1_000})
    game.send("alice", {"kind": "equip_army", "tier": "bronze"}, dice=[])
    armed = raid(game, faces("2 star", "4 blank"))
    assert (armed.battle.attack_bonus, len(armed.battle.attack_dice), armed.battle.attacker_won) == (
        1,
        2,
        True,
    )
    game.send("bob", {"kind": "equip_army", "tier": "bronze"}, dice=[])
    # bob's army took a point of damage: townsfolk and walls only, 1 + 2
    matched = raid(game, faces("star", "3 blank"))
    assert (matched.battle.attack_bonus, matched.battle.defence_bonus, len(matched.battle.attack_dice)) == (
        0,
        0,
        1,
    )
    game.send("bob", {"kind": "equip_army", "tier": "iron"}, dice=[])
    game.end_season()
    # bob's iron armour now adds two defence dice against alice's bronze: 1 + 0 + 2 walls + 2
    outclassed = raid(game, faces("star", "5 blank"))
    assert (outclassed.battle.attack_bonus, outclassed.battle.defence_bonus) == (0, 2)
    assert len(outclassed.battle.defence_dice) == 5


def test_weapons_add_nothing_against_a_city_without_an_army() -> None:
    # The seed: bronze weapons add "+1 to attack rolls against armies". Given bob has sent his army home,
    # when alice's bronze-armed thousand raid him, then she rolls her one die only, against the
    # townsfolk's die and two dice of walls.
    game = Game(starting_stock={"smelted_bronze": 1_000})
    game.send("bob", {"kind": "dismiss_army"}, dice=[])
    game.send("alice", {"kind": "equip_army", "tier": "bronze"}, dice=[])
    unopposed = raid(game, faces("star", "3 blank"))
    assert (unopposed.battle.attack_bonus, len(unopposed.battle.attack_dice)) == (0, 1)
    assert len(unopposed.battle.defence_dice) == 3 and unopposed.battle.attacker_won


def test_pillaging_a_city_of_five_thousand_food_yields_two_thousand_five_hundred() -> None:
    game = Game(starting_stock={"food": 5_000})
    found = conquer(game, "destroy")
    (destroyed,) = of_type(found, realm_events.CityDestroyed)
    assert destroyed.plunder["food"] == 2_500 and destroyed.lost["food"] == 2_500
    assert game.stock("alice", "food") == 5_000 + 2_500
    bob = game.city("bob")
    assert bob.destroyed and bob.army is None and sum(bob.stock.values()) == 0


def test_a_destroyed_city_may_only_restart_with_a_tenth_of_the_others_and_a_years_immunity() -> None:
    game = Game(players=("alice", "bob", "carol"))
    conquer(game, "destroy")
    assert game.refused("bob", {"kind": "cut_wood"}).code == "realm.city_destroyed"
    restarted = game.send("bob", {"kind": "restart_city"}, dice=[])[0]
    alice, carol = game.city("alice").stock, game.city("carol").stock
    expected = (alice["food"] + carol["food"]) // 10 // 100 * 100
    assert restarted.stock["food"] == expected and restarted.immune_until_season == 4
    assert game.city("bob").hit_points == 10 and not game.city("bob").destroyed
    assert game.refused("carol", {"kind": "raid", "target": "bob", "resource": "food"}).code == "realm.immune"
    assert game.refused("bob", {"kind": "restart_city"}).code == "realm.not_destroyed"


def test_a_destroyed_hosts_visiting_merchants_go_home() -> None:
    game = Game(players=("alice", "bob", "carol"))
    game.send("carol", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])
    found = conquer(game, "destroy")
    (returned,) = of_type(found, realm_events.MerchantReturned)
    assert returned.home == "carol" and returned.delivered == {"gold": 1_000}
    assert game.stock("carol", "gold") == 2_000 and not game.game.merchants


def test_a_surrendered_village_pays_half_its_stock_in_the_season_its_controller_names() -> None:
    game = Game(villages=1)
    game.send("alice", {"kind": "raise_army", "soldiers": 4_000}, dice=[])
    found = game.send(
        "alice",
        {"kind": "besiege", "target": "village-1", "if_taken": "tax"},
        dice=faces("5 star", "3 blank"),
    )
    assert of_type(found, realm_events.CitySurrendered)[0].to == "alice"
    assert game.city("village-1").controller == "alice" and game.city("village-1").hit_points == 1
    # No season stated in the year of the surrender: the village pays in fall.
    game.go_to("fall")
    food_before = game.stock("alice", "food")
    (tax,) = of_type(game.end_season(), realm_events.TaxCollected)
    # 8,000 food, plus 1,000 produced at the end of spring, summer and fall: 11,000, half paid
    assert tax.season == "fall" and tax.amounts["food"] == 5_500
    assert game.stock("alice", "food") == food_before + 5_500
    assert game.stock("village-1", "food") == 5_500
    game.go_to("spring")
    # In the new year alice states the season at the start of her turn.
    game.send("alice", {"kind": "choose_tax_season", "city": "village-1", "season": "summer"}, dice=[])
    again = game.refused("alice", {"kind": "choose_tax_season", "city": "village-1", "season": "winter"})
    assert again.code == "realm.tax_season_already_chosen"
    assert not of_type(game.end_season(), realm_events.TaxCollected)
    (tax,) = of_type(game.end_season(), realm_events.TaxCollected)
    assert tax.season == "summer"


def test_the_tax_season_is_stated_at_the_start_of_the_controllers_turn_in_the_new_year() -> None:
    """Given alice controls village-1, when she tries to state the tax season later in the year or after
    acting in spring, then it is refused: the seed has her state it "at the start of their turn in the new
    year"; the village then pays in fall."""
    game = Game(villages=1)
    game.send("alice", {"kind": "raise_army", "soldiers": 4_000}, dice=[])
    game.send(
        "alice",
        {"kind": "besiege", "target": "village-1", "if_taken": "tax"},
        dice=faces("5 star", "3 blank"),
    )
    game.end_season()
    summer = game.refused("alice", {"kind": "choose_tax_season", "city": "village-1", "season": "fall"})
    assert summer.code == "realm.tax_season_at_year_start"
    game.go_to("spring")
    game.send("alice", {"kind": "cut_wood"}, dice=faces("3 star"))
    late = game.refused("alice", {"kind": "choose_tax_season", "city": "village-1", "season": "winter"})
    assert late.code == "realm.tax_season_at_year_start"


def test_only_the_controller_chooses_the_tax_season() -> None:
    game = Game(villages=1)
    error = game.refused("bob", {"kind": "choose_tax_season", "city": "village-1", "season": "fall"})
    assert error.code == "realm.not_your_vassal"


def test_a_surrendered_city_buys_its_freedom_for_five_thousand_gold() -> None:
    game = Game(starting_stock={"gold": 5_000})
    conquer(game, "tax")
    assert game.city("bob").controller == "alice"
    event = game.send("bob", {"kind": "buy_freedom"}, dice=[])[0]
    assert event.gold == 5_000 and game.city("bob").controller == ""
    assert game.stock("alice", "gold") == 10_000 and game.stock("bob", "gold") == 0


def test_sabotage_with_two_stars_frees_a_city() -> None:
    game = Game()
    conquer(game, "tax")
    failed = game.send("bob", {"kind": "sabotage"}, dice=faces("star", "2 blank"))[0]
    assert not failed.freed and game.city("bob").controller == "alice"
    done = game.send("bob", {"kind": "sabotage"}, dice=faces("star", "moon", "blank"))[0]
    assert done.freed and game.city("bob").controller == ""


def test_a_won_revolt_frees_a_city() -> None:
    game = Game()
    conquer(game, "tax")
    # bob's damaged army still rolls one die; alice's five thousand and her townsfolk roll six
    event = game.send("bob", {"kind": "revolt"}, dice=faces("star", "6 blank"))[0]
    assert event.battle.attacker_won and game.city("bob").controller == ""


def test_a_free_city_cannot_buy_freedom_and_an_own_city_cannot_be_raided() -> None:
    game = Game()
    assert game.refused("bob", {"kind": "buy_freedom"}).code == "realm.not_controlled"
    assert (
        game.refused("alice", {"kind": "raid", "target": "alice", "resource": "food"}).code
        == "realm.own_city"
    )


def test_raiding_without_an_army_is_refused() -> None:
    game = Game()
    game.send("alice", {"kind": "dismiss_army"}, dice=[])
    assert game.city("alice").population == 6_000
    assert (
        game.refused("alice", {"kind": "raid", "target": "bob", "resource": "food"}).code == "realm.no_army"
    )


def test_raising_an_army_needs_hundreds_and_a_thousand_in_all() -> None:
    game = Game()
    game.send("alice", {"kind": "dismiss_army"}, dice=[])
    assert game.refused("alice", {"kind": "raise_army", "soldiers": 150}).code == "realm.invalid_amount"
    assert game.refused("alice", {"kind": "raise_army", "soldiers": 900}).code == "realm.army_too_small"
    assert (
        game.refused("alice", {"kind": "raise_army", "soldiers": 7_000}).code == "realm.not_enough_population"
    )
    game.send("alice", {"kind": "raise_army", "soldiers": 1_000}, dice=[])
    assert game.city("alice").army.soldiers == 1_000


def test_equipping_costs_one_smelted_metal_per_soldier() -> None:
    game = Game(starting_stock={"smelted_steel": 1_500})
    game.send("alice", {"kind": "equip_army", "tier": "steel"}, dice=[])
    assert game.stock("alice", "smelted_steel") == 500
    assert (
        game.refused("alice", {"kind": "raise_army", "soldiers": 1_000}).code
        == "realm.not_enough_smelted_steel"
    )
    game.send("alice", {"kind": "raise_army", "soldiers": 500}, dice=[])
    assert game.stock("alice", "smelted_steel") == 0 and game.city("alice").army.soldiers == 1_500
