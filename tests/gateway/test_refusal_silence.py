"""A rival on a quiet server cannot tell that another seat's command was refused: every public and rival-visible
surface of a real gateway reads after the refusal as it would have read without it (issue 28, items 2 and 15).

A refusal can tell hidden state (bob sees alice's ``smelt`` of 1,000 bronze refused: she holds less than that).
The rules' refusal codes left the public metrics long ago; what was left is subtler: the public counted decided
commands, accepted and refused alike, so on a quiet server bob saw ``almanac_commands_total{outcome="decided"}``,
the command route's requests and latency count, the engines' ``commands`` and latency counters and ``/status``'s
``commands_total`` move while the room's version stood still: a refusal, and which seat's turn it was.

Nothing here lists surfaces: every GET operation of the gateway's own /openapi.json is read (each parameter
filled by name, as tests/gateway/test_hidden_routes.py does; an operation with a parameter the test cannot fill
fails it until it is taught), as the public, as bob (the rival) and as a spectator, and every live channel of its
/asyncapi document is followed by each of them. Each surface is read three times: twice around a quiet period
(what moves without any command: the rival's own reads, clocks) and once after a period of the same length in
which alice's command was refused. Every value must move in the second period exactly as it did in the first.
The same comparison run over an accepted command must see it (the test can fail), and the operator, with an
auditor's token, still sees the refusal counted.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from gateway_stack import client_stack, seated_realm_answers
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from almanac.events import registry
from almanac.services.gateway.auth import TokenSigner

SECRET = "refusal-silence-secret-" + "x" * 16
REFUSED = {"kind": "smelt", "ore": "bronze", "amount": 1000}  # a fresh realm city holds no bronze
ACCEPTED = {"kind": "cut_wood"}
# Longer than the engine's metrics flush (at most every lease_ms / 3 = 1.7 s by default) and the projector's
# round: what a command moves has reached every surface by then.
PERIOD_S = 3.0
# Values that measure the processes rather than count what happened (clock readings, CPU, memory, collector
# runs, timings of the rival's own reads): they move in any period, by amounts no two periods share. Counts are
# never left out: a request's, a command's, a latency histogram's observations (its ``_count``).
MEASURED_METRICS = re.compile(r"^(process_|python_gc_|python_info|almanac_gc_|almanac_projector_lag_ms)|"
                              r"_(bucket|sum|created)$")
MEASURED_ENGINE_FIELDS = re.compile(r"^gc_")
MEASURED_KEYS = frozenset({"time_ms", "at_ms", "age_s", "ping_ms", "consumed_ms", "lag_ms", "max_lag_ms",
                           "exported_at_ms"})
PER_REQUEST_HEADERS = frozenset({"date", "x-request-id", "content-length"})  # content-length: the body says it


def fillers(room: str, players: tuple[str, str]) -> dict[str, list[str]]:
    """Values for the document's parameters, by name: every one an operation declares must be here."""
    manifest = registry.manifest("realm@1")
    return {
        "room": [room], "other": [room], "version": ["1", "2"], "from_version": ["1"], "to_version": ["2"],
        "at": ["2"], "at_other": ["1"], "since": ["1"], "from": ["1"], "to": ["2"], "limit": ["1000"],
        "cursor": ["bm90LWEtY3Vyc29y"], "command_id": ["warm-up", "refused", "accepted"],
        "ruleset": ["realm"], "name": ["realm"], "model": sorted(registry.read_models()),
        "view": [view.name for view in manifest.audit_views] or ["none"], "item": ["1"], "id": ["1"],
        "trade": ["1"], "player": list(players), "path": ["scores", f"scores.{players[0]}"],
        "where": ["room.ended == true"], "against": ["realm@1"], "linear": ["false"],
        "subscription": ["wh_0000000000000000"],
    }


