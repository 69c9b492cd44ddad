"""The seed's worked examples and its exactness demands, each as one end of season over an explicit colony."""

from __future__ import annotations

from fractions import Fraction

from game_modules import game_module, game_names
from test_sectors_support import colony, only, sector, setup_refusal

EndSeason = game_module("sectors@1", "commands").EndSeason
FOREST, PRAIRIE = game_names("sectors@1", "data", "FOREST", "PRAIRIE")
(GoodsProduced, PopulationChanged, ResourcesHarvested, SeasonEnded) = game_names(
    "sectors@1", "events", "GoodsProduced", "PopulationChanged", "ResourcesHarvested", "SeasonEnded")
ceil_times, floor_times = game_names("sectors@1", "rules", "ceil_times", "floor_times")
Goods = game_module("sectors@1", "state").Goods


def test_examples_1_and_2_a_winter_forest_is_fed_and_capped_then_a_prairie_starves_and_still_grows():
    # Given food 200 in winter, a forest of 182 at (0,0) and a prairie of 302 at (0,1)
    game = colony(
        {"row": 0, "column": 0, "type": "forest", "population": 182},
        {"row": 0, "column": 1, "type": "prairie", "population": 302},
        season="winter",
        stock={"food": 200},
        rows=1,
        columns=2,
    )

    # When the season ends
    events = game.play(EndSeason())

    # Then example 1: 182 x 0.7 = 127.4 -> 128 eaten, 72 left, 54 born, capped at 200
    forest = only(events, PopulationChanged, 0, 0)
    assert (forest.food_rate, forest.food_needed, forest.food_eaten, forest.starved) == (
        "7/10",
        128,
        128,
        False,
    )
    assert (forest.births, forest.cap, forest.over_cap, forest.population_after) == (54, 200, 36, 200)
    # And example 2: 302 x 0.6 = 181.2 -> 182 needed, only 72 left: 302 x 72/182 = 119.47 -> 119 live
    prairie = only(events, PopulationChanged, 0, 1)
    assert (prairie.food_needed, prairie.food_eaten, prairie.starved) == (182, 72, True)
    assert (prairie.deaths, prairie.births, prairie.population_after) == (183, 11, 130)
    assert prairie.growth_allowed, "the seed: no restriction on reproduction after starvation on a prairie"
    # And the colony's food is gone after feeding; what is left is this winter's harvest
    harvests = [e for e in events if isinstance(e, ResourcesHarvested)]
    assert game.game.stock.food == sum(h.harvested.food + h.extra.food for h in harvests)
    assert game.game.sector(0, 0).population == 200
    assert game.game.sector(0, 1).population == 130
    assert isinstance(events[-1], SeasonEnded) and (game.game.season, game.game.year) == ("spring", 2)


def test_production_example_newest_building_is_staffed_first_and_an_understaffed_one_stays_shut():
    # The seed puts this mint in a forest, which its own rule list forbids ("Mints and factories can
    # not be built in a forest", confirmed by docs/design-rulings.md), so the forest of the example cannot exist:
    forbidden = setup_refusal({"setup": {"sectors": [sector("forest", 30, "sawmill", "mint")]}})
    assert (forbidden.code, forbidden.field) == (
        "sectors.building_banned",
        "options.setup.sectors[0].buildings",
    )
    # The example is played on a summer mountain instead: in summer a mountain neither grows nor
    # changes production, it eats from a stock that covers it, and mints may stand there, so every
    # number of the example is the seed's (games/sectors/RULES.md, "Rulings").
    # Given 30 people, a sawmill (oldest) and a mint (newest), and 7 gold
    game = colony(
        {"row": 0, "column": 0, "type": "mountain", "population": 30, "buildings": ["sawmill", "mint"]},
        season="summer",
        stock={"food": 100, "gold": 7, "wood": 50},
    )

    # When the season ends
    produced = only(game.play(EndSeason()), GoodsProduced)

    # Then the mint runs with 20 and makes one coin from 7 gold; the sawmill needs 14 of the 10 left
    mint, sawmill = produced.buildings
    assert (mint.building, mint.outcome, mint.crew_used) == ("mint", "ran", 20)
    assert (mint.consumed, mint.produced) == (Goods(gold=7), Goods(coins=1))
    assert (sawmill.building, sawmill.outcome, sawmill.crew_used) == ("sawmill", "not_staffed", 0)
    assert sawmill.reason == "needs a crew of 14, only 10 workers left"
    assert produced.idle_workers == 10
    assert game.game.stock.coins == 1


def test_production_example_an_older_building_with_a_smaller_crew_takes_the_workers_left():
    # The seed: "If there was an older building that only required 9 workers, they would be assigned
    # to this building." Our lumber camp needs 8.
    # Given the example's 30 people with a lumber camp older than its sawmill and mint
    game = colony(
        sector("mountain", 30, "lumber_camp", "sawmill", "mint"),
        season="summer",
        stock={"food": 100, "gold": 7, "wood": 50},
    )

    # When the season ends
    produced = only(game.play(EndSeason()), GoodsProduced)

    # Then the mint takes 20, the sawmill cannot open with 10, and the lumber camp takes 8 of those 10
    camp = produced.buildings[-1]
    assert [(b.building, b.outcome, b.crew_used) for b in produced.buildings] == [
        ("mint", "ran", 20),
        ("sawmill", "not_staffed", 0),
        ("lumber_camp", "ran", 8),
    ]
    assert camp.produced == Goods(wood=14)
    assert produced.idle_workers == 2


