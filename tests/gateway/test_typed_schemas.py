"""The API documents type every rule-set's commands, events and state: no open object, enums where the rules know."""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonschema import ValidationError
from schema_walk import REF, as_json, offline_openapi, open_spots, resolved, validator, walked
from suite_settings import suite_settings

from almanac.events import registry
from almanac.events.errors import RuleError
from almanac.events.testing import RoomDriver
from almanac.services.gateway import create_app
from almanac.services.gateway.asyncapi import asyncapi_document
from almanac.services.gateway.game_schemas import prefix_of


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return offline_openapi(tmp_path_factory.mktemp("doc"))


def game_roots() -> list[str]:
    return [f"{prefix_of(name)}{part}" for name in registry.names() for part in ("Command", "Event", "State")]


def test_no_rule_set_command_event_or_state_is_an_open_object(openapi: dict[str, Any]) -> None:
    roots = game_roots()
    assert set(roots) <= set(openapi["components"]["schemas"])
    assert open_spots(openapi, roots) == []
    # and the answers that carry them point at them: a room's events, an auditor's state
    assert open_spots(openapi, ["RoomEvent", "EventPage", "StateAt", "CommandAccepted"]) == []


def test_the_walk_finds_an_open_object_when_one_is_there(openapi: dict[str, Any]) -> None:
    # The attacker's check of the check: the state before this work carried the game as an open object
    document = {"components": {"schemas": {**openapi["components"]["schemas"],
                                           "Loose": {"type": "object", "properties": {"game": {"type": "object"}}}}}}
    assert open_spots(document, ["Loose"]) == ["Loose.game: open object"]


def command_schema(document: dict[str, Any], ruleset: str, kind: str) -> dict[str, Any]:
    union = document["components"]["schemas"][f"{prefix_of(ruleset)}Command"]
    return document["components"]["schemas"][union["discriminator"]["mapping"][kind][len(REF):]]


def enum_of(schema: dict[str, Any]) -> list[str] | None:
    if "enum" in schema:
        return schema["enum"]
    if "propertyNames" in schema:
        return schema["propertyNames"].get("enum")
    for member in schema.get("anyOf", []):
        if "enum" in member:
            return member["enum"]
    return None


@pytest.mark.parametrize("document", ["openapi", "asyncapi"])
def test_every_value_list_a_rule_set_publishes_is_an_enum_in_both_documents(document: str, openapi: dict[str, Any]) -> None:
    doc = openapi if document == "openapi" else asyncapi_document()
    free = []
    for name in registry.names():
        for path, values in registry.manifest(name).allowed_values.items():
            kind, _, field = path.partition(".")
            if enum_of(command_schema(doc, name, kind)["properties"][field]) != list(values):
                free.append(f"{name} {path}")
    assert free == []
    # realm's words that were free strings: ore, moons, buy, pay
    mine, offer = command_schema(doc, "realm", "mine"), command_schema(doc, "realm", "offer_trade")
    assert enum_of(mine["properties"]["ore"]) == ["stone", "bronze", "iron", "steel", "gold"]
    assert enum_of(mine["properties"]["moons"]) == ["count", "save"]
    assert "gold" in enum_of(offer["properties"]["buy"]) and "" in enum_of(offer["properties"]["pay"])


def free_event_fields(document: dict[str, Any]) -> list[str]:
    """Each string field (at any depth) of an installed version's events that a command field of the same name and
    version gives values for, but which does not list them all as its own enum."""
    from almanac.services.gateway.game_schemas import game_components  # noqa: PLC0415

    schemas = document["components"]["schemas"]
    free = []
    for name, parts in game_components()[0].items():
        for version, named in parts["versions"].items():
            published: dict[str, set[str]] = {}
            for member in schemas[named["command"]]["oneOf"]:
                for field, schema in resolved(document, member).get("properties", {}).items():
                    published.setdefault(field, set()).update(enum_of(schema) or ())
            for schema, _ in walked(document, [named["event"]]):
                for field, inner in schema.get("properties", {}).items():
                    strings = inner.get("type") == "string" or any(m.get("type") == "string"
                                                                    for m in inner.get("anyOf", []))
                    if published.get(field) and strings and not published[field] <= set(enum_of(inner) or ()):
                        free.append(f"{name}@{version} {schema.get('title', '?')}.{field}")
    return sorted(set(free))


