"""Properties over random colonies and command sequences: bounds hold, stocks stay whole, replay agrees."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from test_sectors_support import stored

from events import codec, room
from events.dice import Dice
from events.errors import RuleError
from events.hashing import state_hash
from events.sectors import DECIDER
from events.sectors.commands import Build, Demolish, EndSeason, Explore, MovePeople
from events.sectors.data import BUILDING_NAMES, GOODS, SEASONS, SECTOR_TYPE_NAMES, SECTOR_TYPES
from events.sectors.events import SeasonEnded
from events.sectors.policy import choose_command
from events.sectors.sandbox import Sandbox

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