def test_production_example_without_gold_the_mint_crew_sits_idle_and_no_coin_is_made():
    # Given the same colony with no gold
    game = colony(
        {"row": 0, "column": 0, "type": "mountain", "population": 30, "buildings": ["sawmill", "mint"]},
        season="summer",
        stock={"food": 100, "wood": 50},
    )

    # When the season ends
    produced = only(game.play(EndSeason()), GoodsProduced)

    # Then the mint's crew is still busy, so only 10 remain and the sawmill stays shut
    mint, sawmill = produced.buildings
    assert (mint.outcome, mint.crew_used, mint.reason) == (
        "idle_missing_inputs",
        20,
        "not enough gold: need 7, have 0",
    )
    assert sawmill.outcome == "not_staffed"
    assert produced.idle_workers == 10
    assert game.game.stock.coins == 0


def test_harvest_example_twelve_idle_forest_workers_gather_14_wood_3_food_1_gold():
    # Given a spring forest of 30 whose lumber camp (8) and farm (10) leave 12 idle workers
    game = colony(
        {"row": 0, "column": 0, "type": "forest", "population": 30, "buildings": ["lumber_camp", "farm"]},
        season="spring",
        stock={"food": 100},
    )

    # When the season ends
    harvested = only(game.play(EndSeason()), ResourcesHarvested)

    # Then 1.20 x 12 = 14.4 -> 14 wood, 0.30 x 12 = 3.6 -> 3 food, 0.10 x 12 = 1.2 -> 1 gold
    assert harvested.idle_workers == 12
    assert harvested.harvested == Goods(wood=14, food=3, gold=1)
    assert harvested.extra == Goods()


def test_harvest_example_in_fall_the_forest_adds_extra_food_on_its_whole_population():
    # Given the same forest in fall
    game = colony(
        {"row": 0, "column": 0, "type": "forest", "population": 30, "buildings": ["lumber_camp", "farm"]},
        season="fall",
        stock={"food": 100},
    )

    # When the season ends
    harvested = only(game.play(EndSeason()), ResourcesHarvested)

    # Then the idle harvest is unchanged and all 30 people add 0.4 food each (docs/design-rulings.md: the rule list's
    # 0.4 wins over the worked example's 0.1)
    assert harvested.harvested == Goods(wood=14, food=3, gold=1)
    assert harvested.extra == Goods(food=12)
    assert harvested.extra_reasons == ("a forest yields 0.4 extra food per person in fall",)


def test_ten_forest_people_in_spring_need_exactly_3_food_and_ten_at_seven_tenths_need_7():
    assert ceil_times(10, FOREST.food_need["spring"]) == 3
    assert ceil_times(10, FOREST.food_need["winter"]) == 7

    game = colony(
        {"row": 0, "column": 0, "type": "forest", "population": 10},
        {"row": 0, "column": 1, "type": "forest", "population": 10},
        season="spring",
        stock={"food": 100},
        rows=1,
        columns=2,
    )
    spring = game.play(EndSeason())
    assert only(spring, PopulationChanged).food_needed == 3
    game.play(EndSeason())
    game.play(EndSeason())
    winter = game.play(EndSeason())
    assert only(winter, PopulationChanged).food_needed == 7


def test_no_rounding_drift_over_100_seasons_against_an_integer_reference():
    # Given a forest and a prairie that feed each other for 25 years
    game = colony(
        {"row": 0, "column": 0, "type": "forest", "population": 37},
        {"row": 0, "column": 1, "type": "prairie", "population": 113},
        season="spring",
        stock={"food": 50},
        rows=1,
        columns=2,
    )
    # And an independent reference in integer hundredths, the seed's own rates written out
    need = {
        "forest": {"spring": 30, "summer": 30, "fall": 10, "winter": 70},
        "prairie": {"spring": 20, "summer": 20, "fall": 20, "winter": 60},
    }
    growth = {"forest": (30, {"winter"}), "prairie": (10, {"spring", "summer", "fall", "winter"})}
    cap = {"forest": 200, "prairie": None}
    food_per_idle = {"forest": 30, "prairie": 100}
    people = {"forest": 37, "prairie": 113}
    food = 50

    for season_index in range(100):
        season = ("spring", "summer", "fall", "winter")[season_index % 4]
        for kind in ("forest", "prairie"):
            needed = -(-people[kind] * need[kind][season] // 100)
            survivors = people[kind] if food >= needed else people[kind] * food // needed
            food = max(food - needed, 0)
            rate, seasons = growth[kind]
            grown = survivors + (survivors * rate // 100 if season in seasons else 0)
            people[kind] = min(grown, cap[kind]) if cap[kind] else grown
        # A prairie of more than 1000 harvests at 50%
        prairie_rate = food_per_idle["prairie"] // (2 if people["prairie"] > 1000 else 1)
        food += people["forest"] * food_per_idle["forest"] // 100 + people["prairie"] * prairie_rate // 100
        if season == "fall":
            food += people["forest"] * 40 // 100

        # When one more season ends, then the colony matches the reference exactly
        game.play(EndSeason())
        assert (
            game.game.sector(0, 0).population,
            game.game.sector(0, 1).population,
            game.game.stock.food,
        ) == (
            people["forest"],
            people["prairie"],
            food,
        ), f"season {season_index}"
    assert game.game.year == 26


def test_rates_are_exact_fractions_never_binary_floats():
    for rate in (
        *FOREST.food_need.values(),
        *PRAIRIE.food_need.values(),
        FOREST.growth_rate,
        PRAIRIE.growth_rate,
    ):
        assert isinstance(rate, Fraction)
    assert floor_times(12, Fraction(6, 5)) == 14