@pytest.mark.parametrize("document", ["openapi", "asyncapi"])
def test_an_event_field_named_as_a_command_field_with_an_enum_carries_its_values(document: str,
                                                                                 openapi: dict[str, Any]) -> None:
    # Given every installed version's commands, some of whose fields list their values (realm's mine.ore, moons)
    doc = openapi if document == "openapi" else asyncapi_document()
    # When its events are read, as an auditor and as a player receives them (realm's RealmMinedAsSeen)
    # Then a string field of theirs named as such a command field lists those values too: a typed client gets
    # the event's ore as the union of ores it sent, not any string
    assert free_event_fields(doc) == []
    mined = doc["components"]["schemas"]["RealmMinedAsSeen"]["properties"]
    assert enum_of(mined["ore"]) == ["stone", "bronze", "iron", "steel", "gold"]
    assert enum_of(mined["moons"]) == ["count", "save"]


def test_the_walk_finds_an_event_field_without_its_enum(openapi: dict[str, Any]) -> None:
    # The check of the check: the enum taken off a nested event record's field is found
    document = copy.deepcopy(openapi)
    raided = document["components"]["schemas"]["RealmRaidedAsSeen"]["properties"]["resource"]
    raided.pop("enum", None)
    for member in raided.get("anyOf", []):
        member.pop("enum", None)
    assert free_event_fields(document) == ["realm@1 Raided (as a player sees it).resource",
                                           "realm@2 Raided (as a player sees it).resource"]


def test_webhook_kinds_and_scopes_are_the_notifiers_own_enums_in_what_is_sent_and_answered(openapi: dict[str, Any]) -> None:
    """A client never guesses a notice's kind or a subscription's scope: each is an enum of the values the notifier
    knows, in the request it sends, the subscription it gets back and the notice it receives."""
    from almanac.services import notifier  # noqa: PLC0415

    schemas = openapi["components"]["schemas"]
    request, answer, notice = schemas["SubscribeRequest"], schemas["WebhookSubscription"], schemas["WebhookNotice"]
    kinds, scopes = sorted(notifier.KINDS), sorted(notifier.SCOPES)

    def values(schema: dict[str, Any]) -> list[str] | None:
        found = enum_of(schema)
        return None if found is None else sorted(found)

    assert values(request["properties"]["kinds"]["items"]) == kinds
    assert values(request["properties"]["scope"]) == scopes
    assert values(answer["properties"]["kinds"]["items"]) == kinds and values(answer["properties"]["scope"]) == scopes
    assert values(notice["properties"]["kind"]) == kinds and values(notice["properties"]["scope"]) == scopes


def realm_room() -> RoomDriver:
    room = RoomDriver("typed-realm")
    room.apply("alice", {"kind": "create_room", "ruleset": "realm", "options": {"players": ["alice", "bob"]}})
    room.apply("alice", {"kind": "join_room"})
    room.apply("bob", {"kind": "join_room"})
    return room


@pytest.mark.parametrize("path", sorted(registry.manifest("realm").allowed_values))
def test_realm_publishes_what_its_rules_accept(path: str) -> None:
    """A value outside the published list is refused by the rules naming that field; every listed value gets past
    that check (refused, if at all, for another reason): the enum is the rules' own list, not a guess."""
    kind, _, field = path.partition(".")
    values = registry.manifest("realm").allowed_values[path]
    base = {"mine": {"ore": "gold"}, "smelt": {"ore": "stone", "amount": 1}, "get_food": {"method": "hunt"},
            "equip_army": {"tier": "iron"}, "raid": {"target": "bob", "resource": "food"},
            "besiege": {"target": "bob"}, "choose_tax_season": {"city": "bob", "season": "spring"},
            "send_merchant": {"to": "bob", "load": {"food": 1}},
            "offer_trade": {"trade_id": "trade-1", "buy": "food"},
            "counter_offer": {"trade_id": "trade-1", "want": "food"}}[kind]

    def refusal(value: str) -> RuleError | None:
        room, player, fields = realm_room(), "alice", dict(base)
        if kind in ("offer_trade", "counter_offer"):  # a merchant at bob's first: the trade's id is its version
            room.apply("alice", {"kind": "send_merchant", "to": "bob", "load": {"food": 1000}}, leftover=True)
            fields["trade_id"] = next(m for m in room.game.merchants)
        if kind == "counter_offer":
            room.apply("alice", {"kind": "offer_trade", "trade_id": fields["trade_id"], "buy": "wood"}, leftover=True)
            player = "bob"
        body = {"kind": kind, **fields, field: {value: 1} if isinstance(fields.get(field), dict) else value}
        try:
            room.apply(player, body, leftover=True)
        except RuleError as error:
            return error
        return None

    outside = refusal("zzz")
    if outside is None or not str(outside.field or "").startswith(field):
        pytest.skip(f"{path}: the rules refuse this command earlier ({outside and outside.code}) in a fresh room")
    assert outside.field.startswith(field)
    for value in values:
        error = refusal(value)
        assert error is None or not str(error.field or "").startswith(field) or error.code != outside.code, (value, error)


