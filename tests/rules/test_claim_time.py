"""Growth follows event time only: the same commands at the same server times give the same claim anywhere."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from game_modules import game_folder, game_module, game_names
from test_claim_support import HOUR, MINUTE, T0, ClaimGame, fold_events

from almanac.events import codec
from almanac.events.hashing import state_hash

DECIDER = game_module("claim@1", "game").DECIDER
Cut, Replant = game_names("claim@1", "commands", "Cut", "Replant")
ParcelCut, TimberCruised = game_names("claim@1", "events", "ParcelCut", "TimberCruised")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT: list[tuple[int, dict]] = [
    (MINUTE, {"kind": "cut", "parcel": "C1"}),
    (2 * MINUTE, {"kind": "cut", "parcel": "G1"}),
    (3 * MINUTE, {"kind": "haul"}),
    (4 * MINUTE, {"kind": "replant", "parcel": "C1", "species": "wp"}),
    (5 * MINUTE, {"kind": "farm", "parcel": "A8"}),
    (3 * HOUR, {"kind": "cut", "parcel": "A1"}),
    (7 * HOUR, {"kind": "harvest", "parcel": "A8"}),
    (8 * HOUR, {"kind": "build", "parcel": "G1", "building": "cabin"}),  # refused: the ridge
    (8 * HOUR, {"kind": "build", "parcel": "C8", "building": "cabin"}),
    (20 * HOUR, {"kind": "cruise"}),
    (30 * HOUR, {"kind": "cut", "parcel": "C1"}),
    (30 * HOUR, {"kind": "haul"}),
    (49 * HOUR, {"kind": "prove_up"}),
]

# Run in a fresh interpreter: play the script and fold the given log, with the wall clock moved
# to 2061 and a different PYTHONHASHSEED; print the hashes.
CHILD = """
import json, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests", sys.argv[1] + "/tests/rules"]
time.time = lambda: 2_935_000_000.0
time.time_ns = lambda: 2_935_000_000 * 10**9
from test_claim_support import T0, ClaimGame, fold_events
from almanac.events import codec
from almanac.events.envelope import Envelope
from almanac.events.hashing import state_hash
data = json.load(sys.stdin)
game = ClaimGame()
for offset, command in data["script"]:
    try:
        game.do(command, at=T0 + offset)
    except Exception as error:
        assert getattr(error, "code", "").startswith("claim."), error
state = None
from almanac.events import room
for version, (tag, payload) in enumerate(data["log"], start=1):
    envelope = Envelope(room="claim-1", version=version, ruleset="claim", type=tag, payload=bytes.fromhex(payload),
                        command_id="c", player="ann", server_time_ms=0, previous_hash="")
    state = room.evolve(state, codec.decode_event(envelope), "claim-1", version)
