"""Replay and invariants: random legal play never drives holdings negative, folding equals the live state,
the state hash is the same in another process, snapshots and events survive the codec, views hide storage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from game_modules import game_module
from hypothesis import given, settings, strategies as st
from test_realm_support import Game, faces

from almanac.events import codec, room as room_rules
from almanac.events.dice import Dice
from almanac.events.disclosure import HIDDEN
from almanac.events.hashing import state_hash
from almanac.events.step import replay

DECIDER = game_module("realm@1", "game").DECIDER
audit = game_module("realm@1", "audit")
data = game_module("realm@1", "data")
realm_events = game_module("realm@1", "events")
choose_command = game_module("realm@1", "policy").choose_command
RealmState = game_module("realm@1", "state").RealmState

ROOT = Path(__file__).resolve().parents[2]


def play(game: Game, commands: int, seed: int) -> None:
    """Random legal play: a dice-chosen player, the policy's command, real dice from the room's seed."""
    chooser = Dice(b"realm test policy", str(seed), 0)
    players = game.game.players
    for step in range(commands):
        if game.state.ended:
            return
        player = players[chooser.randbelow(len(players))]
        command = choose_command(game.game, player, chooser)
        if command is None:
            continue
        game.send(player, codec.encode_command(command), now_ms=1_000 + step)
        check_holdings(game.game)


def check_holdings(state: RealmState) -> None:
    for city in state.cities.values():
        assert all(amount >= 0 for amount in city.stock.values()), city
        assert list(city.stock) == list(data.RESOURCES)
        assert (
            city.population >= 0 and city.hit_points >= 0 and city.saved_stars >= 0 and city.saved_wards >= 0
        )
        assert city.army is None or (
            city.army.soldiers >= data.MINIMUM_ARMY and city.army.soldiers % 100 == 0
        )
    for merchant in state.merchants.values():
        assert all(amount >= 0 for amount in merchant.load.values()), merchant
        assert state.cities[merchant.home].merchant == merchant.trade_id
    for player, used in state.actions_used.items():
        assert used <= state.actions_per_season, player


def fold(envelopes: list[Any]) -> room_rules.RoomState:
    state = replay(envelopes)
    assert state is not None
    return state


def check_recorded_holdings(game: Game) -> None:
    """Every 'holdings after' a trade step records equals the state right after it, and the audit re-derives
    every trade of the log without a disagreement."""
    state = None
    for envelope, event in zip(game.envelopes, game.events, strict=True):
        state = room_rules.evolve(state, event, envelope.room, envelope.version)
        if not isinstance(event, audit.TRADE_EVENTS):
            continue
        realm = state.game
        assert event.home_after == realm.cities[audit.home_of(event)].stock, event
        assert event.host_after == realm.cities[audit.host_of(event)].stock, event
        merchant = realm.merchants.get(event.trade_id)
        assert event.load_after == (merchant.load if merchant else {name: 0 for name in data.RESOURCES})
        if isinstance(event, realm_events.MerchantIntercepted):
            assert event.attacker_after == realm.cities[event.attacker].stock
    events = game.game_events()
    for trade_id in audit.trade_ids(events):
        assert audit.check_trade(events, trade_id) == [], trade_id
    assert [msgspec.to_builtins(row) for row in game.game.ledger] == audit.ledger(events)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), players=st.integers(2, 3), villages=st.integers(0, 2))
def test_random_legal_play_keeps_holdings_whole_and_folding_equals_the_live_state(
    seed: int, players: int, villages: int
) -> None:
    game = Game(
        players=("alice", "bob", "carol")[:players], room_id=f"prop-{seed}", villages=villages, years=2
    )
    play(game, 200, seed)
    assert state_hash(fold(game.envelopes)) == state_hash(game.state)
    check_recorded_holdings(game)


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.integers(0, 5), min_size=8, max_size=8), ore=st.sampled_from(data.ORES))
def test_mining_never_finds_a_negative_or_unrounded_amount(values: list[int], ore: str) -> None:
    resolve_mining = game_module("realm@1", "rules").resolve_mining

    rolled = tuple(data.FACES[v] for v in values[: data.MINING_DICE[ore]])
    for moons in ("count", "save"):
        result = resolve_mining(ore, rolled, moons, 0, "best")
        assert result.amount >= 0 and result.amount % 100 == 0
        assert (result.found == "") == (result.amount == 0 and result.outcome == "nothing")


def played_game(seed: int = 7) -> Game:
    game = Game(players=("alice", "bob", "carol"), room_id="replay", villages=1, years=3)
    play(game, 400, seed)
    return game


def test_folding_in_another_process_with_another_hash_seed_gives_the_same_state_hash(tmp_path: Path) -> None:
    game = played_game()
    log = tmp_path / "log.msgpack"
    log.write_bytes(msgspec.msgpack.encode([codec.encode_envelope(e) for e in game.envelopes]))
    script = (
        "import sys, msgspec\n"
        "from almanac.events import codec, room\n"
        "from almanac.events.hashing import state_hash\n"
        "state = None\n"
        "for raw in msgspec.msgpack.decode(open(sys.argv[1], 'rb').read()):\n"
        "    env = codec.decode_envelope(raw, 'replay', (state.version if state else 0) + 1)\n"
        "    state = room.evolve(state, codec.decode_event(env), env.room, env.version)\n"
        "print(state_hash(state))\n"
    )
    hashes = set()
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", script, str(log)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=True,
        )
        hashes.add(done.stdout.strip())
    assert hashes == {state_hash(game.state)}


def test_snapshots_round_trip_through_the_codec() -> None:
    game = played_game(11)
    data_bytes = codec.encode_snapshot(game.state, game.envelopes[-1].hash)
    state, last = codec.decode_snapshot(data_bytes)
    assert state == game.state and last == game.envelopes[-1].hash
    assert state_hash(state) == state_hash(game.state)


HIDDEN_JSON = {"hidden": True}


def test_every_command_and_event_type_round_trips_and_summarises() -> None:
    game = played_game(3)
    for event in game.game_events():
        assert DECIDER.summary(event)
        for player in game.game.players:
            seen = DECIDER.redact(event, player)
            assert type(seen) is type(event)
            # What a player receives is JSON; hidden fields hold the marker, the rest is the stored event.
            shown = msgspec.json.decode(codec.to_json(seen))
            stored = msgspec.json.decode(codec.to_json(event))
            assert {k for k, v in shown.items() if v != stored[k]} <= {k for k, v in shown.items() if v == HIDDEN_JSON}
    for kind in DECIDER.command_types:
        tag = kind.__struct_config__.tag
        assert tag in codec.command_kinds("realm")


def test_a_player_sees_its_own_storage_and_only_the_public_face_of_others() -> None:
    game = Game(players=("alice", "bob", "carol"))
    view = DECIDER.view(game.game, "alice")
    assert "stock" in view["cities"]["alice"] and "stock" not in view["cities"]["bob"]
    assert view["cities"]["bob"]["hit_points"] == 10 and view["cities"]["bob"]["army"]["soldiers"] == 1_000
    trade_id = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])[
        0
    ].trade_id
    assert DECIDER.view(game.game, "bob")["merchants"][0]["load"]["gold"] == 1_000
    assert "load" not in DECIDER.view(game.game, "carol")["merchants"][0]
    assert DECIDER.view(game.game, "carol")["merchants"][0]["trade_id"] == trade_id


def test_redaction_hides_other_cities_finds_and_holdings() -> None:
    game = Game(players=("alice", "bob", "carol"))
    (mined,) = game.send("alice", {"kind": "mine", "ore": "gold"}, dice=faces("7 star", "blank"))
    assert DECIDER.redact(mined, "alice") == mined
    hidden = DECIDER.redact(mined, "bob")
    assert (hidden.city, hidden.ore, hidden.amount, hidden.dice) == ("alice", "gold", HIDDEN, HIDDEN)
    game.end_season()
    (sent,) = game.send("alice", {"kind": "send_merchant", "to": "bob", "load": {"gold": 1_000}}, dice=[])
    assert DECIDER.redact(sent, "bob").load == sent.load
    assert DECIDER.redact(sent, "carol").load is HIDDEN and DECIDER.redact(sent, "carol").home_after is HIDDEN


def test_scores_value_holdings_people_soldiers_and_walls() -> None:
    game = Game()
    # 10,000 food + 4,000 wood + 2 x 1,000 herbs + 3,000 stone + 5 x 2,000 gold = 29,000;
    # 5,000 people, 10 hit points x 1,000, 1,000 soldiers x 2 -> 46,000 -> 46
    assert DECIDER.scores(game.game) == {"alice": 46, "bob": 46}
    resources = DECIDER.resources(game.game)
    assert resources["cities"]["alice"]["stock"]["gold"] == 2_000 and resources["ledger"] == []
