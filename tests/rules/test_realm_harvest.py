"""Food, herbs, healing, wood and fortifying: season multipliers, moons, skulls, blanks and the seed's rates."""

from __future__ import annotations

from game_modules import game_module
from test_realm_support import Game, faces, of_type

realm_events = game_module("realm@1", "events")


def food(game: Game, dice: list[int], player: str = "alice", **body: object) -> realm_events.FoodGot:
    (event,) = of_type(game.send(player, {"kind": "get_food", **body}, dice=dice), realm_events.FoodGot)
    return event


def test_farming_in_fall_yields_three_times() -> None:
    game = Game()
    game.go_to("fall")
    before = game.stock("alice", "food")
    event = food(game, faces("3 star"), method="farm")
    assert (event.multiplier, event.amount) == ("3", 9_000)
    assert game.stock("alice", "food") == before + 9_000


def test_farming_in_winter_is_refused_as_out_of_season() -> None:
    game = Game()
    game.go_to("winter")
    error = game.refused("alice", {"kind": "get_food", "method": "farm"})
    assert error.code == "realm.out_of_season" and error.field == "method"


def test_each_method_has_the_seeds_multiplier_per_season() -> None:
    expected = {
        "spring": {"hunt": 1_500, "gather": 4_500, "fish": 3_000, "farm": 1_500},
        "summer": {"hunt": 4_500, "gather": 3_000, "fish": 6_000, "farm": 1_500},
        "fall": {"hunt": 4_500, "gather": 3_000, "fish": 3_000, "farm": 9_000},
        "winter": {"hunt": 1_500, "gather": 3_000, "fish": 1_500},
    }
    for season, yields in expected.items():
        game = Game(actions_per_season=4)
        game.go_to(season)
        for method, amount in yields.items():
            assert food(game, faces("3 star"), method=method).amount == amount, (season, method)


def test_a_blank_counts_as_one_star() -> None:
    event = food(Game(), faces("star", "2 blank"), method="gather")
    assert (event.stars, event.amount) == (3, 4_500)


def test_a_skull_spoils_the_roll() -> None:
    event = food(Game(), faces("2 star", "skull"), method="gather")
    assert event.spoiled and event.amount == 0


def test_a_moon_doubles_the_roll() -> None:
    event = food(Game(), faces("2 star", "moon"), method="gather", moon="double")
    assert event.doubled and event.amount == 2 * 2 * 1_000 * 3 // 2


def test_a_saved_moon_wards_off_a_later_skull() -> None:
    game = Game()
    first = food(game, faces("2 star", "moon"), method="gather", moon="save")
    assert (first.wards_gained, first.amount) == (1, 3_000)
    assert game.city("alice").saved_wards == 1
    second = food(game, faces("2 star", "skull"), method="gather")
    assert (second.spoiled, second.wards_used, second.amount) == (False, 1, 3_000)
    assert game.city("alice").saved_wards == 0


def test_a_roll_of_three_finds_a_thousand_herbs_and_a_roll_of_two_none() -> None:
    game = Game()
    game.go_to("summer")
    three = game.send("alice", {"kind": "find_herbs"}, dice=faces("3 star", "3 blank"))[0]
    assert (three.stars, three.amount) == (3, 1_000)
    two = game.send("alice", {"kind": "find_herbs"}, dice=faces("2 star", "4 blank"))[0]
    assert (two.stars, two.amount) == (2, 0)
    assert game.stock("alice", "herbs") == 2_000


def test_herbs_grow_at_half_rate_outside_summer_and_not_in_winter() -> None:
    game = Game()
    spring = game.send("alice", {"kind": "find_herbs"}, dice=faces("6 star"))[0]
    assert (spring.rate, spring.amount) == ("1/2", 1_000)
    game.go_to("winter")
    assert game.refused("alice", {"kind": "find_herbs"}).code == "realm.out_of_season"


def test_a_thousand_herbs_cure_one_point_of_army_damage() -> None:
    game = Game(players=("alice", "bob"))
    game.send("bob", {"kind": "raise_army", "soldiers": 1_000}, dice=[])
    # bob's two dice beat her four (townsfolk, army, two for the walls): her army takes a point of damage
    game.send("bob", {"kind": "raid", "target": "alice", "resource": "food"}, dice=faces("2 star", "4 blank"))
    assert game.city("alice").army.damage == 1
    healed = game.send("alice", {"kind": "heal_army", "points": 1}, dice=[])[0]
    assert (healed.herbs, healed.damage_after) == (1_000, 0)
    assert game.stock("alice", "herbs") == 0
    assert game.refused("alice", {"kind": "heal_army", "points": 1}).code == "realm.nothing_to_heal"


def test_woodcutting_gives_a_thousand_per_star_and_half_again_in_fall() -> None:
    game = Game()
    assert game.send("alice", {"kind": "cut_wood"}, dice=faces("2 star", "blank"))[0].amount == 2_000
    game.go_to("fall")
    assert game.send("alice", {"kind": "cut_wood"}, dice=faces("3 star"))[0].amount == 4_500


def test_two_thousand_wood_buy_one_hit_point_and_fifteen_hundred_stone_buy_two() -> None:
    game = Game()
    event = game.send("alice", {"kind": "fortify", "wood": 2_000}, dice=[])[0]
    assert (event.hit_points_gained, event.hit_points_after) == (1, 11)
    event = game.send("alice", {"kind": "fortify", "stone": 1_500}, dice=[])[0]
    assert (event.hit_points_gained, event.hit_points_after) == (2, 13)
    assert game.stock("alice", "wood") == 2_000 and game.stock("alice", "stone") == 1_500


def test_fortifying_with_odd_amounts_is_refused() -> None:
    game = Game()
    assert game.refused("alice", {"kind": "fortify", "wood": 1_000}).field == "wood"
    assert game.refused("alice", {"kind": "fortify", "stone": 1_000}).field == "stone"
    assert game.refused("alice", {"kind": "fortify"}).code == "realm.invalid_amount"
