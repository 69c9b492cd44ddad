"""A gateway with a leak planted on purpose, to show the hidden-information property can fail (a mutation check).

``plant()`` wraps the gateway's ``create_app`` so that the app it builds has one more operation, the kind a
well-meant feature could add: ``GET /rooms/{room}/bot-insight`` tells anyone, no token needed, what the room's
bot seats "weigh up", which is every player's running score, hidden amounts included. It answers only for a
room that has a bot seat (404 otherwise), so it leaks in the seat-bot game (``realm-bots``) and nowhere else.
Nothing lists it for the property: the property must find it in /openapi.json by itself and report it.

A gateway process runs it when started with ``Stack.start_gateway(preload="planted_leak")``
(tests/gateway/gateway_stack.py), which imports this module and calls ``plant()`` before the CLI builds the app.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

PLANTED_PATH = "/rooms/{room}/bot-insight"


def plant() -> None:
    import almanac.services.gateway as gateway_package  # noqa: PLC0415 - patched before the CLI imports it

    build = gateway_package.create_app

    def create_app(*args: Any, **kwargs: Any) -> FastAPI:
        app = build(*args, **kwargs)
        app.add_api_route(PLANTED_PATH, bot_insight, methods=["GET"], summary="What the room's bot seats weigh up")
        return app

    gateway_package.create_app = create_app


async def bot_insight(request: Request, room: str) -> dict[str, Any]:
    from almanac.events import codec, room as room_rules  # noqa: PLC0415
    from almanac.services.gateway.errors import ApiError  # noqa: PLC0415

    state = await request.app.state.gateway.reader.latest(room)
    if state is None or not state.bot_seats:
        raise ApiError(404, "room_not_found", f"room {room!r} has no bot seat", "room")
    decider = room_rules.decider_of(state)
    # The leak: the deciding scores, not the rule-set's public_scores.
    return {"room": room, "bots": sorted(state.bot_seats), "weighs": codec.to_builtins(decider.scores(state.game))}
