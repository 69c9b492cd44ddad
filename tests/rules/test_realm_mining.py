"""Mining and smelting: the seed's worked examples, moons, saved stars, skulls, blanks and lesser ores."""

from __future__ import annotations

from game_modules import game_module, game_names
from test_realm_support import Game, faces, of_type

realm_events = game_module("realm@1", "events")
mining_yield, resolve_mining = game_names("realm@1", "rules", "mining_yield", "resolve_mining")


def mine(game: Game, dice: list[int], **body: object) -> realm_events.Mined:
    found = game.send("alice", {"kind": "mine", **body}, dice=dice)
    (event,) = of_type(found, realm_events.Mined)
    return event


def test_seven_stars_seeking_gold_give_three_thousand_gold() -> None:
    game = Game()
    before = game.stock("alice", "gold")
    event = mine(game, faces("7 star", "blank"), ore="gold")
    assert (event.stars, event.outcome, event.found, event.amount) == (7, "found", "gold", 3_000)
    assert event.dice == ("star",) * 7 + ("blank",)
    assert game.stock("alice", "gold") == before + 3_000


def test_six_stars_are_golds_minimum_and_give_two_thousand() -> None:
    assert mining_yield("gold", 6) == 2_000
    assert mining_yield("gold", 8) == 4_000


def test_five_stars_seeking_gold_may_take_steel_for_seven_hundred() -> None:
    game = Game()
    event = mine(game, faces("5 star", "3 blank"), ore="gold", lesser_ore="steel")
    assert (event.outcome, event.found, event.amount) == ("lesser_ore", "steel", 700)
    assert game.stock("alice", "steel") == 700


def test_best_lesser_ore_is_the_most_valuable_the_stars_reach() -> None:
    result = resolve_mining("gold", ("star",) * 5 + ("blank",) * 3, "count", 0, "best")
    assert (result.found, result.amount) == ("steel", 700)
    result = resolve_mining("gold", ("star",) * 2 + ("blank",) * 6, "count", 0, "best")
    assert (result.found, result.amount) == ("iron", 200)  # 1,000 at -75% = 250 -> 200


def test_a_moon_and_four_stars_give_six_stars_when_the_moon_counts_twice() -> None:
    game = Game()
    event = mine(game, faces("moon", "4 star", "blank"), ore="steel", moons="count")
    assert (event.stars, event.saved_gained, event.amount) == (6, 0, 4_000)
    assert game.city("alice").saved_stars == 0


def test_a_moon_and_four_stars_give_five_and_one_saved_star() -> None:
    game = Game()
    event = mine(game, faces("moon", "4 star", "blank"), ore="steel", moons="save")
    assert (event.stars, event.saved_gained, event.amount) == (5, 1, 3_000)
    assert game.city("alice").saved_stars == 1
    # The saved star is spent on a later try: two stars and one saved reach iron's minimum plus one.
    later = mine(game, faces("2 star", "2 blank"), ore="iron", use_saved=1)
    assert (later.stars, later.saved_used, later.amount) == (3, 1, 2_000)
    assert game.city("alice").saved_stars == 0


def test_more_saved_stars_than_held_are_refused() -> None:
    error = Game().refused("alice", {"kind": "mine", "ore": "iron", "use_saved": 1})
    assert error.code == "realm.not_enough_saved_stars" and error.field == "use_saved"


def test_a_skull_finds_only_stone_at_half() -> None:
    game = Game()
    before = game.stock("alice", "stone")
    event = mine(game, faces("6 star", "skull", "blank"), ore="gold")
    # six stars would be gold; the skull leaves stone: 1,000 + 5,000 = 6,000 at -50% = 3,000
    assert (event.outcome, event.found, event.amount) == ("skull_stone", "stone", 3_000)
    assert game.stock("alice", "gold") == 2_000 and game.stock("alice", "stone") == before + 3_000


def test_a_single_blank_seeking_stone_finds_stone_at_minus_seventy_five_percent() -> None:
    game = Game()
    event = mine(game, faces("blank"), ore="stone")
    assert (event.outcome, event.amount) == ("blank_stone", 200)  # 1,000 x 1/4 = 250 -> 200