def reads(document: dict, fill: dict[str, list[str]]) -> Iterator[str]:
    """The URL of every GET operation of ``document`` with every filling of its path, and with each optional
    query parameter added at each of its values."""
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None:
            continue  # a write: alice's and bob's own commands are the only writes here
        parameters = operation.get("parameters", [])
        unfilled = [p["name"] for p in parameters if p["name"] not in fill]
        assert not unfilled, f"GET {path}: nothing fills {unfilled}; teach fillers() (this file)"
        in_path = [p["name"] for p in parameters if p["in"] == "path"]
        required = [(p["name"], fill[p["name"]][0]) for p in parameters if p["in"] == "query" and p.get("required")]
        optional = [p["name"] for p in parameters if p["in"] == "query" and not p.get("required")]
        for values in itertools.product(*(fill[name] for name in in_path)):
            url = path
            for name, value in zip(in_path, values, strict=True):
                url = url.replace("{" + name + "}", quote(value, safe=""))
            for query in [required, *([*required, (name, value)] for name in optional for value in fill[name])]:
                yield url + ("?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query) if query else "")


def leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A JSON answer as (path, scalar) pairs, keys that measure the processes left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in MEASURED_KEYS:
                yield from leaves(item, f"{prefix}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def metric_leaves(text: str) -> Iterator[tuple[str, Any]]:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if MEASURED_METRICS.search(sample.name):
                continue
            if sample.name == "almanac_engine_counter" and MEASURED_ENGINE_FIELDS.search(sample.labels["field"]):
                continue
            yield f"{sample.name}{sorted(sample.labels.items())}", sample.value


def seen(response: httpx.Response) -> dict[str, Any]:
    """What a reader learns from one answer, value by value: its status, headers and body."""
    found: dict[str, Any] = {"status": response.status_code}
    found |= {f"header {name}": value for name, value in response.headers.items() if name not in PER_REQUEST_HEADERS}
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        found |= dict(leaves(response.json(), "body"))
    elif kind.startswith("text/plain") and "# TYPE" in response.text:
        found |= dict(metric_leaves(response.text))
    else:
        found["body"] = response.content
    return found


Surfaces = dict[tuple[str, str], dict[str, Any]]


def read_all(http: httpx.Client, urls: list[str], viewers: dict[str, str | None]) -> Surfaces:
    return {(viewer, url): seen(http.get(url, headers={"Authorization": f"Bearer {token}"} if token else {}))
            for url in urls for viewer, token in viewers.items()}


def moved(before: Surfaces, after: Surfaces) -> dict[tuple[str, str, str], Any]:
    """How each value moved between two reads: a number by its difference, anything else from what to what."""
    changes = {}
    for key in before.keys() | after.keys():
        first, then = before.get(key, {}), after.get(key, {})
        for name in first.keys() | then.keys():
            a, b = first.get(name), then.get(name)
            numbers = isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool)
            change = b - a if numbers else (None if a == b else (a, b))
            if change:
                changes[(*key, name)] = change
    return changes


def told_apart(quiet: dict, after: dict) -> dict[tuple[str, str, str], tuple[Any, Any]]:
    """Every value that moved otherwise after the command than in the quiet period: what the command told."""
    return {key: (quiet.get(key), after.get(key)) for key in quiet.keys() | after.keys()
            if quiet.get(key) != after.get(key)}


def assert_nothing_told(first: Surfaces, quiet: Surfaces, after_refusal: Surfaces,
                        feeds: dict[Any, ClientConnection]) -> None:
    """Every surface moved after the refusal as in the quiet period before it, and no live feed spoke of it."""
    told = told_apart(moved(first, quiet), moved(quiet, after_refusal))
    assert not told, "a rival can tell the refusal from:\n" + "\n".join(
        f"{viewer} GET {read}: {name}: quiet {a!r}, after the refusal {b!r}"
        for (viewer, read, name), (a, b) in sorted(told.items(), key=str))
    said = {key: got for key, socket in feeds.items() if (got := messages(socket, 0.5))}
    assert not said, f"live feeds spoke of the refusal: {said}"


def told_by_an_accepted_command(http: httpx.Client, room: str, token: str, urls: list[str],
                                viewers: dict[str, str | None], first: Surfaces, quiet: Surfaces,
                                after_refusal: Surfaces) -> dict[tuple[str, str, str], tuple[Any, Any]]:
    """The same reads after an accepted command (so the comparison can fail): what it told, against the quiet period."""
    assert command(http, room, token, ACCEPTED, "accepted").status_code == 200
    time.sleep(PERIOD_S)
    return told_apart(moved(first, quiet), moved(after_refusal, read_all(http, urls, viewers)))


def watched_room(http: httpx.Client) -> tuple[str, dict[str, Any], dict[str, str | None], list[str], list[str]]:
    """A realm room of alice and bob with one accepted command; its watchers (the public, bob, a spectator), every
    GET operation of /openapi.json filled in for it, and every live channel of /asyncapi the gateway serves."""
    room, created, joined = seated_realm_answers(http)
    alice, bob = created["player"], joined["player"]
    assert command(http, room, created["token"], ACCEPTED, "warm-up").status_code == 200
    spectator = TokenSigner(SECRET, 3600).issue(room, "spectator", ruleset="realm@1")
    viewers = {"public": None, "rival": joined["token"], "spectator": spectator}
    urls = list(reads(http.get("/openapi.json").json(), fillers(room, (alice, bob))))
    asyncapi = http.get("/asyncapi").json()
    live = [re.sub(r"\{room\}", room, channel["address"]) for channel in asyncapi["channels"].values()
            if any(server["$ref"].endswith("/gateway") for server in channel.get("servers", []))]
    assert live, "the AsyncAPI document names no live channel of the gateway"
    return room, created, viewers, urls, live


def follow(url: str, address: str, token: str | None) -> ClientConnection:
    return connect(url.replace("http://", "ws://") + address, open_timeout=10,
                   additional_headers={"Authorization": f"Bearer {token}"} if token else {})


def messages(socket: ClientConnection, within_s: float) -> list[Any]:
    """What a live feed sent within ``within_s`` (a close included)."""
    got: list[Any] = []
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            got.append(socket.recv(timeout=left))
        except TimeoutError:
            break
        except ConnectionClosed as closed:
            got.append(("closed", closed.rcvd.code if closed.rcvd else None))
            break
    return got


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A real gateway in front of an engine and a projector on a quiet Redis: its URL and an auditor's token."""
    with client_stack(redis_url, tmp_path_factory.mktemp("refusal-silence"), SECRET) as (url, auditor, _):
        yield url, auditor


def command(http: httpx.Client, room: str, token: str, body: dict, command_id: str) -> httpx.Response:
    return http.post(f"/rooms/{room}/commands", json={"command": body, "command_id": command_id},
                     headers={"Authorization": f"Bearer {token}"})


def test_a_rival_sees_nothing_move_when_another_seats_command_is_refused(served: tuple[str, str]) -> None:
    """Given a realm room of alice and bob on a quiet gateway, and bob, a spectator and the public each reading
    every GET operation of /openapi.json and following every live channel of /asyncapi, when alice's ``smelt``
    of bronze she does not hold is refused, then every value they read moves exactly as it did in a quiet period
    of the same length, and no feed says a word; when alice's next command is accepted the same reads see it
    (the room's version, the public count of accepted commands); and the operator's metrics, read with an
    auditor's token, count the refusal and its code."""
    url, auditor = served
    with httpx.Client(base_url=url, timeout=60) as http, contextlib.ExitStack() as closing:
        room, created, viewers, urls, live = watched_room(http)
        latest = http.get(f"/rooms/{room}").json()["version"]
        opened = {(address, viewer): closing.enter_context(follow(url, f"{address}?from_version={latest + 1}", token))
                  for address in live for viewer, token in viewers.items()}
        time.sleep(PERIOD_S)  # the warm-up's figures reach every surface; the first reads make their series
        read_all(http, urls, viewers)
        # A feed refused to its viewer (the public's /live) is closed at once: it can say nothing more.
        feeds = {key: socket for key, socket in opened.items()
                 if not any(isinstance(got, tuple) for got in messages(socket, 0.2))}
        assert {viewer for _, viewer in feeds} == set(viewers), f"feeds followed: {sorted(feeds)}"

        first = read_all(http, urls, viewers)
        time.sleep(PERIOD_S)
        quiet = read_all(http, urls, viewers)
        refused = command(http, room, created["token"], REFUSED, "refused")
        assert refused.status_code == 422 and refused.json()["code"] == "realm.not_enough_bronze", refused.text
        time.sleep(PERIOD_S)
        after_refusal = read_all(http, urls, viewers)
        assert_nothing_told(first, quiet, after_refusal, feeds)

        # The same reads see an accepted command: the comparison can fail.
        told = told_by_an_accepted_command(http, room, created["token"], urls, viewers, first, quiet, after_refusal)
        for viewer in viewers:
            assert (viewer, f"/rooms/{quote(room)}", "body.version") in told, viewer
            assert any(read == "/metrics" and name.startswith("almanac_commands_total")
                       for who, read, name in told if who == viewer), viewer
        heard = {key: messages(socket, 2.0) for key, socket in feeds.items()}
        assert all(heard.values()), f"live feeds silent on the accepted command (they compared nothing): {heard}"

        # The operator still counts the refusal, and why: the metrics read with an auditor's token.
        operator = http.get("/metrics", headers={"Authorization": f"Bearer {auditor}"}).text
        assert re.search(r'almanac_command_rejects_total\{code="realm.not_enough_bronze",ruleset="[^"]*"\} 1',
                         operator), operator
        assert re.search(r'almanac_engine_counter\{engine="[^"]+",field="rejected"\} 1', operator), operator
        status = http.get("/status", headers={"Authorization": f"Bearer {auditor}"}).json()
        assert status["commands_decided"] - status["commands_total"] == 1, status  # decided: accepted and refused