def test_events_and_states_of_real_games_fit_the_document(openapi: dict[str, Any]) -> None:
    # Given a realm game played by its bot in memory, through the one room step
    from almanac.events import codec  # noqa: PLC0415
    from almanac.events.dice import Dice  # noqa: PLC0415

    room, manifest = realm_room(), registry.manifest("realm")
    for step in range(60):
        player = ("alice", "bob")[step % 2]
        command = manifest.policy(room.game, player, Dice(b"typed", "typed-realm", step), 0)
        if command is None:
            continue
        try:
            room.apply(player, command, leftover=True)
        except RuleError:
            pass
    events = validator(openapi, "RealmEvent")
    decider = manifest.decider
    # Then every event, whole (an auditor) and as each player receives it, fits RealmEvent
    for envelope in room.envelopes:
        event = codec.decode_event(envelope)
        assert not list(events.iter_errors(as_json(event))), envelope.type
        for player in ("alice", "bob"):
            shown = decider.redact(event, player)
            if shown is not None:
                errors = [error.message for error in events.iter_errors(as_json(shown))]
                assert errors == [], (envelope.type, player, errors[:3])
    # and the state an auditor reads fits RoomState with its game a RealmState
    assert not list(validator(openapi, "RoomState").iter_errors(as_json(room.state)))
    # while a made-up ore does not fit a mine command
    mine = validator(openapi, "RealmCommand")
    assert list(mine.iter_errors({"kind": "mine", "ore": "mithril"}))
    assert not list(mine.iter_errors({"kind": "mine", "ore": "gold"}))


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_the_asyncapi_page_renders_as_documentation_offline_in_chromium(redis_url: str, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient  # noqa: PLC0415
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    app = create_app(suite_settings(redis_url=redis_url, data_dir=str(tmp_path)))
    with TestClient(app) as http:
        page_answer = http.get("/asyncapi", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
        json_answer = http.get("/asyncapi", headers={"Accept": "*/*"})
    # Given the page as a browser gets it (a client still gets the JSON document)
    assert page_answer.headers["content-type"].startswith("text/html")
    assert json_answer.json()["asyncapi"] == "3.0.0"
    assert "script-src" not in page_answer.headers["content-security-policy"]
    html_file = tmp_path / "asyncapi.html"
    html_file.write_text(page_answer.text)
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("request", lambda request: requests.append(request.url))
            # When Chromium opens it with no network at all
            page.context.set_offline(True)
            page.goto(html_file.as_uri())
            # Then it reads as documentation: channels, operations, and realm's mine with its ores as an enum
            assert page.locator("#channel-live").is_visible()
            assert "followRoom" in page.locator("#operation-followRoom").inner_text()
            mine = page.locator("#schema-RealmMine").inner_text()
            assert all(ore in mine for ore in ('"stone"', '"gold"')) and "one of" in mine
            page.locator("#schema-RealmMine").scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "asyncapi.png"))
        finally:
            browser.close()
    assert [url for url in requests if not url.startswith("file:")] == []  # nothing fetched from anywhere
    assert (tmp_path / "asyncapi.png").stat().st_size > 10_000


BUILT_IN = ("board", "claim", "realm", "sectors")


