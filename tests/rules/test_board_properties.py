"""Properties over random command sequences and policy games: no overlaps, mountains stay, folds agree."""

from __future__ import annotations

from game_modules import game_module, game_names
from hypothesis import given, settings, strategies as st
from test_board_support import Game

from almanac.events import codec
from almanac.events.dice import Dice
from almanac.events.errors import RuleError

DECIDER = game_module("board@1", "game").DECIDER
PlaceElement, SkipElement = game_names("board@1", "commands", "PlaceElement", "SkipElement")
MOUNTAIN, MOUNTAINS, SIZE = game_names("board@1", "data", "MOUNTAIN", "MOUNTAINS", "SIZE")
ElementPlaced, SeasonEnded = game_names("board@1", "events", "ElementPlaced", "SeasonEnded")
choose_command = game_module("board@1", "policy").choose_command

commands = st.one_of(
    st.builds(
        PlaceElement,
        row=st.integers(-2, SIZE + 1),
        column=st.integers(-2, SIZE + 1),
        rotation=st.sampled_from([0, 90, 180, 270, 45]),
        mirror=st.booleans(),
    ),
    st.just(SkipElement()),
    st.none(),  # the simple policy's move: crowds the map, so refusals and skips meet a full one too
)


def filled_cells(game: Game) -> int:
    return sum(1 for line in game.game.board for cell in line if cell)


@settings(max_examples=40, deadline=None)
@given(seed=st.binary(min_size=1, max_size=8), plays=st.lists(commands, max_size=40))
def test_no_sequence_of_commands_overlaps_cells_or_covers_a_mountain(seed, plays):
    game = Game(seed=seed).create({"extended_pool": True, "mountain_bonus": True})
    policy_dice = Dice(seed, "policy", 0)
    covered: set[tuple[int, int]] = set()
    for command in plays:
        if game.state.ended:
            break
        if command is None:
            command = choose_command(game.game, game.player, policy_dice)
        try:
            events = game.play(command)
        except RuleError as error:
            assert error.code.startswith("board.")
            continue
        for event in events:
            if isinstance(event, ElementPlaced):
                cells = set(event.cells)
                assert len(cells) == len(event.cells)
                assert not cells & covered, "a placement overlapped an earlier one"
                assert not cells & set(MOUNTAINS), "a placement covered a mountain"
                assert all(0 <= r < SIZE and 0 <= c < SIZE for r, c in cells)
                covered |= cells
    assert all(game.game.board[r][c] == MOUNTAIN for r, c in MOUNTAINS)
    assert filled_cells(game) == len(covered) + len(MOUNTAINS)
    assert game.folded() == game.state


@settings(max_examples=15, deadline=None)
@given(seed=st.binary(min_size=1, max_size=8), extended=st.booleans(), bonus=st.booleans())
def test_policy_games_end_at_28_and_folding_their_decoded_log_equals_the_live_state(seed, extended, bonus):
    game = Game(seed=seed).create({"extended_pool": extended, "mountain_bonus": bonus})
    game.play_out()
    assert choose_command(game.game, game.player, Dice(seed, "policy", 0)) is None
    assert game.game.time >= 28 and len(game.game.seasons) == 4
    seasons = [e for e in game.events if isinstance(e, SeasonEnded)]
    assert game.game.total == sum(s.total for s in seasons) == DECIDER.scores(game.game)[game.player]
    assert all(s.total == sum(m.points for m in s.missions) + s.mountain_bonus for s in seasons)
    decoded = [codec.decode_event(envelope) for envelope in game.envelopes()]
    assert decoded == game.events
    game.events = decoded
    assert game.folded() == game.state


def _counted_cell_by_cell(board, terrain: str, neighbour: str, points: int) -> int:
    """The cards' text read literally: each ``terrain`` cell with a ``neighbour`` next to it, once."""
    neighbours = game_module("board@1", "missions").neighbours

    return sum(points for row, cells in enumerate(board) for column, here in enumerate(cells)
               if here == terrain and any(board[r][c] == neighbour for r, c in neighbours(row, column)))


boards = st.lists(st.lists(st.sampled_from(["", "forest", "village", "farm", "water", "mountain"]),
                           min_size=SIZE, max_size=SIZE).map(tuple), min_size=SIZE, max_size=SIZE).map(tuple)


@settings(max_examples=300, deadline=None)
@given(board=boards)
def test_the_neighbour_cards_score_any_board_as_their_text_reads_cell_by_cell(board):
    missions = game_module("board@1", "missions")

    assert missions.watering_potatoes(board) == _counted_cell_by_cell(board, "water", "farm", 2)
    assert missions.magicians_valley(board) == _counted_cell_by_cell(board, "water", "mountain", 3)
    assert missions.empty_site(board) == _counted_cell_by_cell(board, "", "village", 2)


@settings(max_examples=300, deadline=None)
@given(board=boards)
def test_the_edge_and_column_cards_score_any_board_as_their_text_reads_cell_by_cell(board):
    missions = game_module("board@1", "missions")

    ring = sum(1 for row, cells in enumerate(board) for column, here in enumerate(cells)
               if here == "forest" and (row in (0, SIZE - 1) or column in (0, SIZE - 1)))
    assert missions.edge_of_the_forest(board) == ring
    assert missions._columns(board) == [tuple(board[row][column] for row in range(SIZE)) for column in range(SIZE)]
