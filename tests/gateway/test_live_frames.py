"""The live feeds' frames as a contract: every frame a real gateway sends on /rooms/{room}/live and /watch (a player's,
an auditor's, a spectator's, delayed or not, and the refusals) is what its OpenAPI and its AsyncAPI documents say.

Both documents take the frame from one Struct (responses.LiveEvent; a refusal is Failure, the Error schema), and the
TypeScript client's ``LiveMessage`` is the generated type of it. Here each frame is also held to naming nothing its
schema does not (the documents' objects are open, so a field added to the frame but not the type, as the checkpoint
once was, would otherwise pass unseen).
"""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
from gateway_stack import client_stack
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

SECRET = "live-frames-test-secret-" + "x" * 32
ROOT = Path(__file__).resolve().parents[2]
REF = "#/components/schemas/"


def strict_validator(document: dict[str, Any], ref: str, closed: tuple[str, ...]) -> jsonschema_rs.Validator:
    """A validator of the schema at ``ref`` in ``document`` in which the ``closed`` schemas name every field."""
    document = copy.deepcopy(document)
    for name in closed:
        document["components"]["schemas"][name]["additionalProperties"] = False
    return jsonschema_rs.Draft202012Validator({**document, "$ref": ref})


def payload_of(asyncapi: dict[str, Any], channel: str, message: str) -> str:
    """The payload schema's reference of ``message`` on ``channel``, followed from the channel as a client would."""
    name = asyncapi["channels"][channel]["messages"][message]["$ref"].rsplit("/", 1)[-1]
    return asyncapi["components"]["messages"][name]["payload"]["$ref"]


def frames(url: str, path: str, count: int, token: str | None = None) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with connect(url.replace("http://", "ws://") + path, additional_headers=headers, open_timeout=10) as feed:
        return [json.loads(feed.recv(timeout=10)) for _ in range(count)]


def refusal(url: str, path: str, token: str | None = None) -> tuple[dict[str, Any], int]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with connect(url.replace("http://", "ws://") + path, additional_headers=headers, open_timeout=10) as feed:
        frame = json.loads(feed.recv(timeout=10))
        try:
            feed.recv(timeout=10)
            raise AssertionError(f"{path}: the refused feed stayed open")
        except ConnectionClosed as closed:
            return frame, closed.rcvd.code if closed.rcvd else 0


def problems(validator: jsonschema_rs.Validator, frame: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, error.instance_path)) or '(root)'}: {error.message[:200]}"
            for error in validator.iter_errors(frame)]


