"""Each sector type's special rules, shown one end of season at a time over explicit colonies."""

from __future__ import annotations

import pytest
from game_modules import game_module, game_names
from test_sectors_support import colony, only, refusal, sector

from almanac.events.errors import RuleError

Build, EndSeason, MovePeople = game_names("sectors@1", "commands", "Build", "EndSeason", "MovePeople")
(BuildingBuilt, GoodsProduced, PopulationChanged, ResourcesHarvested) = game_names(
    "sectors@1", "events", "BuildingBuilt", "GoodsProduced", "PopulationChanged", "ResourcesHarvested")
Goods = game_module("sectors@1", "state").Goods

# --- mountain ---------------------------------------------------------------------------------


@pytest.mark.parametrize("season", ["spring", "summer", "winter"])
def test_mountain_people_do_not_reproduce_outside_fall(season):
    changed = only(colony(sector("mountain", 40), season=season).play(EndSeason()), PopulationChanged)
    assert (changed.growth_allowed, changed.births, changed.population_after) == (False, 0, 40)
    assert changed.growth_reason == "mountain people reproduce only in fall"


def test_mountain_people_reproduce_by_a_third_in_fall_when_they_have_not_starved():
    changed = only(colony(sector("mountain", 40), season="fall").play(EndSeason()), PopulationChanged)
    assert (changed.food_needed, changed.growth_rate, changed.births, changed.population_after) == (
        20,
        "33/100",
        13,
        53,
    )


@pytest.mark.parametrize("seasons_ago", [1, 2, 3])
def test_mountain_people_do_not_reproduce_in_fall_after_starving_within_the_last_four_seasons(seasons_ago):
    game = colony(sector("mountain", 40, starved_seasons_ago=seasons_ago), season="fall")
    changed = only(game.play(EndSeason()), PopulationChanged)
    assert (changed.growth_allowed, changed.births) == (False, 0)
    assert f"starved {seasons_ago} season" in changed.growth_reason


def test_mountain_starvation_four_seasons_ago_no_longer_stops_fall_growth():
    game = colony(sector("mountain", 40, starved_seasons_ago=4), season="fall")
    assert only(game.play(EndSeason()), PopulationChanged).births == 13


def test_a_mountain_that_starves_in_summer_does_not_grow_in_the_fall_even_when_fed():
    # Given a prairie of 100 that eats first, then a mountain of 40, and 30 food in summer
    game = colony(
        sector("prairie", 100), sector("mountain", 40, column=1), season="summer", stock={"food": 30}
    )

    # When summer ends, the prairie eats 20 and the mountain gets 10 of the 20 it needs
    summer = only(game.play(EndSeason()), PopulationChanged, 0, 1)
    assert (summer.starved, summer.deaths, summer.population_after) == (True, 20, 20)

    # Then in fall the prairie's harvest feeds everyone, yet no mountain child is born
    fall = only(game.play(EndSeason()), PopulationChanged, 0, 1)
    assert (fall.starved, fall.growth_allowed, fall.births, fall.population_after) == (False, False, 0, 20)
    assert fall.growth_reason == (
        "mountain people do not reproduce after starvation in the last 4 seasons; this sector starved 1 season ago"
    )


def test_a_mountain_starving_in_fall_itself_does_not_reproduce_that_fall():
    changed = only(
        colony(sector("mountain", 40), season="fall", stock={"food": 5}).play(EndSeason()), PopulationChanged
    )
    assert (changed.starved, changed.population_after, changed.births) == (True, 10, 0)
    assert changed.growth_reason == "mountain people do not reproduce after starving this season"


def test_a_mountain_in_winter_neither_produces_nor_harvests():
    events = colony(sector("mountain", 60, "mine", "mint"), season="winter").play(EndSeason())
    produced = only(events, GoodsProduced)
    assert [report.outcome for report in produced.buildings] == ["closed", "closed"]
    assert produced.buildings[0].reason == "no production in a mountain in winter"
    assert (produced.consumed, produced.produced, produced.idle_workers) == (Goods(), Goods(), 60)
    harvested = only(events, ResourcesHarvested)
    assert harvested.closed and harvested.harvested == Goods() and harvested.extra == Goods()
    assert harvested.multiplier_reasons == ("no resource harvesting in a mountain in winter",)