def test_one_star_finds_a_thousand_stone_and_a_moon_counted_twice_two_thousand() -> None:
    assert resolve_mining("stone", ("star",), "count", 0, "best").amount == 1_000
    assert resolve_mining("stone", ("moon",), "count", 0, "best").amount == 2_000


def test_bronze_needs_one_star_on_two_dice() -> None:
    assert resolve_mining("bronze", ("star", "blank"), "count", 0, "best").amount == 1_000
    assert resolve_mining("bronze", ("star", "star"), "count", 0, "best").amount == 2_000


def test_declining_the_lesser_ore_leaves_only_the_blank_stone() -> None:
    result = resolve_mining("gold", ("star",) * 5 + ("blank",) * 3, "count", 0, "none")
    assert (result.outcome, result.found, result.amount) == ("blank_stone", "stone", 200)


def test_a_lesser_ore_must_be_lesser_than_the_one_sought() -> None:
    error = Game().refused("alice", {"kind": "mine", "ore": "iron", "lesser_ore": "gold"})
    assert error.code == "realm.invalid_choice" and error.field == "lesser_ore"


def test_smelting_steel_needs_five_stars_on_six_dice() -> None:
    game = Game(starting_stock={"steel": 2_000})
    failed = game.send(
        "alice", {"kind": "smelt", "ore": "steel", "amount": 2_000}, dice=faces("4 star", "2 blank")
    )
    assert failed[0].success is False and game.stock("alice", "steel") == 2_000
    done = game.send(
        "alice", {"kind": "smelt", "ore": "steel", "amount": 2_000}, dice=faces("4 star", "moon", "blank")
    )
    assert done[0].success is True and done[0].needed == 5
    assert game.stock("alice", "steel") == 0 and game.stock("alice", "smelted_steel") == 2_000


def test_smelting_more_ore_than_held_is_refused() -> None:
    error = Game().refused("alice", {"kind": "smelt", "ore": "bronze", "amount": 100})
    assert error.code == "realm.not_enough_bronze"


# --- review of the seed, rule by rule -----------------------------------------------------------


def test_gold_pays_a_thousand_for_every_three_stars_and_a_thousand_per_star_past_the_minimum() -> None:
    """Given alice holds one saved star, when she rolls eight stars seeking gold and adds it,
    then nine stars give 3 x 1,000 (every three stars) + 3 x 1,000 (three past six) = 6,000 gold."""
    game = Game()
    saving = mine(game, faces("moon"), ore="stone", moons="save")
    assert (saving.stars, saving.saved_gained, saving.amount) == (1, 1, 1_000)
    before = game.stock("alice", "gold")
    event = mine(game, faces("8 star"), ore="gold", use_saved=1)
    assert (event.stars, event.outcome, event.amount) == (9, "found", 6_000)
    assert game.stock("alice", "gold") == before + 6_000
    assert [mining_yield("gold", stars) for stars in (6, 7, 8, 9, 10)] == [2_000, 3_000, 4_000, 6_000, 7_000]


def test_a_skull_without_a_star_finds_no_stone_to_halve() -> None:
    """Given a skull is a -50% disadvantage on the stone found, when no star is rolled,
    then nothing is found (a lone skull is not better than a lone blank), and a blank still gives 200."""
    game = Game()
    before = game.stock("alice", "stone")
    event = mine(game, faces("skull"), ore="stone")
    assert (event.outcome, event.found, event.amount) == ("nothing", "", 0)
    assert game.stock("alice", "stone") == before
    with_blank = resolve_mining("bronze", ("skull", "blank"), "count", 0, "best")
    assert (with_blank.outcome, with_blank.amount) == ("blank_stone", 200)
    one_star = resolve_mining("bronze", ("skull", "star"), "count", 0, "best")
    assert (one_star.outcome, one_star.found, one_star.amount) == ("skull_stone", "stone", 500)
