"""realm@2's one change: in mining each skull cancels one star instead of turning the try into stone."""

from __future__ import annotations

from game_modules import game_module
from test_realm_support import Game, faces, of_type

from almanac.events import registry

realm_events = game_module("realm@1", "events")
resolve_mining = game_module("realm@2", "rules").resolve_mining


def mine(game: Game, dice: list[int], **body: object) -> realm_events.Mined:
    (event,) = of_type(game.send("alice", {"kind": "mine", **body}, dice=dice), realm_events.Mined)
    return event


def test_a_bare_realm_plays_the_seeds_skull_rule_and_realm_at_2_is_opt_in_by_its_full_name() -> None:
    # The seed: "If you roll a skull you only find stone at a -50% disadvantage": seven stars and a skull
    # seeking gold find 3,500 stone under the rules a bare name means, whatever newer version is installed.
    roll = faces("7 star", "skull")
    bare, variant = Game(ruleset="realm"), Game(ruleset="realm@2")

    found, opted_in = mine(bare, roll, ore="gold"), mine(variant, roll, ore="gold")

    assert (found.outcome, found.found, found.amount) == ("skull_stone", "stone", 3_500)
    assert (opted_in.outcome, opted_in.found, opted_in.amount) == ("found", "gold", 2_000)
    assert (bare.state.ruleset_version, variant.state.ruleset_version) == (1, 2)


def test_the_same_gold_roll_with_one_skull_finds_only_stone_under_1_and_gold_under_2() -> None:
    roll = faces("7 star", "skull")
    old, new = Game(ruleset="realm@1"), Game(ruleset="realm@2")

    at_1, at_2 = mine(old, roll, ore="gold"), mine(new, roll, ore="gold")

    assert (at_1.stars, at_1.outcome, at_1.found, at_1.amount) == (7, "skull_stone", "stone", 3_500)
    assert (at_2.stars, at_2.outcome, at_2.found, at_2.amount) == (6, "found", "gold", 2_000)
    assert new.stock("alice", "gold") == old.stock("alice", "gold") + 2_000
    assert (old.state.ruleset_version, new.state.ruleset_version) == (1, 2)


def test_skulls_that_cancel_the_stars_below_the_minimum_leave_a_lesser_ore_or_a_blanks_stone() -> None:
    gold = resolve_mining("gold", ("star",) * 6 + ("moon", "skull"), "count", 0, "best")
    assert (gold.stars, gold.outcome, gold.amount) == (7, "found", 3_000)  # 6 + 2 (moon) - 1 (skull)
    lesser = resolve_mining("gold", ("star",) * 5 + ("skull",) * 2 + ("blank",), "count", 0, "best")
    assert (lesser.stars, lesser.outcome, lesser.found, lesser.amount) == (3, "lesser_ore", "steel", 200)
    blank = resolve_mining("bronze", ("skull", "blank"), "count", 0, "best")
    assert (blank.stars, blank.outcome, blank.found, blank.amount) == (0, "blank_stone", "stone", 200)
    assert resolve_mining("stone", ("skull",), "count", 0, "best").outcome == "nothing"


def test_moons_saved_stars_and_everything_but_mining_are_version_1s() -> None:
    saving = resolve_mining("iron", ("moon", "star", "skull", "blank"), "save", 1, "best")
    assert (saving.stars, saving.saved_gained, saving.found) == (2, 1, "iron")  # 1 + 1 (moon) + 1 saved - 1 skull
    v1, v2 = registry.at("realm", 1), registry.at("realm", 2)
    assert v1.decider.event_types == v2.decider.event_types and v1.policy is v2.policy
    assert v1.read_models == v2.read_models and v1.audit_views == v2.audit_views