def test_every_built_in_game_declares_a_closed_view_and_the_view_answers_name_it(openapi: dict[str, Any]) -> None:
    assert open_spots(openapi, [f"{prefix_of(name)}View" for name in BUILT_IN]) == []
    named = {ref["$ref"][len(REF):] for ref in openapi["components"]["schemas"]["RoomView"]["properties"]["view"]["anyOf"]}
    assert named >= {f"{prefix_of(name)}View" for name in BUILT_IN}


def played(name: str, options: dict[str, Any], steps: int = 60) -> Iterator[tuple[RoomDriver, list[str]]]:
    """A room of ``name`` played by its bot in memory: the room and its seats after every step."""
    from almanac.events.dice import Dice  # noqa: PLC0415

    manifest = registry.manifest(name)
    room = RoomDriver(f"typed-{name}", now_ms=1_700_000_000_000)
    room.apply("alice", {"kind": "create_room", "ruleset": name, "options": options})
    room.apply("alice", {"kind": "join_room"})
    seats = ["alice"]
    try:
        room.apply("bob", {"kind": "join_room"})
        seats.append("bob")
    except RuleError:
        pass  # a one-seat game
    for step in range(steps):
        yield room, seats
        player = seats[step % len(seats)]
        command = manifest.policy(room.game, player, Dice(b"typed", room.room, step), room.now_ms)
        if command is not None:
            with contextlib.suppress(RuleError):
                room.apply(player, command, leftover=True, now_ms=room.now_ms + 3_600_000)


@pytest.mark.parametrize(("name", "options"), [("board", {}), ("claim", {}), ("sectors", {}),
                                               ("realm", {"players": ["alice", "bob"]})])
def test_real_views_are_exactly_their_declared_type(name: str, options: dict[str, Any], openapi: dict[str, Any]) -> None:
    # Given a game played by its bot, When every seat's view is read after every move, Then it decodes strictly into
    # the declared type (no field missing, none extra, no wrong type) and fits the document's <Name>View
    view_type = registry.manifest(name).view_type
    schema = validator(openapi, f"{prefix_of(name)}View")
    for room, seats in played(name, options):
        for seat in seats:
            view = as_json(registry.manifest(name).shown_view(room.game, seat))
            msgspec.convert(view, view_type, strict=True)
            assert not list(schema.iter_errors(view)), (name, seat, room.version)
    # and a view with a field the type does not know is refused (the declaration is closed)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**view, "surprise": 1}, view_type, strict=True)


@pytest.mark.parametrize(("name", "options"), [("board", {}), ("claim", {}), ("sectors", {}),
                                               ("realm", {"players": ["alice", "bob"], "starting_stock": {"gold": 5}})])
def test_a_room_request_takes_each_rule_sets_options_and_setup_as_typed(name: str, options: dict[str, Any],
                                                                        openapi: dict[str, Any]) -> None:
    # Given a room created with options its rule-set takes, When its recorded setup is read back from room.created
    from almanac.events import codec  # noqa: PLC0415

    room = next(room for room, _ in played(name, options, steps=1))
    created = as_json(codec.decode_event(room.envelopes[0]))
    request = validator(openapi, "CreateRoomRequest")
    # Then a creation request carrying those options, or that setup, fits the document's CreateRoomRequest
    assert not list(request.iter_errors({"ruleset": name, "player": "alice", "options": options}))
    assert not list(request.iter_errors({"ruleset": name, "player": "alice", "setup": created["setup"]}))
    # and options or a setup that are no rule-set's (here: not even an object) are refused by the document too
    assert list(request.iter_errors({"ruleset": name, "player": "alice", "options": ["surprise"]}))
    assert list(request.iter_errors({"ruleset": name, "player": "alice", "setup": "alice"}))


def operation_roots(document: dict[str, Any]) -> dict[str, str]:
    """Every operation's parameters, request body and answers (every status, every media type) as roots of the
    walk, named where they are: what the walk reaches from them is every component any operation uses."""
    schemas = document["components"]["schemas"]
    roots: dict[str, str] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            parts = [(f"parameter {p.get('in')} {p.get('name')}", {"content": {"": p}})
                     for p in [*item.get("parameters", []), *operation.get("parameters", [])]]
            parts += [("request", operation.get("requestBody", {}))] + list(operation.get("responses", {}).items())
            for status, part in parts:
                for media, content in part.get("content", {}).items():
                    schema = content.get("schema")
                    if schema is not None:
                        name = f"{method.upper()} {path} {status} {media}".rstrip()
                        schemas[name] = schema
                        roots[name] = name
    return roots


