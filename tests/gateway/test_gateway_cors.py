"""CORS on: commands keep the gateway's one command path and answer allowed origins with the CORS headers."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings, open_board_rooms

from almanac.services.gateway import create_app

ALLOWED = "https://game.example"
PLACE = {"command": {"kind": "place_element", "row": 5, "column": 5}}


def _vary(headers: httpx.Headers) -> set[str]:
    return {part.strip() for value in headers.get_list("vary") for part in value.split(",")}


def test_a_real_gateway_with_cors_answers_an_allowed_origins_command_with_its_headers_and_another_without(
        stack: Stack) -> None:
    # Given a real gateway (uvicorn, its own HTTP protocol) that allows one browser origin, and two seated rooms
    url = stack.start_gateway("cors-gateway", ALMANAC_CORS_ORIGINS=ALLOWED)
    (first, first_token), (second, second_token) = open_board_rooms(url, "cors", 2)
    with httpx.Client(base_url=url, timeout=30) as http:
        # When a page of the allowed origin asks first (a preflight) and then sends its command
        preflight = http.options(f"/rooms/{first}/commands", headers={
            "Origin": ALLOWED, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        allowed = http.post(f"/rooms/{first}/commands", json=PLACE,
                            headers={"Authorization": f"Bearer {first_token}", "Origin": ALLOWED})
        # and a page of another origin sends the same command to the other room
        other = http.post(f"/rooms/{second}/commands", json=PLACE,
                          headers={"Authorization": f"Bearer {second_token}", "Origin": "https://elsewhere.example"})
        # and one of the allowed origin is refused (a forged token)
        refused = http.post(f"/rooms/{first}/commands", json=PLACE,
                            headers={"Authorization": "Bearer forged", "Origin": ALLOWED})
    # Then the preflight is allowed, and the command is answered as any command, with the origin's CORS headers
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["version"] >= 1 and allowed.json()["events"]
    assert allowed.headers["access-control-allow-origin"] == ALLOWED and "Origin" in _vary(allowed.headers)
    assert "access-control-allow-credentials" not in allowed.headers
    assert allowed.headers["x-request-id"]
    # and the other origin's command is decided too (a browser, not the server, keeps its page from reading the
    # answer) but its answer names no origin
    assert other.status_code == 200, other.text
    assert "access-control-allow-origin" not in other.headers and "Origin" in _vary(other.headers)
    # and a refusal carries the headers too, so that the page can read its error
    assert refused.status_code == 401 and refused.json()["code"]
    assert refused.headers["access-control-allow-origin"] == ALLOWED


def test_with_cors_on_commands_take_the_gateways_command_path_not_the_fastapi_stack(stack: Stack) -> None:
    # Given a gateway in process that allows one browser origin, whose FastAPI stack records what reaches it
    app = create_app(gateway_settings(stack, cors_origins=ALLOWED))
    with TestClient(app, raise_server_exceptions=False) as client:
        created = client.post("/rooms", json={"ruleset": "board", "player": "p"})
        assert created.status_code == 201, created.text
        room, token = created.json()["room"], created.json()["token"]
        through_stack: list[str] = []
        fastapi_stack = app.middleware_stack

        async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
            through_stack.append(f"{scope.get('method')} {scope['path']}")
            await fastapi_stack(scope, receive, send)

        app.middleware_stack = recorded
        # When a page of that origin sends a command, then reads the room
        command = client.post(f"/rooms/{room}/commands", json=PLACE,
                              headers={"Authorization": f"Bearer {token}", "Origin": ALLOWED})
        read = client.get(f"/rooms/{room}", headers={"Origin": ALLOWED})
    # Then both answers carry the origin's CORS headers
    assert command.status_code == 200, command.text
    assert command.headers["access-control-allow-origin"] == ALLOWED
    assert read.status_code == 200 and read.headers["access-control-allow-origin"] == ALLOWED
    # and only the read went through the FastAPI stack: the command was answered by the gateway's own command path
    assert through_stack == [f"GET /rooms/{room}"]
