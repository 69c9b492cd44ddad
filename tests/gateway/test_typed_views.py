"""Every rule-set's states and views are typed to their words: each string and map key an enum from the rule data,
or marked free on purpose, and whole games' real answers fit them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from schema_walk import REF, as_json, offline_openapi, reached, validator, walked

from almanac.events import registry
from almanac.events.dice import Dice
from almanac.events.errors import RuleError
from almanac.events.schema import FREE
from almanac.events.testing import RoomDriver
from almanac.services.gateway.game_schemas import game_components, prefix_of

BUILT_IN = ("board", "claim", "realm", "sectors")
# The answers the gateway gives of a game besides its events: a seat's view, the state, an auditor's resources.
ANSWERS = ("view", "state")


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return offline_openapi(tmp_path_factory.mktemp("doc"))


def version_parts() -> list[tuple[str, int, str, str]]:
    """(rule-set, version, part, component) of every installed version's view and state, as the documents name them."""
    names, _ = game_components()
    return [(name, version, part, parts[part]) for name, entry in names.items() if name in BUILT_IN
            for version, parts in entry["versions"].items() for part in ANSWERS]


def untyped_words(document: dict[str, Any], root: str) -> list[str]:
    """Where a schema reachable from ``root`` holds a string, or a map keyed by strings, that is neither an enum
    (or const) nor marked free (``events.schema.free``): a word the documents leave to the client's guess."""
    def typed(schema: dict[str, Any]) -> bool:
        return "enum" in schema or "const" in schema or schema.get(FREE) is True

    found: list[str] = []
    for schema, where in walked(document, [root]):
        if schema.get("type") == "string" and not typed(schema):
            found.append(f"{where}: a free string")
        if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict) and not typed(
                schema.get("propertyNames", {})):
            found.append(f"{where}: free map keys")
    return found


def test_every_string_and_map_key_of_every_view_and_state_is_an_enum_or_marked_free(openapi: dict[str, Any]) -> None:
    # Given every installed version of every built-in rule-set (board@2, realm@2 too)
    parts = version_parts()
    assert {(name, version) for name, version, _, _ in parts} >= {("board", 2), ("realm", 2), ("claim", 1)}
    # When each version's view and state is walked to its strings and its maps' keys
    untyped = [spot for _, _, _, root in parts for spot in untyped_words(openapi, root)]
    # Then every one lists its values, or says on purpose that no list bounds it (a name, an id, text)
    assert untyped == []


def game_roots() -> set[str]:
    """Every component the documents publish of a game: each installed version's commands, events (whole and as a
    player receives them), state, view, creation options and setup, and each rule-set's resources, read-model rows
    and audit steps, as game_components names them."""
    names, _ = game_components()
    found: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, list | tuple):
            for inner in value:
                collect(inner)
        elif isinstance(value, dict):
            for inner in value.values():
                collect(inner)

    for name in BUILT_IN:
        collect(names[name])
    return found


def test_every_string_and_map_key_of_every_game_component_is_an_enum_or_marked_free(openapi: dict[str, Any]) -> None:
    # Given every component the OpenAPI publishes of a built-in game: commands, events (realm.trade_offered's pay, the
    # room's own seat_to_bot), setups, resources, read-model rows (realm's ledger rows), audit steps, views, states
    roots = game_roots()
    assert {"RealmEvent", "RealmTradeOfferedStep", "RealmTradesRow", "RealmResources", "ClaimClaimsRow",
            "BoardV2Event", "SectorsCommand"} <= roots, sorted(roots)
    # When each is walked to its strings and its maps' keys
    untyped = sorted({spot for root in roots for spot in untyped_words(openapi, root)})
    # Then every one lists the rule data's values, or says on purpose that no list bounds it
    assert untyped == []


def test_every_game_word_the_asyncapi_messages_carry_is_an_enum_or_marked_free() -> None:
    # Given the AsyncAPI document: its messages' payloads (the live feed's events among them)
    from almanac.services.gateway.asyncapi import asyncapi_document  # noqa: PLC0415

    document = asyncapi_document()
    games = {component for component in document["components"]["schemas"]
             if component.startswith(tuple(prefix_of(name) for name in BUILT_IN))}
    met: set[str] = set()
    untyped: list[str] = []
    for message in document["components"]["messages"].values():
        # When each payload is walked to the games' components it reaches
        root = message["payload"]["$ref"][len(REF):]
        spots = untyped_words(document, root)
        met |= games & reached(document, [root])
        untyped += [spot for spot in spots if spot.split(".")[0].split("[")[0] in games]
    # Then the games' events are among them, and every string and map key of theirs is typed
    assert {"RealmEvent", "RealmTradeOfferedAsSeen", "BoardEvent", "ClaimEvent", "SectorsEvent"} <= met
    assert sorted(set(untyped)) == []