def test_the_walk_starts_from_every_operation_of_the_document(openapi: dict[str, Any]) -> None:
    # Given the document, When its operations are taken as the walk's roots, Then every operation's answer is one,
    # its parameters too: the roots come from the document, not from a list someone keeps
    document = copy.deepcopy(openapi)
    roots = operation_roots(document)
    operations = [(m.upper(), p) for p, item in openapi["paths"].items() for m in item if m != "parameters"]
    assert {(root.split()[0], root.split()[1]) for root in roots} == set(operations)
    assert "GET /rooms/{room}/resources 200 application/json" in roots
    assert "GET /read-models/{model} parameter path model" in roots
    # and a component only an operation's parameter names is walked (an open one is found)
    document = copy.deepcopy(openapi)
    document["components"]["schemas"]["Loose"] = {"type": "object"}
    document["paths"]["/rooms/{room}/resources"]["get"]["parameters"].append(
        {"in": "query", "name": "loose", "schema": {"$ref": REF + "Loose"}})
    assert "Loose: open object" in open_spots(document, list(operation_roots(document)))


# What the document still leaves open, each with its reason; the walk below fails on any other open spot (a
# route added tomorrow is walked the day it is added) and on an entry here that is no longer open. It may only
# shrink: OPEN_CEILING is its size, lowered with every entry typed, never raised (a new open spot is typed instead).
STILL_OPEN = {
    # documents of another standard, served as such (their own standard's schema describes them; a copy here
    # would be a second one to drift): an AsyncAPI document (its components are JSON Schemas), and a rule-set's
    # JSON Schema (GET /rulesets/{name}/schema: schemas are any JSON Schema, which is what these hold)
    "AsyncApiDocument.info", "AsyncApiDocument.servers", "AsyncApiDocument.channels",
    "AsyncApiDocument.operations", "AsyncApiDocument.components",
    "RulesetSchema.commands.items", "RulesetSchema.options", "RulesetSchema.$defs",
    # a command's body is the client's JSON as sent, kept byte for byte as evidence: a refused one may match no
    # command at all (its refusal is the point), and a bundle's records, accepted or refused, are as stored (a
    # forged bundle's as forged). The records around them are typed (RefusedCommand, CommandRecord).
    "RefusedCommand.body", "CommandRecord.body",
    # a failed bundle step's two sides: often the posted bundle's own part (whatever a forger wrote there)
    "BundleStep.recorded", "BundleStep.recomputed",
}
OPEN_CEILING = 12  # was 14 (resources and read-model rows were open, a rejection's record too)


def test_no_operation_answers_or_takes_an_open_object_beyond_the_listed_ones(openapi: dict[str, Any]) -> None:
    document = copy.deepcopy(openapi)
    spots = {spot.rsplit(": ", 1)[0] for spot in open_spots(document, list(operation_roots(document)))}
    # a plugin that declares no view type (the test suite's counter game): its view is its own object
    spots -= {f"{prefix_of(name)}View" for name in registry.names() if registry.manifest(name).view_type is None}
    # and one that declares no resources or row types: those are its own objects too
    spots -= {f"{prefix_of(name)}Resources" for name in registry.names()
              if any(registry.at(name, v).resources_type is None for v in registry.versions(name))}
    spots -= {f"{prefix_of(name)}{prefix_of(model.name)}Row" for name in registry.names()
              for v in registry.versions(name) for model in registry.at(name, v).read_models if model.row_type is None}
    assert len(STILL_OPEN) <= OPEN_CEILING, "STILL_OPEN only shrinks: type the new spot instead"
    assert sorted(spots - STILL_OPEN) == [], "new open spots: type them"
    assert sorted(STILL_OPEN - spots) == [], "typed now: take them off STILL_OPEN"
    # the forensic answers' trees are typed: events, values at a path, the changes between versions
    for typed in ("Explanation", "ValueChange", "RoomDiff", "BisectAnswer", "RoomAt", "EventRow", "PathChange",
                  "RoomResources", "ReadModelRows", "Rejections"):
        assert not [s for s in spots if s.startswith(f"{typed}.")], typed