print(json.dumps({"played": state_hash(game.state), "folded": state_hash(state)}))
"""


def _play() -> ClaimGame:
    game = ClaimGame()
    for offset, command in SCRIPT:
        try:
            game.do(command, at=T0 + offset)
        except Exception as error:  # noqa: BLE001 - one scripted refusal
            assert error.code == "claim.site_not_allowed"
    return game


def test_the_same_commands_at_the_same_times_give_the_same_claim_whatever_the_wall_clock(monkeypatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 0.0)
    monkeypatch.setattr(time, "time_ns", lambda: 0)
    first = _play()
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)
    monkeypatch.setattr(time, "time_ns", lambda: 4_000_000_000 * 10**9)
    second = _play()
    assert first.events == second.events
    assert state_hash(first.state) == state_hash(second.state)
    assert first.state.ended  # the script proves the claim up


def test_a_log_folds_to_the_same_state_hash_in_another_process_with_another_hash_seed_and_clock() -> None:
    game = _play()
    log = [(tag, payload.hex()) for tag, payload in map(codec.encode_event, game.events)]
    env = dict(os.environ, PYTHONHASHSEED="4242", TZ="Pacific/Auckland")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT)],
        input=json.dumps({"script": SCRIPT, "log": log}),
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    hashes = json.loads(result.stdout)
    assert hashes == {"played": state_hash(game.state), "folded": state_hash(game.state)}
    assert state_hash(fold_events("claim-1", game.events)) == state_hash(game.state)


def test_the_same_parcel_cut_later_in_event_time_gives_more_wood() -> None:
    early, late = ClaimGame(), ClaimGame()
    [first] = early.do(Cut(parcel="H4"), at=T0)
    [second] = late.do(Cut(parcel="H4"), at=T0 + 10 * HOUR)
    assert first.age_ms + 10 * HOUR == second.age_ms
    # Larch (growth 11/10, stand 9/10), 17.23 real hours at staking: 18.95 adjusted -> 5527 x 9/10.
    # Ten hours later: 29.95 adjusted -> 6000 + 5000 x 9.95/10 = 10976 x 9/10 -> 9877 (rounded down).
    assert (first.board_feet, second.board_feet) == (4_974, 9_877)
    assert second.value_cents > first.value_cents


def test_every_claim_event_records_the_server_time_of_its_command() -> None:
    game = _play()
    claim_events = [e for e in game.events if type(e) in DECIDER.event_types]
    assert all(hasattr(e, "at_ms") for e in claim_events)
    times = {T0 + offset for offset, _ in SCRIPT}
    assert {e.at_ms for e in claim_events} <= times


def test_evolve_reads_only_the_events_fields() -> None:
    game = ClaimGame()
    # A recorded cut is applied as written, however the stand would measure now.
    recorded = ParcelCut(
        at_ms=T0 + 5 * HOUR,
        parcel=2,
        species="df",
        age_ms=1,
        grade="poles",
        board_feet=7,
        logs=1,
        value_cents=3,
        cost_cents=11,
    )
    after = DECIDER.evolve(game.claim, recorded)
    assert after.deck[0].board_feet == 7 and after.cash_cents == 10_000 - 11
    assert after.clock_ms == T0 + 5 * HOUR
    assert DECIDER.evolve(game.claim, recorded) == after  # and the input is not mutated
    assert game.claim.deck == ()


def test_the_claims_clock_only_moves_forward() -> None:
    game = ClaimGame()
    later = DECIDER.evolve(
        game.claim, TimberCruised(at_ms=T0 + HOUR, board_feet=0, value_cents=0, cover_parcels=61)
    )
    earlier = DECIDER.evolve(later, TimberCruised(at_ms=T0, board_feet=0, value_cents=0, cover_parcels=61))
    assert earlier.clock_ms == T0 + HOUR


def test_a_server_time_before_planting_counts_as_a_seedling() -> None:
    # Given C1 cut and replanted two hours after staking, a cut timed an hour after staking (before the
    # replanting; a gateway's clock may lag) finds a seedling, not timber. (Before the staking itself
    # every command is refused: claim.before_staking.)
    game = ClaimGame()
    game.do(Cut(parcel="C1"), at=T0 + MINUTE)
    game.do(Replant(parcel="C1", species="wp"), at=T0 + 2 * HOUR)
    error = game.refuse(Cut(parcel="C1"), at=T0 + HOUR)
    assert error.code == "claim.too_young"


def test_the_claim_package_imports_no_clock_randomness_or_io() -> None:
    banned = {
        "time",
        "random",
        "os",
        "datetime",
        "secrets",
        "uuid",
        "redis",
        "faststream",
        "structlog",
        "asyncio",
        "socket",
    }
    for path in sorted(game_folder("claim@1").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not {n.split(".")[0] for n in names} & banned, (path.name, names)
        assert path.read_text().splitlines()[0].startswith('"""'), path.name


def test_floats_appear_only_in_the_seeding() -> None:
    # The seed's doubles live in data.py (its constants) and seeding.py (its loop); elsewhere, none.
    for path in sorted(game_folder("claim@1").glob("*.py")):
        if path.name in {"data.py", "seeding.py"}:
            continue
        tree = ast.parse(path.read_text())
        floats = [
            n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, float)
        ]
        assert floats == [], path.name
