"""Properties over random colonies and command sequences: bounds hold, stocks stay whole, replay agrees."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from game_modules import game_module, game_names
from hypothesis import HealthCheck, given, settings, strategies as st
from sectors_sandbox import Sandbox
from test_sectors_support import stored

from almanac.events import codec, room
from almanac.events.dice import Dice
from almanac.events.errors import RuleError
from almanac.events.hashing import state_hash

DECIDER = game_module("sectors@1", "game").DECIDER
(Build, Demolish, EndSeason, Explore, MovePeople) = game_names(
    "sectors@1", "commands", "Build", "Demolish", "EndSeason", "Explore", "MovePeople")
(BUILDING_NAMES, BUILDINGS, GOODS, SEASONS, SECTOR_TYPE_NAMES, SECTOR_TYPES) = game_names(
    "sectors@1", "data", "BUILDING_NAMES", "BUILDINGS", "GOODS", "SEASONS", "SECTOR_TYPE_NAMES", "SECTOR_TYPES")
SeasonEnded = game_module("sectors@1", "events").SeasonEnded
choose_command = game_module("sectors@1", "policy").choose_command

SIDE = 4


@st.composite
def colonies(draw: st.DrawFn) -> dict[str, Any]:
    """Options of an explicit colony that the rules accept: any types, populations within caps, buildings within limits."""
    rows = draw(st.integers(1, SIDE))
    columns = draw(st.integers(1, SIDE))
    cells = [(row, column) for row in range(rows) for column in range(columns)]
    explored = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=len(cells), unique=True))
    sectors = []
    for row, column in explored:
        kind = SECTOR_TYPES[draw(st.sampled_from(SECTOR_TYPE_NAMES))]
        allowed = [name for name in BUILDING_NAMES if name not in kind.banned_buildings]
        sectors.append(
            {
                "row": row,
                "column": column,
                "type": kind.name,
                "population": draw(st.integers(0, kind.population_cap or 1500)),
                "buildings": draw(st.lists(st.sampled_from(allowed), max_size=kind.building_limit or 12)),
                "starved_seasons_ago": draw(st.none() | st.integers(1, 6)),
            }
        )
    stock = {good: draw(st.integers(0, 400) | st.integers(0, 5000)) for good in GOODS}
    season = draw(st.sampled_from(SEASONS))
    return {"setup": {"rows": rows, "columns": columns, "season": season, "stock": stock, "sectors": sectors}}


# Mostly inside the largest grid, sometimes just outside it
coordinates = st.integers(0, SIDE - 1) | st.sampled_from((-1, SIDE))
# "policy" asks the legal-move policy for a command, so that sequences also go deep into a game
# instead of being mostly refusals
POLICY = "policy"
# ("move", i, j, count) moves between the i-th and j-th explored sectors, whichever they are by then
moves_between_explored = st.tuples(
    st.just("move"), st.integers(0, 15), st.integers(0, 15), st.integers(1, 120)
)
commands = st.one_of(
    st.just(POLICY),
    moves_between_explored,
    st.builds(EndSeason),
    st.builds(Explore, row=coordinates, column=coordinates),
    st.builds(
        MovePeople,
        from_row=coordinates,
        from_column=coordinates,
        to_row=coordinates,
        to_column=coordinates,
        count=st.integers(-1, 250),
    ),
    st.builds(
        Build, row=coordinates, column=coordinates, building=st.sampled_from((*BUILDING_NAMES, "castle"))
    ),
    st.builds(
        Demolish,
        row=coordinates,
        column=coordinates,
        position=st.integers(-1, 6),
        building=st.none() | st.sampled_from(BUILDING_NAMES),
    ),
)


def assert_within_the_rules(game: Sandbox) -> None:
    state = game.game
    for _, _, sector in state.explored():
        kind = SECTOR_TYPES[sector.type]
        assert 0 <= sector.population <= (kind.population_cap or sector.population)
        assert not set(sector.buildings) & set(kind.banned_buildings)
        assert kind.building_limit is None or len(sector.buildings) <= kind.building_limit
    assert all(amount >= 0 for amount in state.stock.as_dict().values()), state.stock
    view = DECIDER.view(state, state.owner)
    assert all("type" not in cell for row in view["grid"] for cell in row if not cell["explored"])


def replay(game: Sandbox) -> room.RoomState:
    """Every recorded event through the codec (as the store keeps it) and folded from the start."""
    state = None
    for envelope in stored(game):
        state = room.evolve(state, codec.decode_event(envelope), game.room_id, envelope.version)
    assert state is not None
    return state


def assert_replay_agrees(game: Sandbox) -> None:
    replayed = replay(game)
    assert replayed == game.state
    assert state_hash(replayed) == state_hash(game.state)
    # Each season's closing totals, computed by the rules while deciding, match the fold so far
    folded = None
    for version, event in game.log:
        folded = room.evolve(folded, event, game.room_id, version)
        if isinstance(event, SeasonEnded):
            assert folded.game.stock == event.stock
            assert sum(sector.population for _, _, sector in folded.game.explored()) == event.population


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=colonies(), script=st.lists(commands, min_size=5, max_size=30))
def test_random_commands_keep_the_colony_within_the_rules_and_replay_to_the_same_state(options, script):
    game = Sandbox({**options, "years": 1000})
    for step in script:
        command = step
        if step == POLICY:
            command = choose_command(game.game, game.game.owner, Dice(b"property", "policy", game.version))
        elif isinstance(step, tuple):
            explored = game.game.explored()
            source, target = explored[step[1] % len(explored)], explored[step[2] % len(explored)]
            command = MovePeople(
                from_row=source[0],
                from_column=source[1],
                to_row=target[0],
                to_column=target[1],
                count=step[3],
            )
        before = game.state
        try:
            game.play(command)
        except RuleError as error:
            assert error.code.startswith("sectors."), error
            assert game.state is before
        assert_within_the_rules(game)
    assert_replay_agrees(game)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=colonies(), policy_seed=st.binary(min_size=1, max_size=8), steps=st.integers(1, 40))
def test_the_policy_only_chooses_legal_commands_over_random_colonies(options, policy_seed, steps):
    game = Sandbox({**options, "years": 1000})
    for _ in range(steps):
        command = choose_command(game.game, game.game.owner, Dice(policy_seed, "policy", game.version))
        assert command is not None
        game.play(command)
        assert_within_the_rules(game)
    assert_replay_agrees(game)


@settings(max_examples=10, deadline=None)
@given(secret=st.binary(min_size=1, max_size=8))
def test_a_generated_colony_played_by_the_policy_to_its_end_stays_within_the_rules(secret):
    game = Sandbox({"years": 2}, secret_seed=secret)
    while (
        command := choose_command(game.game, game.game.owner, Dice(secret, "policy", game.version))
    ) is not None:
        game.play(command)
        assert_within_the_rules(game)
    assert game.state.ended and DECIDER.is_over(game.game)
    assert choose_command(game.game, "someone else", Dice(secret, "policy", 0)) is None
    assert_replay_agrees(game)


# --- an independent model of a season ---------------------------------------------------------
# The seed's rates as its text writes them, and the design rulings, coded apart from the game's own tables
# (only the building table, which is ours, is shared), season by season with Fraction and math.

SEED_FOOD_NEED = {
    "mountain": dict.fromkeys(SEASONS, "0.5"),
    "prairie": {"spring": "0.2", "summer": "0.2", "fall": "0.2", "winter": "0.6"},
    "forest": {"spring": "0.3", "summer": "0.3", "fall": "0.1", "winter": "0.7"},
}
SEED_HARVEST = {
    "mountain": {"wood": "0.25", "food": "0.00", "gold": "1.00"},
    "prairie": {"wood": "0.25", "food": "1.00", "gold": "0.00"},
    "forest": {"wood": "1.20", "food": "0.30", "gold": "0.10"},
}
SEED_GROWTH = {
    "mountain": ("0.33", {"fall"}),
    "prairie": ("0.1", set(SEASONS)),
    "forest": ("0.3", {"winter"}),
}
SEED_CAP = {"mountain": 100, "forest": 200}


def model_season(people: list[list[Any]], stock: dict[str, int], season: str) -> None:
    """One end of season over [type, population, buildings, seasons since each starvation] rows."""
    for entry in people:  # population change, row-major
        kind, population = entry[0], entry[1]
        need = math.ceil(population * Fraction(SEED_FOOD_NEED[kind][season]))
        if stock["food"] >= need:
            stock["food"] -= need
            survivors = population
        else:
            survivors = math.floor(population * Fraction(stock["food"], need))
            stock["food"] = 0
            entry[3].append(0)
        rate, seasons = SEED_GROWTH[kind]
        grows = season in seasons and not (kind == "mountain" and any(ago < 4 for ago in entry[3]))
        grown = survivors + (math.floor(survivors * Fraction(rate)) if grows else 0)
        entry[1] = min(grown, SEED_CAP.get(kind, grown))
    idle = []
    for kind, population, buildings, _ in people:  # production, newest building first
        workers = population
        bonus = {("mountain", "fall"): Fraction(1, 2), ("prairie", "winter"): Fraction(11, 10)}.get(
            (kind, season), Fraction(1)
        )
        if not (kind == "mountain" and season == "winter"):
            for name in reversed(buildings):
                building = BUILDINGS[name]
                if workers < building.crew:
                    continue
                workers -= building.crew
                if all(stock[good] >= amount for good, amount in building.inputs):
                    for good, amount in building.inputs:
                        stock[good] -= amount
                    for good, amount in building.outputs:
                        stock[good] += math.floor(amount * bonus)
        idle.append(workers)
    for (kind, population, buildings, _), workers in zip(people, idle, strict=True):  # harvest
        if kind == "mountain" and season == "winter":
            continue
        cut = Fraction(1)
        if kind == "prairie" and population > 1000:
            cut *= Fraction("0.5")
        if kind == "prairie" and len(buildings) > 10:
            cut *= Fraction("0.2")
        for good, rate in SEED_HARVEST[kind].items():
            stock[good] += math.floor(workers * Fraction(rate) * cut)
        if kind == "mountain" and season == "spring":
            stock["gold"] += math.floor(population * Fraction("0.1"))
        if kind == "forest" and season == "fall":
            stock["food"] += math.floor(population * Fraction("0.4"))
    for entry in people:
        entry[3][:] = [ago + 1 for ago in entry[3]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=colonies(), seasons=st.integers(1, 9))
def test_every_season_matches_an_independent_model_of_the_seed_and_the_rulings(options, seasons):
    # Given any colony the rules accept
    setup = options["setup"]
    game = Sandbox({**options, "years": 1000})
    people = [
        [
            s["type"],
            s["population"],
            s["buildings"],
            [] if s["starved_seasons_ago"] is None else [s["starved_seasons_ago"]],
        ]
        for s in sorted(setup["sectors"], key=lambda s: (s["row"], s["column"]))
    ]
    stock = dict(setup["stock"])
    start = SEASONS.index(setup["season"])

    for played in range(seasons):
        # When a season ends in the rules and in the model
        game.play(EndSeason())
        model_season(people, stock, SEASONS[(start + played) % len(SEASONS)])

        # Then every sector's population and the whole stock agree exactly
        assert [sector.population for _, _, sector in game.game.explored()] == [entry[1] for entry in people]
        assert game.game.stock.as_dict() == stock, f"season {played}"