def test_every_built_in_game_declares_its_resources_and_read_model_rows() -> None:
    # The allowance above for a plugin that declares none never covers a built-in game
    undeclared = [f"{m.ref} resources" for m in registry.all_manifests() if m.name in BUILT_IN and m.resources_type is None]
    undeclared += [f"{m.ref} {model.name}" for m in registry.all_manifests() if m.name in BUILT_IN
                   for model in m.read_models if model.row_type is None]
    assert undeclared == []


BUILT_IN_REFS = [m.ref for m in registry.all_manifests() if m.name in BUILT_IN]


@pytest.mark.parametrize("ref", BUILT_IN_REFS)
def test_real_resources_and_rows_are_exactly_their_declared_types(ref: str, openapi: dict[str, Any]) -> None:
    # Given a game of every installed version played by its bot, When its resources and its read models' rows are
    # made after every move, Then they decode strictly into the declared types and fit the document's components
    from almanac.events import codec  # noqa: PLC0415

    manifest = registry.at(*registry.parse(ref))
    name = manifest.name
    options = {"players": ["alice", "bob"]} if name == "realm" else {}
    resources = validator(openapi, f"{prefix_of(name)}Resources")
    rows = {model.name: validator(openapi, f"{prefix_of(name)}{prefix_of(model.name)}Row") for model in manifest.read_models}
    made: dict[str, int] = dict.fromkeys(rows, 0)
    seen = 0
    trading = "send_merchant" in {t.__struct_config__.tag for t in manifest.decider.command_types}
    for step, (room, _) in enumerate(played(ref, options, steps=40)):
        if trading and step == 0:  # the bot seldom trades early: a merchant on the road makes ledger rows
            room.apply("alice", {"kind": "send_merchant", "to": "bob", "load": {"food": 1}}, leftover=True)
        value = as_json(manifest.decider.resources(room.game))
        msgspec.convert(value, manifest.resources_type, strict=True)
        assert not list(resources.iter_errors(value)), (ref, room.version)
        for model in manifest.read_models:
            types = model.row_type if isinstance(model.row_type, tuple) else (model.row_type,)
            found = [model.room_row(room.state)] if model.room_row is not None else [
                row for envelope in room.envelopes[seen:] for row in model.event_rows(envelope, codec.decode_event(envelope))]
            for row in filter(None, found):
                row = as_json(row)
                assert not list(rows[model.name].iter_errors(row)), (ref, model.name, row)
                assert sum(_fits(row, t) for t in types) == 1, (ref, model.name, row)
                made[model.name] += 1
        seen = len(room.envelopes)
    assert all(made.values()), made  # every model made rows to check
    # and a resources answer with a field the type does not know is refused (the declaration is closed)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**value, "surprise": 1}, manifest.resources_type, strict=True)


def _fits(value: Any, row_type: type) -> bool:
    try:
        msgspec.convert(value, row_type, strict=True)
    except msgspec.ValidationError:
        return False
    return True


# Every installed version of every rule-set, not only its default: a board@2 room answers board@2's events.
INSTALLED = [m for m in registry.all_manifests() if m.name in registry.names()]


def encoded_fields(struct: type) -> set[str]:
    """The names a Struct's fields carry in JSON, its tag field included."""
    tag_field = struct.__struct_config__.tag_field
    return {f.encode_name for f in msgspec.structs.fields(struct)} | ({tag_field} if tag_field else set())


def documents_roots(document: dict[str, Any], part: str) -> list[dict[str, Any]]:
    """The unions an answer (or a channel's message) names for a part of a game: a rule-set's commands, events,
    states or views, each member resolved. Taken where the documents use them, not from game_schemas' names."""
    schemas = document["components"]["schemas"]
    where = {("openapi", "command"): ("CommandRequest", "command"), ("openapi", "event"): ("RoomEvent", "event"),
             ("openapi", "state"): ("RoomState", "game"), ("openapi", "view"): ("RoomView", "view"),
             ("asyncapi", "command"): ("CommandRecord", "body"), ("asyncapi", "event"): ("LiveEvent", "event")}
    answer, field = where[("asyncapi" if "asyncapi" in document else "openapi", part)]
    return [resolved(document, member) for member in schemas[answer]["properties"][field]["anyOf"]]