def test_the_walk_finds_a_free_string_and_free_map_keys() -> None:
    # The check of the check: realm's merchant view as it was (its terms and its load's keys any string)
    document = {"components": {"schemas": {"Loose": {"type": "object", "properties": {
        "buy": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "load": {"type": "object", "additionalProperties": {"type": "integer"}},
        "home": {"type": "string", FREE: True}}}}}}
    assert untyped_words(document, "Loose") == ["Loose.buy[0]: a free string", "Loose.load: free map keys"]


def prop(document: dict[str, Any], component: str, field: str) -> dict[str, Any]:
    schema = document["components"]["schemas"][component]["properties"][field]
    return next((member for member in schema.get("anyOf", []) if member.get("type") != "null"), schema)


def test_the_enums_are_the_rule_data_s_own_lists(openapi: dict[str, Any]) -> None:
    # Given the words the rule data of each game lists
    from almanac.games.board.v1 import data as board  # noqa: PLC0415
    from almanac.games.claim import data as claim  # noqa: PLC0415
    from almanac.games.realm.v1 import data as realm  # noqa: PLC0415
    from almanac.games.sectors import data as sectors  # noqa: PLC0415

    # When the document's views and states are read, Then they list exactly those, in the data's order
    assert prop(openapi, "RealmMerchantView", "load")["propertyNames"]["enum"] == list(realm.RESOURCES)
    assert prop(openapi, "RealmMerchantView", "buy")["enum"] == list(realm.RESOURCES)  # none named: null
    assert prop(openapi, "RealmMerchant", "buy")["enum"] == ["", *realm.RESOURCES]  # the state's fold keeps its ""
    assert prop(openapi, "RealmRealmView", "season")["enum"] == list(realm.SEASONS)
    assert prop(openapi, "RealmCityView", "tax_season")["enum"] == list(realm.SEASONS)
    assert prop(openapi, "RealmCityView", "stock")["propertyNames"]["enum"] == list(realm.RESOURCES)
    assert prop(openapi, "RealmArmyView", "equipment")["enum"] == list(realm.TIERS)
    assert prop(openapi, "RealmArmy", "equipment")["enum"] == list(realm.TIERS)
    assert prop(openapi, "BoardCurrentElement", "terrain")["enum"] == list(board.TERRAINS)
    assert prop(openapi, "ClaimParcelView", "species")["enum"] == list(claim.SPECIES)
    assert prop(openapi, "ClaimParcel", "building")["enum"] == list(claim.BUILDINGS)
    assert prop(openapi, "SectorsSector", "type")["enum"] == list(sectors.SECTOR_TYPE_NAMES)
    assert prop(openapi, "SectorsSectorsView", "stock")["propertyNames"]["enum"] == list(sectors.GOODS)
    # and what no list bounds says what it is
    assert prop(openapi, "RealmMerchantView", "home") == {FREE: True, "type": "string",
                                                          "description": "a city's name: its player's, or a village's"}


# The smallest whole game of each version (tests/whole_games.py's), board@2 with a turn limit of its own.
WHOLE_GAMES = {"board@1": {}, "board@2": {"turn_limit_s": 60}, "claim@1": {}, "sectors@1": {"years": 1},
               "realm@1": {"players": ["alice", "bob"], "years": 1}, "realm@2": {"players": ["alice", "bob"], "years": 1}}
HOUR_MS = 3_600_000
MOVES = 3_000  # far more than any of these games takes: a bot that stalls fails the test instead of hanging it


