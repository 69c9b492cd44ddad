"""The API contract: the OpenAPI document (bearer auth, the error shape, typed commands per rule-set) and
Swagger UI / ReDoc served from the package's own copies of their assets, so /docs works offline."""

from __future__ import annotations

import copy
from functools import cache
from html import escape
from typing import Any
from urllib.parse import quote

import msgspec
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response

from almanac.events import registry
from almanac.events.room import RoomState
from almanac.services.gateway import game_schemas, responses
from almanac.services.gateway.api_console import ASSETS_URL, STATIC_DIR
from almanac.services.gateway.schemas import SECURITY_SCHEME

VENDOR = f"{ASSETS_URL}/vendor"
ERROR_SCHEMA = "Error"

WEBSOCKET_PROTOCOL = """
## Authentication
Send the token from `POST /rooms` or `POST /rooms/{room}/join` (or an auditor token) as
`Authorization: Bearer <token>`; the **Authorize** button above does this for every call.

## Errors
Every refusal is JSON `{code, message, field, allowed}` (`field` and `allowed` when they apply) with a
4xx status; nothing answers a traceback.

## Commands
`POST /rooms/{room}/commands` takes `{"command": {"kind": ..., ...}}`; the command is one of the room's
rule-set commands (schemas `<Ruleset>Command`, a union discriminated by `kind`; also
`GET /rulesets/{name}/schema`).

## The live feed (WebSocket)
`GET /rooms/{room}/live?from_version=N&token=T` upgrades to a WebSocket (the token may also come as an
`Authorization` header). The server sends one JSON text message per event, in version order, each
version once, starting at `from_version` (default 1) and then live as they are appended:

* a player gets `{version, type, player, server_time_ms, event}` with the event redacted for them, or
  `{version, hidden: true}` when the event is not theirs to see;
* an auditor gets the full event with `command_id`, `previous_hash`, `hash` and `summary`;
* every event frame also carries `checkpoint`: the room at that version, signed (null when unavailable).

Each frame is the schema `LiveEvent`; a refusal is the schema `Error`.

A client that reconnects with `from_version` = last version seen + 1 misses nothing and sees nothing
twice. The client sends nothing (anything it sends is ignored). A refused token gets one error message
`{code, message}` and the close code 4000 + HTTP status (4401, 4403); a `from_version` below 1 closes
with 4422. A seat (a room's player, all of its tokens together) may hold a few feeds at once on one
gateway (close 4429 `too_many_feeds_for_seat` past them), a client address a bounded number across all
its seats (close 4429 `too_many_feeds_for_address`), and a gateway a bounded number (close 4503
`too_many_feeds`: retry later). The Redis channels behind it are described by the AsyncAPI document at `/asyncapi`.
"""


def command_components(ref_prefix: str = "#/components/schemas/") -> tuple[dict[str, Any], dict[str, Any]]:
    """Per rule-set ``<Ruleset>Command`` unions discriminated by ``kind``, and every schema of the rule-sets
    (their events and states too: services/gateway/game_schemas.py)."""
    names, components = game_schemas.game_components(ref_prefix)
    unions = {union: components.pop(union) for parts in names.values() for union in parts["command"]}
    return unions, components


ROOM_EVENT_SCHEMAS = ("RoomEvent", "LiveEvent")  # an event as a reader is shown it: on a route, on the live feeds


