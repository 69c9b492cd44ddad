"""Creating a colony and every command of the sectors rules: what they record and how they refuse."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import msgspec
import pytest
from game_modules import game_module, game_names
from sectors_sandbox import Sandbox
from test_sectors_support import colony, refusal, sector, setup_refusal

from almanac.events import room
from almanac.events.dice import ScriptedDice
from almanac.events.errors import RuleError

DECIDER = game_module("sectors@1", "game").DECIDER
data = game_module("sectors@1", "data")
rules = game_module("sectors@1", "rules")
(Build, Demolish, EndSeason, Explore, MovePeople) = game_names(
    "sectors@1", "commands", "Build", "Demolish", "EndSeason", "Explore", "MovePeople")
(BUILDING_NAMES, BUILDINGS, DEFAULT_STARTING_STOCK, GOODS, SECTOR_TYPE_NAMES, SECTOR_TYPES) = game_names(
    "sectors@1", "data", "BUILDING_NAMES", "BUILDINGS", "DEFAULT_STARTING_STOCK", "GOODS", "SECTOR_TYPE_NAMES", "SECTOR_TYPES")
(BuildingBuilt, BuildingDemolished, PeopleMoved, SeasonEnded, SectorExplored) = game_names(
    "sectors@1", "events", "BuildingBuilt", "BuildingDemolished", "PeopleMoved", "SeasonEnded", "SectorExplored")
Goods = game_module("sectors@1", "state").Goods

# --- a new colony -----------------------------------------------------------------------------


def test_a_new_colony_is_an_8x8_grid_in_spring_of_year_1_with_a_drawn_home_sector_owned_by_its_creator():
    # Given the dice will draw type index 2 for the home sector
    game = Sandbox({}, player="alice", dice=ScriptedDice([2]))

    # Then alice owns an 8x8 colony whose only explored sector is a forest of 50 near the middle
    state = game.game
    assert (state.owner, state.rows, state.columns, state.season, state.year) == ("alice", 8, 8, "spring", 1)
    assert [(row, column, s.type, s.population) for row, column, s in state.explored()] == [
        (3, 3, "forest", 50)
    ]
    assert state.stock == Goods(**DEFAULT_STARTING_STOCK)
    assert SECTOR_TYPE_NAMES[2] == "forest"
    assert DECIDER.seats(state) == ("alice",)


def test_options_choose_the_owner_grid_home_and_stock_without_drawing():
    options = {
        "owner": "bob",
        "rows": 3,
        "columns": 5,
        "home_row": 0,
        "home_column": 4,
        "home_type": "mountain",
        "home_population": 80,
        "stock": {"food": 7},
    }
    game = Sandbox(options, player="alice", dice=ScriptedDice([]), join=False)
    state = game.game
    assert (state.owner, state.rows, state.columns) == ("bob", 3, 5)
    assert state.sector(0, 4) == state.sectors[4] and state.sectors[4].type == "mountain"
    assert state.sectors[4].population == 80 and state.stock == Goods(food=7)
    # And only the owner may take the seat
    with pytest.raises(RuleError) as caught:
        game.play(room.JoinRoom(), player="alice")
    assert caught.value.code == "no_seat"
    game.play(room.JoinRoom(), player="bob")


def test_the_decider_refuses_anyone_but_the_owner():
    game = Sandbox({"home_type": "prairie"}, player="alice")
    context = game.context("mallory")
    with pytest.raises(RuleError) as caught:
        DECIDER.decide(game.game, EndSeason(), context)
    assert caught.value.code == "sectors.not_owner"
    assert caught.value.message == "only the colony's owner 'alice' may command it, not 'mallory'"


@pytest.mark.parametrize(
    ("options", "code", "field", "message"),
    [
        (
            {"setup": {"sectors": [{"row": 1, "column": 1, "explored": False, "type": "forest"}]}},
            "sectors.invalid_setup",
            "options.setup.sectors[0]",
            "sector (row 1, column 1) is unexplored, so it can have no type, population, buildings or "
            "starvation: its type is drawn when it is explored",
        ),
        (
            {"setup": {"rows": 2, "columns": 2, "sectors": [sector("forest", 5, row=2)]}},
            "sectors.invalid_setup",
            "options.setup.sectors[0].row",
            "sector (row 2, column 0) is outside the 2x2 grid (rows 0-1, columns 0-1)",
        ),
        (
            {"setup": {"sectors": [sector("forest", 5), sector("prairie", 5)]}},
            "sectors.invalid_setup",
            "options.setup.sectors[1]",
            "sector (row 0, column 0) is listed twice",
        ),
        (
            {"setup": {"sectors": [sector("forest", 201)]}},
            "sectors.population_cap",
            "options.setup.sectors[0].population",
            "forest population is capped at 200; 201 were asked for",
        ),
        (
            {"setup": {"sectors": [sector("swamp", 5)]}},
            "sectors.unknown_type",
            "options.setup.sectors[0].type",
            "there is no sector type 'swamp'; known types: mountain, prairie, forest",
        ),
        (
            {"setup": {"sectors": [sector("mountain", 5, *["mine"] * 6)]}},
            "sectors.building_limit",
            "options.setup.sectors[0].buildings",
            "a mountain holds at most 5 buildings; sector (row 0, column 0) lists 6",
        ),
        (
            {"setup": {"sectors": [{"row": 0, "column": 0, "explored": False}]}},
            "sectors.invalid_setup",
            "options.setup.sectors",
            "an explicit setup needs at least one explored sector, or nothing can ever be explored",
        ),
        (
            {"rows": 4, "setup": {"sectors": [sector("forest", 5)]}},
            "sectors.invalid_setup",
            "options.rows",
            "options.rows only shapes a generated colony; with an explicit setup, put it in the setup",
        ),
        (
            {"setup": {"stock": {"wood": -1}, "sectors": [sector("forest", 5)]}},
            "sectors.invalid_setup",
            "options.setup.stock",
            "a stock cannot be negative: wood -1",
        ),
        (
            {"home_row": 8},
            "sectors.invalid_setup",
            "options.home_row",
            "the home sector (row 8, column 3) is outside the 8x8 grid (rows 0-7, columns 0-7)",
        ),
        (
            {"home_type": "prairie", "rows": 0},
            "invalid_options",
            "options.rows",
            "Expected `int` >= 1 (field options.rows)",
        ),
    ],
)
def test_a_setup_the_rules_could_not_reach_is_refused_naming_the_field(options, code, field, message):
    error = setup_refusal(options)
    assert (error.code, error.field, error.message) == (code, field, message)


def test_a_setup_that_starts_after_its_last_year_is_refused_instead_of_being_born_over():
    # Given an explicit colony in year 3 of a game that ends after year 2
    options = {"years": 2, "setup": {"year": 3, "sectors": [sector("prairie", 10)]}}

    # When it is created, then the refusal names `years` and what it must be
    error = setup_refusal(options)
    assert (error.code, error.field, error.allowed) == ("sectors.invalid_setup", "options.years", {"min": 3})
    assert error.message == (
        "the game ends after the winter of year 2 (options.years), but the setup starts in year 3; "
        "years must be at least 3"
    )
    # And a game that ends after the setup's own year is fine
    assert Sandbox({**options, "years": 3}).game.year == 3


def test_an_explicit_setup_keeps_buildings_oldest_first_and_its_season_and_year():
    game = colony(sector("prairie", 40, "farm", "kitchen"), season="fall", year=3, rows=2, columns=3)
    state = game.game
    assert (state.rows, state.columns, state.season, state.year) == (2, 3, "fall", 3)
    assert state.sector(0, 0).buildings == ("farm", "kitchen")


# --- explore ----------------------------------------------------------------------------------


def test_exploring_draws_the_type_from_the_dice_at_that_moment_and_records_it():
    # Given a colony whose only explored sector is (0,0), and dice that will draw "mountain"
    game = colony(sector("prairie", 10), rows=2, columns=2)
    assert SECTOR_TYPE_NAMES[0] == "mountain"

    # When the owner explores (0,1)
    [explored] = game.play(Explore(row=0, column=1), dice=ScriptedDice([0]))

    # Then the event records the drawn type and the seed's initial population of one
    assert explored == SectorExplored(row=0, column=1, sector_type="mountain", population=1)
    assert game.game.sector(0, 1).type == "mountain"


def test_before_exploration_no_event_and_no_view_holds_the_sector_type():
    game = Sandbox({"home_type": "forest", "rows": 2, "columns": 2, "home_row": 0, "home_column": 0})
    view = DECIDER.view(game.game, "owner")
    assert view["grid"][0][1] == {"row": 0, "column": 1, "explored": False}
    encoded = b"".join(msgspec.msgpack.encode(event) for event in game.events())
    assert b"prairie" not in encoded and b"mountain" not in encoded
    assert all(cell is None for cell in game.game.sectors[1:])


@pytest.mark.parametrize(
    ("row", "column", "code", "message"),
    [
        (0, 0, "sectors.already_explored", "sector (row 0, column 0) is already explored (a prairie)"),
        (
            1,
            1,
            "sectors.not_adjacent",
            "sector (row 1, column 1) has no explored neighbour; only a sector directly above, below, "
            "left or right of an explored one can be explored",
        ),
        (
            2,
            0,
            "sectors.out_of_bounds",
            "sector (row 2, column 0) is outside the 2x2 grid (rows 0-1, columns 0-1)",
        ),
    ],
)
def test_exploring_is_refused_off_the_grid_twice_or_away_from_the_colony(row, column, code, message):
    game = colony(sector("prairie", 10), rows=2, columns=2)
    error = refusal(game, Explore(row=row, column=column))
    assert (error.code, error.message, error.field) == (code, message, "row")


@pytest.mark.parametrize(
    ("command", "field"),
    [
        (Explore(row=0, column=-1), "column"),
        (Explore(row=2, column=0), "row"),
        (Build(row=0, column=5, building="farm"), "column"),
        (Demolish(row=0, column=2, position=0), "column"),
        (MovePeople(from_row=0, from_column=7, to_row=0, to_column=1, count=1), "from_column"),
        (MovePeople(from_row=0, from_column=0, to_row=0, to_column=9, count=1), "to_column"),
        (MovePeople(from_row=0, from_column=0, to_row=-1, to_column=0, count=1), "to_row"),
    ],
)
def test_a_place_off_the_grid_is_refused_naming_the_coordinate_that_is_off(command, field):
    # Given a 2x2 colony
    game = colony(sector("prairie", 10), sector("forest", 5, column=1), rows=2, columns=2)

    # When a command names a place off the grid, then the refusal points at the coordinate at fault
    error = refusal(game, command)
    assert (error.code, error.field) == ("sectors.out_of_bounds", field)
    assert error.message.endswith("is outside the 2x2 grid (rows 0-1, columns 0-1)")


@pytest.mark.parametrize(
    ("options", "field", "code"),
    [
        ({"home_column": 8}, "options.home_column", "sectors.invalid_setup"),
        # Off every possible grid (negative, or past the largest side): the schema refuses it first.
        ({"home_row": -1}, "options.home_row", "invalid_options"),
        ({"home_row": 64}, "options.home_row", "invalid_options"),
        (
            {"setup": {"rows": 2, "columns": 2, "sectors": [sector("forest", 5, column=2)]}},
            "options.setup.sectors[0].column",
            "sectors.invalid_setup",
        ),
    ],
)
def test_a_setup_place_off_the_grid_is_refused_naming_the_coordinate_that_is_off(options, field, code):
    error = setup_refusal(options)
    assert (error.code, error.field) == (code, field)


# --- move -------------------------------------------------------------------------------------


def test_moving_people_takes_them_from_one_explored_sector_to_another():
    game = colony(sector("prairie", 30), sector("forest", 5, column=1))
    [moved] = game.play(MovePeople(from_row=0, from_column=0, to_row=0, to_column=1, count=30))
    assert isinstance(moved, PeopleMoved) and moved.count == 30
    assert (game.game.sector(0, 0).population, game.game.sector(0, 1).population) == (0, 35)


@pytest.mark.parametrize(
    ("command", "code", "field", "message"),
    [
        (
            MovePeople(from_row=0, from_column=0, to_row=0, to_column=1, count=31),
            "sectors.not_enough_people",
            "count",
            "sector (row 0, column 0) has 30 people; cannot move 31",
        ),
        (
            MovePeople(from_row=0, from_column=0, to_row=0, to_column=1, count=0),
            "sectors.invalid_count",
            "count",
            "count must be at least 1, got 0",
        ),
        (
            MovePeople(from_row=0, from_column=0, to_row=0, to_column=0, count=1),
            "sectors.same_sector",
            "to_row",
            "people must move to a different sector",
        ),
        (
            MovePeople(from_row=0, from_column=0, to_row=1, to_column=0, count=1),
            "sectors.not_explored",
            "to_row",
            "sector (row 1, column 0) is unexplored; explore it first",
        ),
        (
            MovePeople(from_row=5, from_column=0, to_row=0, to_column=0, count=1),
            "sectors.out_of_bounds",
            "from_row",
            "sector (row 5, column 0) is outside the 2x2 grid (rows 0-1, columns 0-1)",
        ),
    ],
)
def test_moving_people_is_refused_naming_the_rule(command, code, field, message):
    game = colony(sector("prairie", 30), sector("forest", 5, column=1), rows=2, columns=2)
    error = refusal(game, command)
    assert (error.code, error.field, error.message) == (code, field, message)


# --- build and demolish -----------------------------------------------------------------------


def test_building_pays_its_cost_and_stands_as_the_sectors_newest_building():
    game = colony(sector("prairie", 30, "farm"), stock={"wood": 45, "gold": 6})
    [built] = game.play(Build(row=0, column=0, building="kitchen"))
    assert built == BuildingBuilt(row=0, column=0, building="kitchen", cost=Goods(wood=30, gold=5))
    assert game.game.sector(0, 0).buildings == ("farm", "kitchen")
    assert game.game.stock == Goods(wood=15, gold=1)


def test_building_without_the_stock_names_every_shortfall():
    game = colony(sector("prairie", 30), stock={"wood": 12})
    error = refusal(game, Build(row=0, column=0, building="farm"))
    assert (error.code, error.message) == (
        "sectors.insufficient_stock",
        "a farm costs 20 wood; not enough wood: need 20, have 12",
    )
    error = refusal(game, Build(row=0, column=0, building="factory"))
    assert error.message == (
        "a factory costs 60 wood, 20 gold, 20 lumber; not enough wood: need 60, have 12; "
        "not enough gold: need 20, have 0; not enough lumber: need 20, have 0"
    )


def test_building_an_unknown_building_lists_the_buildings():
    error = refusal(colony(sector("prairie", 30)), Build(row=0, column=0, building="castle"))
    assert error.code == "sectors.unknown_building"
    assert error.allowed == list(BUILDING_NAMES)
    assert error.message == (
        "there is no building 'castle'; buildings: farm, lumber_camp, mine, mint, sawmill, kitchen, factory"
    )


def test_building_on_an_unexplored_sector_is_refused():
    error = refusal(colony(sector("prairie", 30), rows=2, columns=2), Build(row=1, column=1, building="farm"))
    assert (error.code, error.message) == (
        "sectors.not_explored",
        "sector (row 1, column 1) is unexplored; explore it first",
    )


def test_demolishing_removes_the_building_at_its_position_and_refunds_nothing():
    game = colony(sector("prairie", 30, "farm", "kitchen", "farm"), stock={})
    [demolished] = game.play(Demolish(row=0, column=0, position=1, building="kitchen"))
    assert demolished == BuildingDemolished(row=0, column=0, position=1, building="kitchen")
    assert game.game.sector(0, 0).buildings == ("farm", "farm")
    assert game.game.stock == Goods()


def test_demolishing_guards_against_a_stale_position():
    game = colony(sector("prairie", 30, "farm", "kitchen"))
    error = refusal(game, Demolish(row=0, column=0, position=0, building="kitchen"))
    assert (error.code, error.message) == (
        "sectors.building_mismatch",
        "the building at position 0 of sector (row 0, column 0) is a farm, not a kitchen",
    )
    error = refusal(game, Demolish(row=0, column=0, position=2))
    assert (error.code, error.field) == ("sectors.no_building", "position")
    assert error.message == (
        "sector (row 0, column 0) has 2 buildings at positions 0-1 (0 is the oldest); there is none at 2"
    )


# --- seasons, scores and the end --------------------------------------------------------------


def test_ending_the_season_runs_the_three_phases_in_order_then_moves_the_calendar():
    game = colony(sector("prairie", 30, "farm"), sector("forest", 20, column=1), season="winter", year=2)
    events = game.play(EndSeason())
    tags = [type(event).__name__ for event in events]
    assert tags == [
        "PopulationChanged",
        "PopulationChanged",
        "GoodsProduced",
        "ResourcesHarvested",
        "ResourcesHarvested",
        "SeasonEnded",
    ]
    closing = events[-1]
    assert isinstance(closing, SeasonEnded)
    assert (closing.season, closing.year, closing.next_season, closing.next_year) == (
        "winter",
        2,
        "spring",
        3,
    )
    # And its closing totals are what folding the season's events gives
    assert (closing.stock, closing.population) == (game.game.stock, 33 + 26)


def test_a_colony_reaches_victory_points_through_mint_sawmill_kitchen_and_factory():
    # Given a mountain mint, a forest sawmill and a prairie kitchen feeding a prairie factory
    game = colony(
        sector("mountain", 60, "mine", "mint"),
        sector("forest", 120, "lumber_camp", "sawmill", column=1),
        sector("prairie", 250, "farm", "kitchen", "factory", column=2),
        stock={"food": 300, "wood": 50, "gold": 10},
        rows=1,
        columns=3,
    )

    # When a year and a half passes
    for _ in range(6):
        game.play(EndSeason())

    # Then the factory has turned coins and lumber into victory points, which are the owner's score
    points = game.game.stock.victory_points
    assert points >= 2
    assert DECIDER.scores(game.game) == {"owner": rules.colony_score(game.game)}
    assert DECIDER.scores(game.game)["owner"] >= points * data.SCORE_PER_VICTORY_POINT
    assert DECIDER.resources(game.game)["victory_points"] == points


def test_the_game_ends_after_the_winter_of_its_last_year_and_the_room_closes():
    game = Sandbox({"home_type": "prairie", "years": 1})
    for _ in range(3):
        game.play(EndSeason())
    assert not DECIDER.is_over(game.game)
    events = game.play(EndSeason())
    assert DECIDER.is_over(game.game)
    assert isinstance(events[-1], room.RoomEnded) and game.state.ended
    with pytest.raises(RuleError) as caught:
        game.play(EndSeason())
    assert caught.value.code == "room_ended"


def test_the_view_shows_how_long_ago_each_sector_last_starved_which_decides_mountain_growth():
    # Given a mountain that starved two seasons ago and a prairie that never starved, with no food left
    game = colony(
        sector("mountain", 40, starved_seasons_ago=2),
        sector("prairie", 30, column=1),
        stock={},
        season="summer",
    )
    cells = DECIDER.view(game.game, "owner")["grid"][0]
    assert (cells[0]["starved_seasons_ago"], cells[1]["starved_seasons_ago"]) == (2, None)

    # When summer ends with no food, both starve
    game.play(EndSeason())

    # Then the view says both starved one season ago: the mountain will not grow this fall
    cells = DECIDER.view(game.game, "owner")["grid"][0]
    assert (cells[0]["starved_seasons_ago"], cells[1]["starved_seasons_ago"]) == (1, 1)


def test_the_view_resources_and_summaries_describe_the_colony():
    game = colony(sector("prairie", 30, "farm"), sector("mountain", 10, row=1), rows=2, columns=2)
    view = DECIDER.view(game.game, "owner")
    assert view["grid"][0][0] == {
        "row": 0,
        "column": 0,
        "explored": True,
        "type": "prairie",
        "population": 30,
        "population_cap": None,
        "buildings": ["farm"],
        "building_limit": None,
        "starved_seasons_ago": None,
    }
    assert view["grid"][1][1] == {"row": 1, "column": 1, "explored": False}
    assert (view["population"], view["season"], view["year"], view["over"]) == (40, "spring", 1, False)
    resources = DECIDER.resources(game.game)
    assert resources["population_by_sector"] == {"0,0": 30, "1,0": 10}
    assert (resources["explored"], resources["sectors"], resources["buildings"]) == (2, 4, 1)
    summaries = [DECIDER.summary(event) for event in game.play(EndSeason())]
    assert summaries[0] == "spring 1 (0,0) prairie: ate 6/6, +3 born, 30 -> 33"
    assert summaries[-1] == "spring of year 1 ended; now summer of year 1"
    event = SectorExplored(row=0, column=1, sector_type="forest", population=1)
    assert DECIDER.redact(event, "anyone") is event


# --- the rules page says what the code does -----------------------------------------------------


def doc_table_rows(first_cell: str) -> list[list[str]]:
    """The cells of every row of games/sectors/RULES.md whose first cell starts with ``first_cell``."""
    text = (Path(__file__).resolve().parents[2] / "games" / "sectors" / "RULES.md").read_text()
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()]
    return [row for row in rows if row[0].startswith(first_cell)]


def doc_goods(cell: str) -> dict[str, int]:
    goods = {}
    for part in filter(None, (item.strip() for item in cell.split(","))):
        amount, name = part.split(" ", 1)
        name = name.replace(" ", "_")
        goods[name if name in GOODS else f"{name}s"] = int(amount)
    return goods


def test_the_rules_page_building_table_is_the_code_table():
    for name, building in BUILDINGS.items():
        [[_, crew, inputs, outputs, cost, _]] = doc_table_rows(name)
        assert (int(crew), doc_goods(inputs), doc_goods(outputs), doc_goods(cost)) == (
            building.crew,
            dict(building.inputs),
            dict(building.outputs),
            dict(building.cost),
        ), name


def test_the_rules_page_sector_type_table_is_the_code_data():
    kinds = [SECTOR_TYPES[name] for name in ("mountain", "prairie", "forest")]
    [[_, *harvest]] = doc_table_rows("harvest per idle worker")
    [[_, *food]] = doc_table_rows("food per person")
    [[_, *caps]] = doc_table_rows("population cap")
    for kind, rates, needs, cap in zip(kinds, harvest, food, caps, strict=True):
        assert [Fraction(rate) for rate in rates.split(", ")] == [rate for _, rate in kind.harvest_rates]
        written = needs.removesuffix(" all year").split(", ")
        assert [Fraction(need) for need in written * (4 // len(written))] == list(kind.food_need.values())
        assert (int(cap) if cap.isdigit() else None) == kind.population_cap