def union_members(document: dict[str, Any], union: dict[str, Any]) -> list[dict[str, Any]]:
    return [resolved(document, member) for member in union.get("anyOf", union.get("oneOf", []))]


def tag_of(schema: dict[str, Any], tag_field: str) -> str | None:
    values = schema.get("properties", {}).get(tag_field, {}).get("enum", [])
    return values[0] if len(values) == 1 else None


def undocumented_parts(document: dict[str, Any], manifest: Any) -> list[str]:
    """What of one installed version the document's answers do not name: a union of its commands exactly (every
    kind with its fields, its published enums), one of its events (every event type with its fields), its state
    and its view (their fields)."""
    decider, missing = manifest.decider, []
    kinds = {t.__struct_config__.tag: t for t in decider.command_types}

    def commands_fit(union: dict[str, Any]) -> bool:
        mapping = union.get("discriminator", {}).get("mapping", {})
        if set(mapping) != set(kinds):
            return False
        members = {kind: resolved(document, {"$ref": ref}) for kind, ref in mapping.items()}
        if any(set(members[kind]["properties"]) != encoded_fields(t) for kind, t in kinds.items()):
            return False
        return all(enum_of(members[path.partition(".")[0]]["properties"][path.partition(".")[2]]) == list(values)
                   for path, values in manifest.allowed_values.items())

    if not any(commands_fit(union) for union in documents_roots(document, "command")):
        missing.append(f"{manifest.ref} commands {sorted(kinds)}")

    def events_fit(union: dict[str, Any]) -> bool:
        members = {tag_of(m, "type"): set(m.get("properties", {})) for m in union_members(document, union)}
        return all(members.get(t.__struct_config__.tag) == encoded_fields(t) for t in decider.event_types)

    if not any(events_fit(union) for union in documents_roots(document, "event")):
        missing.append(f"{manifest.ref} events {sorted(t.__struct_config__.tag for t in decider.event_types)}")
    if "asyncapi" in document:  # the channels carry commands and events; states and views are the gateway's answers
        return missing
    for part, struct in (("state", decider.state_type), ("view", manifest.view_type)):
        if struct is not None and not any(set(s.get("properties", {})) == encoded_fields(struct)
                                          for s in documents_roots(document, part)):
            missing.append(f"{manifest.ref} {part} {struct.__name__}")
    return missing


@pytest.mark.parametrize("document", ["openapi", "asyncapi"])
def test_every_installed_version_s_commands_events_state_and_view_are_in_both_documents(
        document: str, openapi: dict[str, Any]) -> None:
    # Given every installed version of every rule-set (the registry's, default or not)
    doc = openapi if document == "openapi" else asyncapi_document()
    assert {m.ref for m in INSTALLED} >= {"board@1", "board@2", "realm@1", "realm@2"}
    # When the document's answers (or channels) are read for the unions they name
    # Then each version's commands (kinds, fields, enums), events (types, fields), state and view are one of them
    assert [gap for manifest in INSTALLED for gap in undocumented_parts(doc, manifest)] == []


def test_the_walk_finds_a_version_the_documents_lack(openapi: dict[str, Any]) -> None:
    # The check of the check: board@2's event union taken out of the answers, board@2's events are found missing
    document = copy.deepcopy(openapi)
    event = document["components"]["schemas"]["RoomEvent"]["properties"]["event"]
    event["anyOf"] = [m for m in event["anyOf"] if "turn_began" not in str(union_members(document, resolved(document, m)))]
    assert undocumented_parts(document, registry.at("board", 2)) == [
        "board@2 events ['board.deck_shuffled', 'board.element_placed', 'board.element_skipped', 'board.game_ended', "
        "'board.season_ended', 'board.turn_began', 'board.turn_timed_out']"]
    assert undocumented_parts(document, registry.at("board", 1)) == []


