"""Bring your own game: the dice duel in examples/dice-duel, pip-installed (into a folder of its own on the path of
this module's processes, not into the shared environment: the suite's other workers start gateways meanwhile, which
would host it too), played end to end through the real engine and projector processes and the gateway, with no line
of the core naming it."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from gateway_stack import Stack, engine_and_projector, gateway_settings
from schema_walk import open_spots, validator
from waiting import wait_until

from almanac.events import codec, registry
from almanac.services.gateway import create_app
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "dice-duel"
DISTRIBUTION = "almanac-dice-duel"


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin installed like any package (non-editable, offline: no index, no build isolation) into a folder
    put on this process's path (and given to the module's processes as PYTHONPATH); taken off after."""
    folder = tmp_path_factory.mktemp("plugin")
    source, site = folder / "dice-duel", folder / "site"
    shutil.copytree(PLUGIN, source)  # the build writes into its source tree: keep the repository clean
    result = pip("install", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(site), str(source))
    assert result.returncode == 0, result.stderr
    dist_info = list(site.glob(DISTRIBUTION.replace("-", "_") + "-*.dist-info"))
    assert (site / "dice_duel").is_dir() and dist_info, list(site.iterdir())
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    registry.refresh()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        importlib.invalidate_caches()
        registry.unregister("dice_duel")
        codec.forget_rule_sets()
        registry.refresh()
        for name in [m for m in sys.modules if m == "dice_duel" or m.startswith("dice_duel.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def stack(installed: Path, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Engine and projector processes started after the install, with its folder on their path: they find the game
    by its entry point."""
    path = os.pathsep.join(filter(None, [str(installed), os.environ.get("PYTHONPATH", "")]))
    with engine_and_projector(redis_url, tmp_path_factory.mktemp("plugin-stack"), {"PYTHONPATH": path}) as running:
        yield running


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[TestClient]:
    with TestClient(create_app(gateway_settings(stack)), raise_server_exceptions=False) as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_no_core_module_names_the_plugin_game():
    for folder in ("events", "games", "projections", "services", "storage"):
        for path in (ROOT / folder).rglob("*.py"):
            assert "dice_duel" not in path.read_text() and "dice-duel" not in path.read_text(), path


def test_the_plugin_imports_only_the_public_almanac_api():
    imports = [line.split()[1] for path in (PLUGIN / "dice_duel").glob("*.py")
               for line in path.read_text().splitlines() if line.startswith(("from almanac", "import almanac"))]
    assert imports and set(imports) == {"almanac.events.manifest"}


def test_a_pip_installed_game_is_hosted_and_played_through_engine_and_gateway(api: TestClient):
    # Given the installed dice duel, the server hosts it with its command
    hosted = {r["ruleset"]: r["commands"] for r in api.get("/rulesets").json()["rulesets"]}
    assert "roll" in hosted["dice_duel"]
    auditor = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)

    # When alice creates a two-round duel with bob, bob joins, and a stranger may not
    created = api.post("/rooms", json={"ruleset": "dice_duel", "player": "alice",
                                       "options": {"players": ["alice", "bob"], "rounds": 2}})
    assert created.status_code == 201 and created.json()["joined"], created.text
    room, alice = created.json()["room"], created.json()["token"]
    bob = api.post(f"/rooms/{room}/join", json={"player": "bob"}).json()["token"]
    carol = api.post(f"/rooms/{room}/join", json={"player": "carol"})
    assert carol.status_code == 422 and carol.json()["allowed"] == ["alice", "bob"]

    def roll(token: str) -> dict:
        answer = api.post(f"/rooms/{room}/commands", headers=auth(token), json={"command": {"kind": "roll"}})
        assert answer.status_code == 200, answer.text
        return answer.json()

    # Then alice sees her own faces, bob only that she rolled, and a second roll is refused
    (mine,) = roll(alice)["events"]
    assert len(mine["event"]["faces"]) == 2
    seen_by_bob = api.get(f"/rooms/{room}/events", headers=auth(bob)).json()["events"]
    assert [e["event"]["faces"] for e in seen_by_bob if e["type"] == "dice_duel.rolled"] == [{"hidden": True}]
    again = api.post(f"/rooms/{room}/commands", headers=auth(alice), json={"command": {"kind": "roll"}})
    assert again.status_code == 422 and again.json()["code"] == "dice_duel.already_rolled"

    # When bob rolls, the round is decided in public; after the second round the room ends by itself
    revealed = roll(bob)["events"]
    assert [e["type"] for e in revealed] == ["dice_duel.rolled", "dice_duel.round_won"]
    roll(bob)
    last = roll(alice)["events"]
    assert [e["type"] for e in last] == ["dice_duel.rolled", "dice_duel.round_won", "room.ended"]

    # And the core's services work for it unchanged: scores, verification, read model, audit view
    scores = api.get(f"/rooms/{room}/scores").json()["scores"]
    assert set(scores) == {"alice", "bob"} and sum(scores.values()) <= 2
    verification = api.get(f"/rooms/{room}/verification", headers=auth(alice)).json()
    assert verification["ok"] is True and verification["commands_redecided"] >= 6, verification
    duels = wait_until(lambda: api.get("/read-models/duels", params={"room": room}).json()["rows"],
                     lambda rows: rows and rows[0]["over"])
    top = [player for player in ("alice", "bob") if scores[player] == max(scores.values())]
    winner = top[0] if len(top) == 1 else ""
    assert duels == [{"room": room, "players": ["alice", "bob"], "wins": scores, "rounds_played": 2, "over": True,
                      "winner": winner}]
    # and the plugin's declared row type types its rows and the filters they take, in the API document
    answer = api.get("/read-models/duels", params={"room": room, "winner": winner})
    assert answer.status_code == 200 and answer.json()["rows"] == duels, answer.text
    assert list(validator(api.app.openapi(), "ReadModelRowsDuels").iter_errors(answer.json())) == []
    assert open_spots(api.app.openapi(), ["ReadModelRowsDuels"]) == []  # the row is the plugin's DuelRow, typed
    assert list(validator(api.app.openapi(), "ReadModelRowsDuels").iter_errors(
        {**answer.json(), "where": {"loser": "bob"}})) != []  # the document's where takes the model's filters only
    refused = api.get("/read-models/duels", params={"room": room, "loser": "bob"})
    assert (refused.status_code, refused.json()["code"], refused.json()["field"]) == (422, "unknown_filter", "loser")
    story = api.get(f"/rooms/{room}/audit/round/1", headers=auth(auditor))
    assert story.status_code == 200, story.text
    steps = story.json()["story"]
    assert [len(s["faces"]) for s in steps[:2]] == [2, 2] and "round 1" in steps[2]["text"]
    assert api.get(f"/rooms/{room}/audit/round/1", headers=auth(bob)).status_code == 403
    board = api.get("/leaderboards/dice_duel").json()["leaderboard"]
    assert {row["player"] for row in board} <= {"alice", "bob"}