def typed_room_events(schemas: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """The event an answer or a live frame shows is one of the hosted rule-sets' (``events``: their unions' refs);
    the AsyncAPI document types its live frame with this too, so the two documents say the same."""
    for name in ROOM_EVENT_SCHEMAS:
        event = schemas.get(name, {}).get("properties", {})
        if "event" in event:
            event["event"] = {"description": "the event's payload (redacted for a player; `type` names it)",
                              "anyOf": [*events, {"type": "null"}]}


def typed_game_parts(schemas: dict[str, Any], ref_prefix: str = "#/components/schemas/") -> None:
    """Where an answer carries a rule-set's event or state, its schema is the union of the hosted rule-sets'."""
    names, _ = game_schemas.game_components(ref_prefix)
    events = [{"$ref": f"{ref_prefix}{union}"} for parts in names.values() for union in parts["event"]]
    states = [{"$ref": f"{ref_prefix}{union}"} for parts in names.values() for union in parts["state"]]
    typed_room_events(schemas, events)
    # forensics' rows of events (a ValueChange is one) and a dispute bundle's readable events
    for answer in ("EventRow", "ValueChange", "BundleEventEntry", "EnvelopeView"):
        row = schemas.get(answer, {}).get("properties", {})
        if "event" in row:
            row["event"] = {"description": "the event's payload (`type` names it)", "anyOf": events}
    views = [{"$ref": f"{ref_prefix}{union}"} for parts in names.values() for union in parts["view"]]
    if views:
        for answer in ("RoomView", "RoomAt"):
            properties = schemas.get(answer, {}).get("properties", {})
            if "view" in properties:
                properties["view"] = {"description": "what this player sees (their rule-set's view)",
                                      "anyOf": [*views, *([{"type": "null"}] if answer == "RoomAt" else [])]}
        seat_views = schemas.get("RoomAt", {}).get("properties", {})
        if "views" in seat_views:
            seat_views["views"] = {"description": "auditors: every seat's view",
                                   "anyOf": [{"type": "object", "additionalProperties": {"anyOf": views}},
                                             {"type": "null"}]}
    audit_steps = [parts["audit_step"] for parts in names.values()]
    if all(steps is not None for steps in audit_steps):  # every hosted audit view declares its steps' types
        step_refs = [{"$ref": f"{ref_prefix}{step}"} for steps in audit_steps for step in steps or ()]
        for answer in ("AuditStory", "AuditViewSubject"):
            story = schemas.get(answer, {}).get("properties", {})
            if "story" in story:
                story["story"] = {"description": "the item's steps as its rule-set's audit view tells them "
                                                 "(`type` names each)",
                                  "type": "array", "items": {"anyOf": step_refs} if step_refs else {}}
    state = schemas.get("StateAt", {}).get("properties", {})
    if "state" in state:
        state["state"] = {"$ref": f"{ref_prefix}RoomState"}
        schemas.update(room_state_components(states, ref_prefix))
    at = schemas.get("RoomAt", {}).get("properties", {})
    if "state" in at:
        at["state"] = {"description": "auditors: the game's state (its rule-set's)", "anyOf": [*states, {"type": "null"}]}
    schemas[responses.STATE_VALUE] = state_value_schema(ref_prefix)
    divergence = schemas.get("Divergence", {}).get("properties", {})
    for side in ("recorded", "recomputed"):
        if side in divergence:
            divergence[side] = {**responses.DIVERGENCE_SIDE, "default": None,
                                "description": f"what the {side} side holds (by the check)"}
    if "resources" in schemas.get("RoomResources", {}).get("properties", {}):
        schemas.update(_told_apart(schemas["RoomResources"], "ruleset", "resources", {
            name: {"$ref": f"{ref_prefix}{parts['resources'][0]}"} for name, parts in names.items()}, ref_prefix))
    if "rows" in schemas.get("ReadModelRows", {}).get("properties", {}):
        rows = {model: {"type": "array", "items": {"$ref": f"{ref_prefix}{row}"}}
                for parts in names.values() for model, row in parts["read_models"].items()}
        told = _told_apart(schemas["ReadModelRows"], "model", "rows", rows, ref_prefix)
        declared = registry.read_models()
        for model in rows:  # the filters the answer echoes: the model's own (fields of its row type), nothing else
            member = told[f"{schemas['ReadModelRows']['title']}{game_schemas.prefix_of(model)}"]
            filters = declared[model][1].filters if model in declared else ()
            member["properties"]["where"] = {
                "description": "the row fields filtered on (the model's filters; any other is refused 422 "
                               "`unknown_filter`)", "type": "object", "additionalProperties": False,
                "properties": {field: {"type": "string", "maxLength": 100} for field in filters}}
        schemas.update(told)
    create = schemas.get("CreateRoomRequest", {}).get("properties", {})
    if "options" in create:  # the room's rule-set decides which applies (its options_type / setup_type)
        options = [{"$ref": f"{ref_prefix}{name}"} for parts in names.values() for name in parts["options"]]
        setups = [{"$ref": f"{ref_prefix}{name}"} for parts in names.values() for name in parts["setup"]]
        create["options"] = {"description": "the creation options of the room's rule-set", "default": {},
                             "anyOf": options}
        create["setup"] = {"description": "a fully resolved setup of the room's rule-set (its random draws made)",
                           "anyOf": [*setups, {"type": "null"}], "default": None}


def _told_apart(answer: dict[str, Any], key: str, part: str, parts: dict[str, dict[str, Any]],
                ref_prefix: str) -> dict[str, Any]:
    """An answer whose ``part`` depends on the value of its ``key`` (the rule-set, the read model), as a union told
    apart by ``key``: one member per value, ``key`` that value and ``part`` its schema. The members and the union,
    under the answer's title."""
    title = answer["title"]
    members: dict[str, Any] = {}
    for value, schema in parts.items():
        member = copy.deepcopy(answer)
        member["title"] = f"{title}{game_schemas.prefix_of(value)}"
        member["properties"][key] = {"type": "string", "enum": [value]}
        member["properties"][part] = schema
        members[member["title"]] = member
    mapping = {value: f"{ref_prefix}{title}{game_schemas.prefix_of(value)}" for value in parts}
    union = {"title": title, "description": f"{answer.get('description', title)} (told apart by `{key}`)",
             "oneOf": [{"$ref": ref} for ref in mapping.values()], "discriminator": {"propertyName": key,
                                                                                     "mapping": mapping}}
    return {**members, title: union}


def state_value_schema(ref_prefix: str) -> dict[str, Any]:
    """A value read from a room's state at a path the caller names: any JSON the state holds there (its nested
    values are StateValues again), null where the path has no value."""
    inner = {"$ref": f"{ref_prefix}{responses.STATE_VALUE}"}
    return {"title": responses.STATE_VALUE,
            "description": "a value of a room's state at the path asked for (null where it has none): whatever "
                           "the game's state holds there",
            "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
                      {"type": "null"}, {"type": "array", "items": inner},
                      {"type": "object", "additionalProperties": inner}]}