def test_versions_that_share_their_types_share_their_components(openapi: dict[str, Any]) -> None:
    # Given realm@2, whose every type is realm@1's, and board@2, which adds a turn limit to board@1
    schemas = openapi["components"]["schemas"]
    # Then realm@2 adds no component, and board@2 only what differs (its events in common with board@1 are shared)
    assert not [name for name in schemas if name.startswith("RealmV2")]
    assert {"BoardV2Command", "BoardV2Event", "BoardV2State", "BoardV2View", "BoardV2TurnBegan"} <= set(schemas)
    board_v2 = {m["$ref"] for m in schemas["BoardV2Event"]["anyOf"]}
    assert {REF + "BoardElementPlaced", REF + "BoardGameEnded"} <= board_v2
    assert not [name for name in schemas if name.startswith("BoardV2Element")]


VERSION_OPTIONS = {"realm": {"players": ["alice", "bob"]}, "board@2": {"turn_limit_s": 60}}


@pytest.mark.parametrize("ref", [m.ref for m in INSTALLED if m.name in BUILT_IN])
def test_a_room_of_every_installed_version_answers_within_the_documents(ref: str, openapi: dict[str, Any]) -> None:
    # Given a room of each installed version (board@2 with a turn limit, so it writes its own events) played by its bot
    from almanac.events import codec  # noqa: PLC0415

    manifest = registry.at(*registry.parse(ref))
    options = VERSION_OPTIONS.get(ref, VERSION_OPTIONS.get(manifest.name, {}))
    schemas = {**openapi["components"]["schemas"]}
    roots = {"event": schemas["RoomEvent"]["properties"]["event"], "view": schemas["RoomView"]["properties"]["view"]}
    document = {**openapi, "components": {"schemas": {**schemas, **{f"Any{k}": v for k, v in roots.items()}}}}
    events, views, state = validator(document, "Anyevent"), validator(document, "Anyview"), validator(document, "RoomState")
    live = validator(asyncapi_document(), "LiveEvent")
    seen: set[str] = set()
    # Each distinct payload is checked once: a seat is often shown the event whole, and validating one against the
    # union of every event type is most of this story's CPU (sectors@1: 456 payloads, 228 distinct).
    checked: set[tuple[str, str]] = set()
    read = 0
    for room, seats in played(ref, options, steps=40):
        # When every event is read whole (an auditor) and as each seat receives it, and every seat's view and the state
        for envelope in room.envelopes[read:]:
            event = codec.decode_event(envelope)
            seen.add(envelope.type)
            shown = [as_json(event)] + [as_json(e) for s in seats if (e := manifest.decider.redact(event, s)) is not None]
            # Then each fits the OpenAPI answers' event, and the AsyncAPI live feed's
            for payload in shown:
                if (key := (envelope.type, json.dumps(payload, sort_keys=True))) in checked:
                    continue
                checked.add(key)
                assert not list(events.iter_errors(payload)), (ref, envelope.type)
                assert not list(live.iter_errors({"version": 1, "type": envelope.type, "event": payload})), envelope.type
        read = len(room.envelopes)
        for seat in seats:
            assert not list(views.iter_errors(as_json(manifest.shown_view(room.game, seat)))), (ref, seat)
        assert not list(state.iter_errors(as_json(room.state))), ref
    # and some of the version's own events (those its default version lacks: board@2's turn began) were among them
    own = {t.__struct_config__.tag for t in manifest.decider.event_types} - {
        t.__struct_config__.tag for t in registry.default(manifest.name).decider.event_types}
    assert not own or own & seen, (own, seen)


@pytest.mark.parametrize("component", ["Error", "RefusalReason"])
def test_a_refusals_allowed_values_are_typed_as_the_rules_fill_them(component: str, openapi: dict[str, Any]) -> None:
    """Given the refusals rule-sets really give (realm's stock left, a list of kinds, sectors' {"min": year}), when
    a client reads one, then the document describes it: no refusal answer is outside its own schema."""
    check = validator(openapi, component)
    for allowed in (["stone", "gold"], [1, 2], 5_000, {"min": 3}):
        check.validate({"code": "realm.not_enough_wood", "message": "m", "field": "amount", "allowed": allowed})
    with pytest.raises(ValidationError):
        check.validate({"code": "c", "message": "m", "allowed": "anything"})