def whole_game(ref: str) -> Any:
    """A room of ``ref`` played by its bots to its end in memory, an hour passing between moves (a claim proves up
    after two days): yields the room after every command."""
    name, version = registry.parse(ref)
    manifest = registry.at(name, version)
    room = RoomDriver(f"whole-{ref}", now_ms=1_700_000_000_000)
    room.apply("alice", {"kind": "create_room", "ruleset": ref, "options": WHOLE_GAMES[ref]})
    seats = ["alice"]
    room.apply("alice", {"kind": "join_room"})
    if "bob" in WHOLE_GAMES[ref].get("players", ()):
        room.apply("bob", {"kind": "join_room"})
        seats.append("bob")
    yield room, seats
    for move in range(MOVES):
        if manifest.decider.is_over(room.game):
            return
        player = seats[move % len(seats)]
        command = manifest.policy(room.game, player, Dice(b"whole", room.room, move), room.now_ms)
        if command is not None:
            try:
                room.apply(player, command, leftover=True, now_ms=room.now_ms + HOUR_MS)
            except RuleError:
                continue
            yield room, seats
        else:
            room.now_ms += HOUR_MS
    raise AssertionError(f"{ref}: not over after {MOVES} moves")


@pytest.mark.parametrize("ref", list(WHOLE_GAMES))
def test_whole_games_views_and_states_fit_the_published_schemas(ref: str, openapi: dict[str, Any]) -> None:
    # Given a whole game of every installed version of every built-in rule-set, played by its bots to the end
    name, version = registry.parse(ref)
    parts = game_components()[0][name]["versions"][version]
    view, state = validator(openapi, parts["view"]), validator(openapi, parts["state"])
    manifest = registry.at(name, version)
    decider = manifest.decider
    answers = 0
    for room, seats in whole_game(ref):
        # When every seat's view, the public's (nobody's seat) and the state are read after every command, the
        # views as the API answers them
        for seat in [*seats, ""]:
            shown = as_json(manifest.shown_view(room.game, seat))
            # Then each fits the version's published view and state, enums and all, and a view says "nothing"
            # as null, never as ""
            assert [error.message for error in view.iter_errors(shown)] == [], (ref, seat, room.version)
            assert "" not in strings(shown), (ref, seat, room.version)
        assert [error.message for error in state.iter_errors(as_json(room.game))] == [], (ref, room.version)
        answers += 1
    assert decider.is_over(room.game) and answers > 5, (ref, answers)
    # and the schemas are not any string's: the last view and state with every string misspelt fit neither
    assert not view.is_valid(misspelt(as_json(manifest.shown_view(room.game, seats[0])))), ref
    assert not state.is_valid(misspelt(as_json(room.game))), ref


def strings(value: Any) -> set[str]:
    """Every string ``value`` holds, as a value or as a map's key."""
    if isinstance(value, dict):
        return set(value) | {found for inner in value.values() for found in strings(inner)}
    if isinstance(value, list):
        return {found for inner in value for found in strings(inner)}
    return {value} if isinstance(value, str) else set()