def room_state_components(states: list[dict[str, Any]], ref_prefix: str) -> dict[str, Any]:
    """The room's state (events/room.py RoomState) with its ``game`` as one of the hosted games' states."""
    _, found = msgspec.json.schema_components([RoomState], ref_template=f"{ref_prefix}{{name}}")
    found["RoomState"]["properties"]["game"] = {"description": "the game's own state (its rule-set's)",
                                                "anyOf": [*states, {"type": "null"}]}
    return found


def error_schema() -> dict[str, Any]:
    return {
        "title": ERROR_SCHEMA,
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "description": "stable machine-readable reason, e.g. not_your_turn"},
            "message": {"type": "string", "description": "a sentence for people"},
            "field": {"type": "string", "description": "the request field at fault, when there is one"},
            # responses.Allowed: a list of values, or the bound a rule names (a count, a version, {"min": ...})
            "allowed": {**msgspec.json.schema(responses.Allowed),
                        "description": "the values, or the bound, that would have been accepted"},
            "receipt": {"$ref": "#/components/schemas/RefusalReceipt",
                        "description": "a refusal by the rules that was recorded: the deployment's signed receipt "
                                       "of it (docs/bundle-format.md section 8); keep it"},
        },
        "additionalProperties": True,
    }


def build_openapi(app: FastAPI, extra_types: list[type]) -> dict[str, Any]:
    """The document FastAPI generates, completed with what msgspec-decoded bodies and the gateway need."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=(app.description or "")
                         + "\n" + WEBSOCKET_PROTOCOL, routes=app.routes)
    _, found = msgspec.json.schema_components(extra_types, ref_template="#/components/schemas/{name}")
    unions, commands = command_components()
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(found)
    schemas.update(commands)
    schemas.update(unions)
    schemas[ERROR_SCHEMA] = error_schema()
    _typed_responses(schema, schemas)
    typed_game_parts(schemas)
    posted = schemas.get("VerifyBundleRequest", {}).get("properties", {})
    if "bundle" in posted:  # decoded as any object so the verifier itself names what is missing or extra
        posted["bundle"] = {"$ref": "#/components/schemas/DisputeBundle",
                            "description": "a dispute bundle as GET /rooms/{room}/dispute or `almanac dispute` wrote it"}
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    if "CommandRequest" in schemas:
        request = schemas["CommandRequest"]
        request.setdefault("properties", {})["command"] = {
            "description": "a command of the room's rule-set (the room decides which union applies)",
            "anyOf": [{"$ref": f"#/components/schemas/{name}"} for name in unions],
        }
    components["securitySchemes"] = {
        SECURITY_SCHEME: {"type": "http", "scheme": "bearer",
                          "description": "a player token from create/join, or an auditor token"}
    }
    error_response = {"description": "refused: {code, message, field, allowed}",
                      "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}}}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for status, response in list(responses.items()):
                if status.startswith(("4", "5")):
                    response["content"] = error_response["content"]
            responses.setdefault("4XX", error_response)
            responses.setdefault("5XX", {**error_response, "description": "internal_error (the log has the detail)"})
            # A route refused without a token says so (schemas.TOKEN_REQUIRED); the others answer without
            # one, and an auditor's or player's token may change what they answer (sending one never hurts).
            operation.setdefault("security", [{SECURITY_SCHEME: []}, {}])
    app.openapi_schema = schema
    return schema


def _typed_responses(schema: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Every route's success answer as a schema from services/gateway/responses.py (msgspec Structs)."""
    types = sorted({t for _, t in responses.RESPONSES.values()} | {responses.PENDING, *responses.ALSO_DOCUMENTED},
                   key=lambda t: t.__name__)
    refs, found = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    schemas.update(found)
    ref_of = {t: ref for t, ref in zip(types, refs, strict=True)}
    for path, path_item in schema.get("paths", {}).items():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            answers = operation["responses"]
            declared = responses.RESPONSES.get((method, path))
            if declared is not None:
                status, body = declared
                for other in [s for s in answers if s.startswith("2") and s != str(status)]:
                    del answers[other]
                described = answers.get(str(status), {}).get("description") or "answered"
                answers[str(status)] = {"description": described,
                                        "content": {"application/json": {"schema": ref_of[body]}}}
            if (method, path) in responses.PENDING_ROUTES:
                answers["202"] = {"description": "the engine has not answered within the wait: ask outcome_url later",
                                  "content": {"application/json": {"schema": ref_of[responses.PENDING]}}}
            if (method, path) in responses.TEXT_ROUTES:
                answers["200"] = {"description": responses.TEXT_ROUTES[(method, path)],
                                  "content": {"text/plain": {"schema": {"type": "string"}}}}