def test_every_frame_of_a_played_game_is_what_both_documents_say(redis_url: str, tmp_path: Path) -> None:
    with client_stack(redis_url, tmp_path, SECRET) as (url, auditor, _), httpx.Client(base_url=url, timeout=30) as http:
        # Given both documents as the real gateway serves them
        openapi, asyncapi = http.get("/openapi.json").json(), http.get("/asyncapi.json").json()
        assert "LiveEvent" in openapi["components"]["schemas"], "the OpenAPI document names no live frame type"
        event_checks = {
            "OpenAPI LiveEvent": strict_validator(openapi, REF + "LiveEvent", ("LiveEvent", "Checkpoint")),
            **{f"AsyncAPI {channel}": strict_validator(asyncapi, payload_of(asyncapi, channel, "liveEvent"),
                                                        ("LiveEvent", "Checkpoint")) for channel in ("live", "watch")},
        }
        refusal_checks = {
            "OpenAPI Error": jsonschema_rs.Draft202012Validator({**openapi, "$ref": REF + "Error"}),
            **{f"AsyncAPI {channel}": jsonschema_rs.Draft202012Validator(
                {**asyncapi, "$ref": payload_of(asyncapi, channel, "liveRefusal")}) for channel in ("live", "watch")},
        }
        # and a realm game of two players who ended their turns for a few seasons
        alice, bob = f"alice-{secrets.token_hex(2)}", f"bob-{secrets.token_hex(2)}"
        created = http.post("/rooms", json={"ruleset": "realm", "player": alice,
                                            "options": {"players": [alice, bob]}}).json()
        room = created["room"]
        tokens = {alice: created["token"], bob: http.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]}
        for _ in range(3):
            for token in tokens.values():
                answer = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                                   json={"command": {"kind": "end_turn"}})
                assert answer.status_code == 200, answer.text
        latest = http.get(f"/rooms/{room}").json()["version"]

        # When each kind of reader follows the room from its start
        feeds = {
            "alice /live": frames(url, f"/rooms/{room}/live", latest, tokens[alice]),
            "bob /live from 3": frames(url, f"/rooms/{room}/live?from_version=3", latest - 2, tokens[bob]),
            "auditor /live": frames(url, f"/rooms/{room}/live", latest, auditor),
            "spectator /watch": frames(url, f"/rooms/{room}/watch", latest),
            "spectator /watch?delay=2": frames(url, f"/rooms/{room}/watch?delay=2", latest - 2),
        }
        # and refused ones ask
        refusals = {
            "/live bad token": refusal(url, f"/rooms/{room}/live", "not-a-token"),
            "/live from_version=0": refusal(url, f"/rooms/{room}/live?from_version=0", tokens[alice]),
            "/watch no such room": refusal(url, "/rooms/no-such-room/watch"),
        }

    # Then every frame is each document's frame type, naming nothing it does not
    found = [f"{feed} v{frame.get('version')} vs {name}: {problem}"
             for feed, sent in feeds.items() for frame in sent
             for name, validator in event_checks.items() for problem in problems(validator, frame)]
    assert not found, "frames the documents do not describe:\n  " + "\n  ".join(found[:12])
    # (and the frames are the game's: each version once, each signed)
    assert [frame["version"] for frame in feeds["alice /live"]] == list(range(1, latest + 1))
    assert all(frame["checkpoint"] and frame["checkpoint"]["version"] == frame["version"]
               for sent in feeds.values() for frame in sent)
    assert all("hash" in frame for frame in feeds["auditor /live"])
    # and every refusal is the documents' refusal, closed with 4000 + its status
    found = [f"{ask} vs {name}: {problem}" for ask, (frame, _) in refusals.items()
             for name, validator in refusal_checks.items() for problem in problems(validator, frame)]
    assert not found, "refusals the documents do not describe:\n  " + "\n  ".join(found)
    assert {ask: code for ask, (_, code) in refusals.items()} == {
        "/live bad token": 4401, "/live from_version=0": 4422, "/watch no such room": 4404}


def test_the_typescript_clients_live_message_is_the_generated_frame_type() -> None:
    # Given the TypeScript client's sources: its LiveMessage is the type openapi-typescript generated from LiveEvent
    # (so the compiler holds its users to the frame the documents describe), not a hand-kept copy
    index = (ROOT / "clients" / "typescript" / "src" / "index.ts").read_text()
    generated = (ROOT / "clients" / "typescript" / "src" / "schema.d.ts").read_text()
    assert 'export type LiveMessage = Schemas["LiveEvent"];' in index
    assert 'export type LiveRefusal = Schemas["Error"];' in index
    live_event = generated[generated.index("        LiveEvent: {"):]
    assert "checkpoint?:" in live_event[:live_event.index("\n        };")]


def test_an_outcomes_error_is_typed_in_the_asyncapi_document() -> None:
    # Given the AsyncAPI document's outcome message (what the engine publishes per command)
    from almanac.events.errors import RuleError  # noqa: PLC0415 - tests only
    from almanac.services.gateway.asyncapi import asyncapi_document  # noqa: PLC0415

    document = asyncapi_document()
    outcome = jsonschema_rs.Draft202012Validator({**document, "$ref": document["components"]["messages"]["outcome"]
                                                  ["payload"]["$ref"]})
    refused = {"command_id": "r:p:1", "room": "r", "accepted": False}
    # Then a refusal's error as the engine writes it (a rule error's to_dict) is one, and an object of anything is not
    errors = [RuleError("not_your_turn", "wait for your turn", field="kind", allowed=["end_turn"]).to_dict(),
              RuleError("too_early", "not before the year", field="year", allowed={"min": 3}).to_dict()]
    assert all(outcome.is_valid({**refused, "error": error}) for error in errors)
    assert outcome.is_valid({**refused, "error": None})
    assert not outcome.is_valid({**refused, "error": {"reason": "anything"}})