def test_a_mountain_in_spring_adds_a_tenth_of_its_people_in_gold():
    harvested = only(colony(sector("mountain", 45)).play(EndSeason()), ResourcesHarvested)
    # 45 idle: 45 gold and 11 wood at the usual rates, plus 4 gold (45 x 0.1 = 4.5 -> 4)
    assert harvested.harvested == Goods(gold=45, wood=11)
    assert harvested.extra == Goods(gold=4)


def test_a_mountain_halves_production_in_fall_before_rounding_down():
    fall = only(colony(sector("mountain", 12, "mine"), season="fall").play(EndSeason()), GoodsProduced)
    summer = only(colony(sector("mountain", 12, "mine"), season="summer").play(EndSeason()), GoodsProduced)
    assert summer.produced == Goods(gold=16)
    assert (fall.multiplier, fall.produced) == ("1/2", Goods(gold=8))
    # The seed's single coin halves to nothing: the mint's gold is still used (the ruling's order)
    mint = only(colony(sector("mountain", 20, "mint"), season="fall").play(EndSeason()), GoodsProduced)
    assert (mint.consumed, mint.produced) == (Goods(gold=7), Goods())


def test_a_mountain_holds_at_most_five_buildings():
    game = colony(sector("mountain", 50, "farm", "farm", "mine", "mine"))
    game.play(Build(row=0, column=0, building="mint"))
    error = refusal(game, Build(row=0, column=0, building="mine"))
    assert error.code == "sectors.building_limit"
    assert error.message == "a mountain holds at most 5 buildings and sector (row 0, column 0) already has 5"


def test_mountain_population_is_capped_at_100():
    game = colony(sector("mountain", 95), sector("prairie", 50, column=1))
    error = refusal(game, MovePeople(from_row=0, from_column=1, to_row=0, to_column=0, count=6))
    assert error.code == "sectors.population_cap"
    assert error.message.startswith("mountain population is capped at 100")
    game.play(MovePeople(from_row=0, from_column=1, to_row=0, to_column=0, count=5))
    assert game.game.sector(0, 0).population == 100
    grown = only(colony(sector("mountain", 90), season="fall").play(EndSeason()), PopulationChanged)
    assert (grown.births, grown.over_cap, grown.population_after) == (29, 19, 100)


# --- prairie ----------------------------------------------------------------------------------


def test_a_prairie_of_1000_harvests_in_full_and_one_of_1001_at_half():
    full = only(colony(sector("prairie", 1000)).play(EndSeason()), ResourcesHarvested)
    # Spring growth comes first: 1000 -> 1100 people, so the cut is already on; start at 909 instead
    assert full.population == 1100 and full.multiplier == "1/2"
    below = only(colony(sector("prairie", 909)).play(EndSeason()), ResourcesHarvested)
    assert (below.population, below.multiplier, below.harvested) == (999, "1", Goods(food=999, wood=249))
    at_limit = only(colony(sector("prairie", 910)).play(EndSeason()), ResourcesHarvested)
    assert (at_limit.population, at_limit.multiplier) == (1001, "1/2")
    assert at_limit.harvested == Goods(food=500, wood=125)
    assert at_limit.multiplier_reasons == ("more than 1000 people: harvest at 50%",)


def test_a_prairie_with_more_than_ten_buildings_harvests_at_a_fifth():
    ten = only(colony(sector("prairie", 200, *["farm"] * 10)).play(EndSeason()), ResourcesHarvested)
    assert (ten.idle_workers, ten.multiplier, ten.harvested) == (120, "1", Goods(food=120, wood=30))
    eleven = only(colony(sector("prairie", 200, *["farm"] * 11)).play(EndSeason()), ResourcesHarvested)
    # 220 people after spring growth, 110 at the farms, 110 idle: 110 x 1/5 food, 110 x 1/4 x 1/5 wood
    assert (eleven.idle_workers, eleven.multiplier, eleven.harvested) == (110, "1/5", Goods(food=22, wood=5))


def test_a_prairie_over_both_limits_takes_both_cuts():
    both = only(colony(sector("prairie", 2000, *["farm"] * 11)).play(EndSeason()), ResourcesHarvested)
    assert both.multiplier == "1/10"
    assert both.idle_workers == 2200 - 110
    assert both.harvested == Goods(food=209, wood=52)