# Redoc 3's standalone bundle is an ES module (it uses import.meta and ends in `export`): loaded as a classic
# script, as FastAPI's get_redoc_html does, it stops at its first line and the page stays blank. As a module
# it draws the <redoc spec-url> element by itself once loaded. Its telemetry (traces sent to Redocly on every
# click) is turned off.
REDOC_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Almanac gateway - ReDoc</title>
  <link rel="icon" href="{vendor}/swagger-ui/favicon-32x32.png">
  <style>body {{ margin: 0; padding: 0; }}</style>
</head>
<body>
  <noscript>ReDoc needs JavaScript; the document itself is at <a href="{openapi_url}">{openapi_url}</a>.</noscript>
  <redoc spec-url="{openapi_url}" disable-telemetry="true"></redoc>
  <script type="module" src="{bundle}"></script>
</body>
</html>
"""

# Redoc draws its "API docs by Redocly" logo from cdn.redoc.ly (no option turns it off, in 2.5 as in 3.0). The
# page allows nothing but this server, so no reader's browser calls out, online or not: the vendored bundle (kept
# unchanged, SHA256SUMS) is served with the logo's two addresses made a drawing of its own name, inline. Its search
# builds a worker from a string (eval), hence 'unsafe-eval'.
REDOC_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-eval'; img-src 'self' data:; "
                "style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; font-src 'self' data:")
REDOC_BUNDLE = "/redoc/redoc.standalone.js"
REDOC_LOGOS = ("https://cdn.redoc.ly/redoc/logo-mini-full.svg", "https://cdn.redoc.ly/redoc/logo-mini.svg")
REDOC_LOGO = "data:image/svg+xml," + quote(
    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="20"><text x="0" y="15" font-family="sans-serif" '
    'font-size="13" fill="#8a8a8a">Redocly</text></svg>')


@cache
def redoc_bundle() -> bytes:
    """The vendored Redoc bundle with its logo inline; refuses to serve one whose logo addresses moved (an update
    of the vendored file must look again, not let the page call out)."""
    text = (STATIC_DIR / "vendor" / "redoc" / "redoc.standalone.js").read_text(encoding="utf-8")
    for logo in REDOC_LOGOS:
        if logo not in text:
            raise RuntimeError(f"the vendored Redoc no longer names {logo}: see services/gateway/api_docs.py")
        text = text.replace(logo, REDOC_LOGO)
    return text.encode()


def docs_router(openapi_url: str) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title="Almanac gateway - Swagger UI",
            swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{VENDOR}/swagger-ui/favicon-32x32.png",
            swagger_ui_parameters={"persistAuthorization": True},
        )

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return HTMLResponse(REDOC_PAGE.format(openapi_url=escape(openapi_url, quote=True), vendor=VENDOR,
                                              bundle=REDOC_BUNDLE),
                            headers={"Content-Security-Policy": REDOC_POLICY})

    @router.get(REDOC_BUNDLE)
    async def redoc_script() -> Response:
        return Response(redoc_bundle(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=3600"})

    return router
