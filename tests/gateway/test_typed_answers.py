"""Real answers of a real gateway fit their typed schemas: resources, read-model rows and rejections, per rule-set.

Given a real `almanac gateway` process on a real engine and projector, and a room of every built-in rule-set at
every installed version, played a little by its bot, with a refused command and (where the rule-set keeps read
models) a sandbox fork, when an auditor reads the room's resources, rejections and read-model rows, then each answer
fits the operation's response schema in the OpenAPI document, through the member of the union its rule-set (or
model) names, and that member leaves nothing open: the rule-set's own declared types, not open objects.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from api_contract import ContractCheck
from gateway_stack import Stack, landed_rulesets
from schema_walk import open_spots, validator

from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.services.gateway.game_schemas import prefix_of

MOVES = 6
BUILT_IN = [manifest.ref for manifest in registry.all_manifests() if manifest.name in landed_rulesets()]


@pytest.fixture(scope="module")
def gateway_url(stack: Stack) -> Iterator[str]:
    """A real gateway process on the module's engine and projector (it shares the in-process app's secret)."""
    url = stack.start_gateway("typed-gateway")
    yield url
    process = stack.processes.pop("typed-gateway")
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def document(api) -> dict[str, Any]:
    return api.app.openapi()


def waited(http: httpx.Client, path: str, headers: dict[str, str], done, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        answer = http.get(path, headers=headers)
        assert answer.status_code == 200, answer.text
        if done(answer.json()) or time.monotonic() > deadline:
            return answer.json()
        time.sleep(0.1)


def played_room(http: httpx.Client, auditor: str, ref: str) -> str:
    """A room of ``ref`` with its seats joined, a refused join and MOVES rounds of its bot; realm sends a merchant."""
    manifest = registry.at(*registry.parse(ref))
    suffix = secrets.token_hex(3)
    players = [f"alice-{suffix}", f"bob-{suffix}"]
    options: dict[str, Any] = {}
    if "players" in manifest.decider.options_type.__struct_fields__:
        options["players"] = players
    created = http.post("/rooms", json={"ruleset": ref, "player": players[0], "options": options})
    assert created.status_code == 201, created.text
    room, tokens = created.json()["room"], {players[0]: created.json()["token"]}
    joined = http.post(f"/rooms/{room}/join", json={"player": players[1]})
    if joined.status_code == 200:
        tokens[players[1]] = joined.json()["token"]
    # a command the rules refuse: recorded, so the room has a rejection to read
    again = http.post(f"/rooms/{room}/join", json={"player": players[0]})
    assert again.status_code == 422 and again.json()["code"] == "already_joined", again.text
    auditor_headers = {"Authorization": f"Bearer {auditor}"}
    if "send_merchant" in {t.__struct_config__.tag for t in manifest.decider.command_types}:
        sent = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {tokens[players[0]]}"},
                         json={"command": {"kind": "send_merchant", "to": players[1], "load": {"food": 1}}})
        assert sent.status_code == 200, sent.text
    for step in range(MOVES):
        for player, token in tokens.items():
            state = http.get(f"/rooms/{room}/state", headers=auditor_headers).json()["state"]
            game = msgspec.convert(state["game"], manifest.decider.state_type, strict=False)
            command = manifest.policy(game, player, Dice(b"typed", room, step), int(time.time() * 1000))
            if command is not None:
                answer = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                                   json={"command": codec.encode_command(command)})
                assert answer.status_code in (200, 422), answer.text
    return room


@pytest.mark.parametrize("ref", BUILT_IN)
def test_resources_rejections_and_rows_fit_their_rule_sets_types(ref: str, gateway_url: str, auditor: str,
                                                                 document: dict[str, Any]) -> None:
    name = registry.parse(ref)[0]
    contract = ContractCheck(document)
    headers = {"Authorization": f"Bearer {auditor}"}
    with httpx.Client(base_url=gateway_url, timeout=30) as http:
        # Given a room of this rule-set played a little over HTTP
        room = played_room(http, auditor, ref)
        # When an auditor reads its resources and its rejections
        resources = http.get(f"/rooms/{room}/resources", headers=headers)
        rejections = http.get(f"/rooms/{room}/rejections", headers=headers)
        assert resources.status_code == rejections.status_code == 200
        # Then each fits its operation's schema
        assert contract.problems("GET", f"/rooms/{room}/resources", 200, resources.json()) == []
        assert contract.problems("GET", f"/rooms/{room}/rejections", 200, rejections.json()) == []
        # through its rule-set's member, whose resources are the rule-set's declared type, and no other member
        member = f"RoomResources{prefix_of(name)}"
        assert list(validator(document, member).iter_errors(resources.json())) == []
        others = [f"RoomResources{prefix_of(other)}" for other in registry.names() if other != name]
        assert all(list(validator(document, other).iter_errors(resources.json())) for other in others)
        assert open_spots(document, [member]) == []
        assert resources.json()["resources"], "a rule-set with resources answers some"
        assert "already_joined" in [r["error"]["code"] for r in rejections.json()["rejections"]]
        # And every read model of the rule-set answers rows that fit its own row type, a sandbox fork's rows too
        models = [model for model, (owner, _) in registry.read_models().items() if owner == name]
        fork = None
        if models:  # only an ended room may be forked (a fork's seats would show its players' hidden views)
            ended = http.post(f"/rooms/{room}/end", headers=headers, json={})
            assert ended.status_code == 200, ended.text
            fork = http.post(f"/rooms/{room}/fork", headers=headers, json={"at": 3})
        assert fork is None or fork.status_code == 201, fork.text
        for model in models:
            rooms = [room] + ([fork.json()["room"]] if fork is not None else [])
            # a ledger (rows per event) of a fork holds only the fork's own events: none yet at its start
            ledger = registry.read_models()[model][1].room_row is None
            for where in rooms:
                if where != room and ledger:
                    rows = http.get(f"/read-models/{model}?room={where}", headers=headers).json()
                else:
                    rows = waited(http, f"/read-models/{model}?room={where}", headers, lambda body: body["rows"])
                    assert rows["rows"], (model, where)
                assert contract.problems("GET", f"/read-models/{model}", 200, rows) == []
                member = f"ReadModelRows{prefix_of(model)}"
                assert list(validator(document, member).iter_errors(rows)) == []
                assert open_spots(document, [member]) == []
                if where != room:
                    assert all(row["fork"]["parent"] == room for row in rows["rows"])


def test_the_contract_check_refuses_an_answer_that_drifts_from_its_schema_and_says_where(
        document: dict[str, Any]) -> None:
    """The answers' contract check (tests/api_contract.py, compiled validator first) is a check that can fail."""
    contract = ContractCheck(document)
    # Given an answer that fits its schema (a page of a room's events)
    room = "contract-board"
    page = {"room": room, "latest_version": 1, "next_version": 2, "checkpoint": None,
            "events": [{"version": 1, "type": "room.created"}]}
    fits = contract.problems("GET", f"/rooms/{room}/events", 200, page)
    # When a field the schema declares is missing, or has another type
    missing = contract.problems("GET", f"/rooms/{room}/events", 200, {k: v for k, v in page.items() if k != "room"})
    retyped = contract.problems("GET", f"/rooms/{room}/events", 200, {**page, "latest_version": "one"})
    # Then each drift is refused, naming where
    assert fits == [] and missing and retyped, (fits, missing, retyped)
    assert any("latest_version" in problem for problem in retyped), retyped
