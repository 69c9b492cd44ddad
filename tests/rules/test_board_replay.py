"""Stored form and replay: codec and snapshot round trips, hash-stable folds, challenge deals, hidden deck."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
from game_modules import game_module, game_names
from test_board_support import Game

from almanac.events import codec
from almanac.events.decider import Context
from almanac.events.dice import Dice
from almanac.events.disclosure import HIDDEN
from almanac.events.hashing import first_broken_link, state_hash
from almanac.events.room import CreateRoom, RoomCreated, challenge_seed, decide as room_decide

DECIDER = game_module("board@1", "game").DECIDER
PlaceElement, SkipElement = game_names("board@1", "commands", "PlaceElement", "SkipElement")
(BASE_MISSIONS, DECK_NUMBERS, EXTENDED_MISSIONS) = game_names(
    "board@1", "data", "BASE_MISSIONS", "DECK_NUMBERS", "EXTENDED_MISSIONS")
DeckShuffled = game_module("board@1", "events").DeckShuffled
BoardSetup = game_module("board@1", "state").BoardSetup

ROOT = Path(__file__).resolve().parents[2]


def finished_game(seed: bytes = b"replay seed", options: dict | None = None) -> Game:
    return Game(seed=seed).create(options).play_out()


def test_every_event_round_trips_through_the_codec_and_the_chain_holds():
    game = finished_game(options={"extended_pool": True, "mountain_bonus": True})
    envelopes = game.envelopes()
    assert first_broken_link(envelopes) is None
    assert [codec.decode_event(envelope) for envelope in envelopes] == game.events
    assert {e.type for e in envelopes} >= {"room.created", "board.element_placed", "board.season_ended"}


def test_commands_decode_from_json_objects():
    command = codec.decode_command("board", {"kind": "place_element", "row": 3, "column": 4, "rotation": 90})
    assert command == PlaceElement(row=3, column=4, rotation=90, mirror=False)
    assert codec.decode_command("board", {"kind": "skip_element"}) == SkipElement()


def test_a_snapshot_decodes_to_the_same_room_state_mid_game_and_at_the_end():
    game = Game().create().play_out(b"snap", moves=6)
    for state in (game.state, finished_game().state):
        decoded, last_hash = codec.decode_snapshot(codec.encode_snapshot(state, "h" * 64))
        assert decoded == state and last_hash == "h" * 64
        assert state_hash(decoded) == state_hash(state)


def test_folding_the_decoded_log_in_another_process_with_another_hash_seed_gives_the_same_state_hash(
    tmp_path,
):
    game = finished_game(options={"extended_pool": True})
    log = tmp_path / "log.msgpack"
    log.write_bytes(msgspec.msgpack.encode([codec.encode_envelope(e) for e in game.envelopes()]))
    script = (
        "import sys, msgspec\n"
        "from almanac.events import codec, room\n"
        "from almanac.events.hashing import state_hash\n"
        "state = None\n"
        "for raw in msgspec.msgpack.decode(open(sys.argv[1], 'rb').read()):\n"
        "    envelope = codec.decode_envelope(raw, 'board-room', (state.version if state else 0) + 1)\n"
        "    state = room.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)\n"
        "print(state_hash(state))\n"
    )
    hashes = set()
    for hash_seed in ("1", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", script, str(log)],
            cwd=ROOT,
            env={"PYTHONHASHSEED": hash_seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        )
        hashes.add(result.stdout.strip())
    assert hashes == {state_hash(game.state)}


def test_folding_the_events_equals_the_live_state():
    game = finished_game()
    assert game.folded() == game.state


def create_challenge_room(room_id: str, challenge: str, extended: bool = False) -> RoomCreated:
    seed = challenge_seed(challenge)
    ctx = Context(
        room=room_id, player=f"player-of-{room_id}", now_ms=5, version=1, dice=Dice(seed, "challenge", 1)
    )
    [created] = room_decide(
        None, CreateRoom(ruleset="board", options={"extended_pool": extended}, challenge=challenge), ctx
    )
    return created


def test_rooms_of_the_same_challenge_get_the_same_deck_and_missions():
    first = create_challenge_room("room-one", "daily 2026-11-30", extended=True)
    second = create_challenge_room("room-two", "daily 2026-11-30", extended=True)
    assert first.setup.deck == second.setup.deck and first.setup.missions == second.setup.missions
    assert first.setup.player != second.setup.player  # each player owns their own map
    other_day = create_challenge_room("room-one", "daily 2026-12-01", extended=True)
    assert (other_day.setup.deck, other_day.setup.missions) != (first.setup.deck, first.setup.missions)


def test_players_of_one_challenge_get_the_same_reshuffles_however_they_play():
    shuffles, boards = [], []
    for room_id, policy_seed in (("room-one", b"careful"), ("room-two", b"reckless")):
        game = Game(room_id=room_id).create(challenge="weekly").play_out(policy_seed)
        shuffles.append([e.order for e in game.events if isinstance(e, DeckShuffled)])
        boards.append(game.game.board)
    assert boards[0] != boards[1]
    assert shuffles[0] == shuffles[1] and len(shuffles[0]) >= 1


def test_secret_seeded_rooms_deal_by_their_own_room_id():
    decks = {Game(room_id=f"room-{n}").create().game.deck for n in range(4)}
    assert len(decks) == 4


def test_the_setup_deals_a_shuffled_full_deck_and_four_distinct_cards_from_the_pool():
    for n in range(10):
        setup = Game(room_id=f"deal-{n}").create({"extended_pool": True}).events[0].setup
        assert sorted(setup.deck) == list(DECK_NUMBERS)
        assert len(set(setup.missions)) == 4 and set(setup.missions) <= set(BASE_MISSIONS + EXTENDED_MISSIONS)
    base = Game().create().events[0].setup
    assert sorted(base.missions) == sorted(BASE_MISSIONS)
    assert (base.mountain_bonus, base.extended_pool) == (False, False)
    both = Game().create({"extended_pool": True, "mountain_bonus": True}).events[0].setup
    assert (both.mountain_bonus, both.extended_pool) == (True, True)


def test_the_view_shows_the_current_element_but_never_the_deck_order():
    game = Game().create()
    view = DECIDER.view(game.game, "ada")
    assert view["current_element"]["number"] == game.game.deck[0]
    assert view["time"] == 0 and view["time_remaining"] == 28 and view["season"] == "spring"
    assert view["season_time_remaining"] == 7
    assert [card["card"] for card in view["missions"]] == ["A", "B", "C", "D"]
    assert view["missions"][0]["scored_in"] == ["spring", "winter"]
    assert len(view["board"]) == 11 and view["board"][1][1] == "mountain"
    assert "deck" not in json.dumps(view)
    assert set(view) == {
        "player", "board", "time", "time_remaining", "season", "season_time_remaining",
        "current_element", "missions", "mountain_bonus", "scores", "over",
    }  # fmt: skip


def test_redaction_strips_the_deck_order_from_shuffles_and_the_setup_but_the_stored_events_keep_it():
    game = finished_game()
    shuffle = next(e for e in game.events if isinstance(e, DeckShuffled))
    shown = DECIDER.redact(shuffle, "ada")
    assert shown == DeckShuffled(size=16, order=HIDDEN, hidden=True)
    assert DECIDER.summary(shown) == "deck of 16 elements shuffled (order hidden)"
    assert len(shuffle.order) == 16
    created = game.events[0]
    shown_created = DECIDER.redact(created, "ada")
    assert isinstance(shown_created.setup, BoardSetup) and shown_created.setup.deck is HIDDEN
    assert shown_created.setup.missions == created.setup.missions
    assert len(created.setup.deck) == 16
    for event in game.events:
        if not isinstance(event, DeckShuffled | RoomCreated):
            assert DECIDER.redact(event, "ada") is event


def test_every_event_has_a_one_line_summary():
    for event in finished_game().events[2:-1]:
        line = DECIDER.summary(event)
        assert line and "\n" not in line