def misspelt(value: Any) -> Any:
    """``value`` with every string one the rules never wrote (a ``?`` after it); fields and keys as they are."""
    if isinstance(value, dict):
        return {key: misspelt(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [misspelt(inner) for inner in value]
    return f"{value}?" if isinstance(value, str) else value


def test_a_view_with_a_word_the_rules_do_not_know_fails_its_schema(openapi: dict[str, Any]) -> None:
    # The check of the check: a realm view read after a move, with a season the calendar does not have
    room, _ = next(iter(whole_game("realm@1")))
    parts = game_components()[0]["realm"]["versions"][1]
    shown = as_json(registry.at("realm", 1).shown_view(room.game, "alice"))
    assert not list(validator(openapi, parts["view"]).iter_errors(shown))
    wrong = copy.deepcopy(shown)
    wrong["season"] = "monsoon"
    wrong["cities"]["alice"]["stock"]["mithril"] = 1
    errors = sorted(error.message for error in validator(openapi, parts["view"]).iter_errors(wrong))
    assert len(errors) == 2 and all("monsoon" in e or "mithril" in e for e in errors), errors


@pytest.mark.parametrize("ref", ["board@1", "realm@1"])
def test_a_seat_bot_plays_the_same_from_the_view_as_shown_and_the_rules_own(ref: str) -> None:
    # Given a whole game of a rule-set whose API view shows its "" for nothing as null (an empty cell, no terms)
    name, version = registry.parse(ref)
    manifest = registry.at(name, version)
    compared = 0
    for room, seats in whole_game(ref):
        for seat in seats:
            # When its seat bot (client/seat_bot.py reads the API's view) and the server's bots (the rules' view)
            # choose with the same dice
            rules_view = as_json(manifest.decider.view(room.game, seat))
            shown = as_json(manifest.shown_view(room.game, seat))
            # Then they choose the same command (each with dice of its own: a draw is read once)
            chosen = [manifest.seat_bot(view, seat, Dice(b"same", room.room, room.version), room.now_ms)
                      for view in (shown, rules_view)]
            assert chosen[0] == chosen[1], ref
            compared += rules_view != shown
    assert compared > 5  # the views did differ (null where the rules' view says "")


@pytest.mark.parametrize("ref", list(WHOLE_GAMES))
def test_whole_games_recorded_events_fit_the_published_event_schemas(ref: str, openapi: dict[str, Any]) -> None:
    # Given a whole game of every installed version of every built-in rule-set, played by its bots to the end
    from almanac.events import codec  # noqa: PLC0415

    name, version = registry.parse(ref)
    manifest = registry.at(name, version)
    check = validator(openapi, game_components()[0][name]["versions"][version]["event"])
    read, kinds = 0, set()
    checked: set[str] = set()  # each distinct payload once: a seat is often shown the event whole
    for room, seats in whole_game(ref):
        # When every recorded event is read whole (an auditor's) and as each seat receives it
        for envelope in room.envelopes[read:]:
            event = codec.decode_event(envelope)
            kinds.add(envelope.type)
            shown = [as_json(event)] + [as_json(seen) for seat in seats
                                        if (seen := manifest.decider.redact(event, seat)) is not None]
            # Then each fits the version's published event, enums and all
            for payload in shown:
                if (key := json.dumps(payload, sort_keys=True)) in checked:
                    continue
                checked.add(key)
                assert [error.message for error in check.iter_errors(payload)] == [], (ref, envelope.type, payload)
        read = len(room.envelopes)
    assert len(kinds) > 4, (ref, kinds)
    # and the schema is not any string's: each string of an event (or of a list in it) the schema does not mark free,
    # misspelt alone, makes the event fit it no more (realm's faces and outcomes, board's terrain, claim's grade)
    for envelope in room.envelopes:
        payload = as_json(codec.decode_event(envelope))
        for field, value in payload.items():
            if field == "type" or not (isinstance(value, str) or value and isinstance(value, list)
                                       and all(isinstance(item, str) for item in value)):
                continue
            if marked_free(openapi, envelope.type, field):
                continue
            assert not check.is_valid({**payload, field: misspelt(value)}), (ref, envelope.type, field)


def marked_free(document: dict[str, Any], tag: str, field: str) -> bool:
    """Whether the event ``tag``'s ``field`` (a string, or a list of strings) is marked free in the document."""
    schemas = document["components"]["schemas"]
    for schema in schemas.values():
        properties = schema.get("properties", {})
        if tag in properties.get("type", {}).get("enum", ()) and field in properties:
            stack = [properties[field]]
            while stack:
                inner = stack.pop()
                if inner.get(FREE) is True:
                    return True
                if "$ref" in inner:
                    stack.append(schemas[inner["$ref"][len(REF):]])
                stack += inner.get("anyOf", []) + ([inner["items"]] if isinstance(inner.get("items"), dict) else [])
            return False
    raise AssertionError(f"no component for {tag}")


def test_an_event_with_a_word_the_rules_do_not_know_fails_its_schema(openapi: dict[str, Any]) -> None:
    # The check of the check: realm's events as the log writes them, with a face, an ore's outcome and a trade's
    # "" (none named) as the rules write them, and then with words the rules never wrote
    check = validator(openapi, game_components()[0]["realm"]["versions"][1]["event"])
    mined = {"type": "realm.mined", "city": "alice", "ore": "iron", "dice": ["star", "moon"], "moons": "count", "stars": 3, "saved_used": 0,
             "saved_gained": 0, "outcome": "found", "found": "iron", "amount": 1000}
    offered = {"type": "realm.trade_offered", "trade_id": "t1", "by": "alice", "buy": "iron", "pay": "", "dice": 2}
    seat = {"type": "room.seat_to_bot", "player": "alice", "reason": "left"}
    assert check.is_valid(mined) and check.is_valid(offered) and check.is_valid(seat)
    for wrong in ({**mined, "dice": ["star", "comet"]}, {**mined, "outcome": "lucky"}, {**mined, "found": "mithril"},
                  {**offered, "pay": "mithril"}, {**seat, "reason": "bored"}):
        assert not check.is_valid(wrong), wrong
    # and "" in a trade's pay says so in its description: none named
    pay = prop(openapi, "RealmTradeOffered", "pay")
    assert pay["enum"][0] == "" and "none" in pay["description"]