def test_a_prairie_works_its_buildings_ten_percent_harder_in_winter():
    summer = only(colony(sector("prairie", 10, "farm"), season="summer").play(EndSeason()), GoodsProduced)
    winter = only(colony(sector("prairie", 10, "farm"), season="winter").play(EndSeason()), GoodsProduced)
    assert summer.produced == Goods(food=14)
    # 14 x 1.1 = 15.4, rounded down
    assert (winter.multiplier, winter.produced) == ("11/10", Goods(food=15))


def test_prairie_people_eat_a_fifth_and_three_fifths_in_winter_and_grow_every_season():
    spring = only(colony(sector("prairie", 101)).play(EndSeason()), PopulationChanged)
    winter = only(colony(sector("prairie", 101), season="winter").play(EndSeason()), PopulationChanged)
    assert (spring.food_needed, spring.births) == (21, 10)
    assert (winter.food_needed, winter.births) == (61, 10)


def test_prairie_population_has_no_cap():
    changed = only(colony(sector("prairie", 50_000)).play(EndSeason()), PopulationChanged)
    assert (changed.cap, changed.population_after) == (None, 55_000)


# --- forest -----------------------------------------------------------------------------------


def test_forest_population_is_capped_at_200():
    grown = only(colony(sector("forest", 190), season="winter").play(EndSeason()), PopulationChanged)
    assert (grown.births, grown.cap, grown.population_after) == (57, 200, 200)
    game = colony(sector("forest", 199), sector("prairie", 50, column=1))
    error = refusal(game, MovePeople(from_row=0, from_column=1, to_row=0, to_column=0, count=2))
    assert error.message == (
        "forest population is capped at 200: sector (row 0, column 0) has 199, so at most 1 more can move in"
    )


@pytest.mark.parametrize(("season", "births"), [("spring", 0), ("summer", 0), ("fall", 0), ("winter", 30)])
def test_forest_people_reproduce_by_thirty_percent_only_in_winter(season, births):
    changed = only(colony(sector("forest", 100), season=season).play(EndSeason()), PopulationChanged)
    assert changed.births == births


@pytest.mark.parametrize("building", ["mint", "factory"])
def test_a_forest_cannot_hold_a_mint_or_a_factory(building):
    game = colony(sector("forest", 50))
    error = refusal(game, Build(row=0, column=0, building=building))
    # Then the refusal names the rule, the field and what a forest may hold instead
    assert (error.code, error.message, error.field) == (
        "sectors.building_banned",
        f"a forest cannot hold a {building}; a forest may hold: farm, lumber_camp, mine, sawmill, kitchen",
        "building",
    )
    assert error.allowed == ["farm", "lumber_camp", "mine", "sawmill", "kitchen"]
    [built] = game.play(Build(row=0, column=0, building="sawmill"))
    assert isinstance(built, BuildingBuilt)


def test_a_forest_setup_with_a_mint_is_refused_like_the_build():
    with pytest.raises(RuleError) as caught:
        colony(sector("forest", 30, "sawmill", "mint"))
    assert caught.value.code == "sectors.building_banned"
    assert caught.value.field == "options.setup.sectors[0].buildings"
    assert caught.value.message.startswith("a forest cannot hold a mint; a forest may hold: farm,")


# --- the ledger's ceiling ---------------------------------------------------------------------


def test_an_uncapped_prairie_saturates_at_the_ledgers_ceiling_and_says_so():
    ceiling = 10**15
    changed = only(
        colony(sector("prairie", ceiling - 5), stock={"food": ceiling}).play(EndSeason()), PopulationChanged
    )
    assert (changed.population_after, changed.cap, changed.over_cap) == (ceiling, ceiling, changed.births - 5)
    harvested = only(
        colony(sector("prairie", 1000), stock={"food": ceiling - 3}).play(EndSeason()), ResourcesHarvested
    )
    assert harvested.harvested.food == 3 + 200, "fills the stock to the ceiling after the 200 eaten"


def test_a_setup_beyond_the_ledgers_ceiling_is_refused():
    with pytest.raises(RuleError) as caught:
        colony(sector("prairie", 10**15 + 1))
    # The ceiling is the declared range of a population: the schema refuses it, naming the range.
    assert (caught.value.code, caught.value.field) == ("invalid_options", "options.setup.sectors[0].population")
    assert caught.value.allowed == {"min": 0, "max": 10**15}
