"""The API contract and the console's routes, in process: OpenAPI, AsyncAPI, schemas, assets, CORS."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from fastapi.testclient import TestClient
from game_modules import game_module
from gateway_stack import gateway_settings

from almanac.events import registry
from almanac.events.forensics.tree_diff import change_rows
from almanac.services.gateway import create_app
from almanac.services.gateway.api_console import STATIC_DIR


def test_openapi_has_bearer_auth_the_error_shape_and_typed_commands(api: TestClient) -> None:
    document = api.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "a player token from create/join, or an auditor token"}
    schemas = document["components"]["schemas"]
    # (``receipt``: a recorded refusal by the rules, signed: docs/bundle-format.md section 8)
    assert set(schemas["Error"]["properties"]) == {"code", "message", "field", "allowed", "receipt"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation["responses"]["4XX"]["content"]["application/json"]["schema"]["$ref"] == \
                "#/components/schemas/Error", (method, path)
    for name in registry.installed():
        union = schemas[f"{name.capitalize()}Command"]
        assert union["discriminator"]["propertyName"] == "kind"
        kinds = {t.__struct_config__.tag for t in registry.get(name).command_types}
        assert set(union["discriminator"]["mapping"]) == kinds
        for ref in union["discriminator"]["mapping"].values():
            assert ref.rsplit("/", 1)[-1] in schemas
    assert "WebSocket" in document["info"]["description"]


def test_asyncapi_names_every_channel_with_payload_schemas(api: TestClient) -> None:
    document = api.get("/asyncapi").json()
    assert document["asyncapi"].startswith("3.")
    addresses = {c["address"] for c in document["channels"].values()}
    assert {"alm:{shard}:commands", "alm:{shard}:feed", "alm:outcome:{command_id}", "alm:{shard}:dead",
            "/rooms/{room}/live"} <= addresses
    schemas = document["components"]["schemas"]
    for message in document["components"]["messages"].values():
        assert message["payload"]["$ref"].rsplit("/", 1)[-1] in schemas
    assert "BoardCommand" in schemas and "CommandRecord" in schemas


def test_ruleset_schema_lists_every_command_and_refuses_unknown_rulesets(api: TestClient) -> None:
    schema = api.get("/rulesets/board/schema").json()
    assert [c["kind"] for c in schema["commands"]] == ["place_element", "skip_element"]
    place = schema["$defs"]["PlaceElement"]
    assert {"row", "column"} <= set(place["required"])
    missing = api.get("/rulesets/nope/schema")
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_ruleset"


def test_console_docs_and_redoc_are_served_from_the_package(api: TestClient) -> None:
    page = api.get("/")
    assert page.status_code == 200 and "/console/app.js" in page.text
    local = re.findall(r'(?:src|href)="(/console/[^"]+)"', page.text)
    for path in ("/docs", "/redoc"):
        html = api.get(path).text
        assert "cdn." not in html
        local += re.findall(r"['\"](/console/vendor/[^'\"]+)['\"]", html)
    assert len(local) >= 6
    for asset in local:
        assert api.get(asset).status_code == 200, asset
    # every file the vendor README names exists
    readme = (STATIC_DIR / "vendor" / "README.md").read_text()
    for folder in re.findall(r"^\| (\w[\w-]*)/ \|", readme, re.M):
        assert any((STATIC_DIR / "vendor" / folder).iterdir()), folder
    # The console names no rule-set: each game's picture is a module its manifest ships.
    console = Path(STATIC_DIR / "app.js").read_text()
    assert [name for name in registry.installed() if f'"{name}"' in console or f"{name}:" in console] == []


def test_each_built_in_game_ships_the_picture_module_the_console_draws_it_with(api: TestClient) -> None:
    for name in registry.installed():
        manifest = registry.manifest(name)
        served = api.get(f"/rulesets/{manifest.ref}/picture.js")
        assert served.status_code == 200 and served.headers["content-type"].startswith("text/javascript"), name
        assert "export default function" in served.text
    refused = api.get("/rulesets/nothing/picture.js")
    assert refused.status_code == 404 and refused.json()["code"] == "unknown_ruleset"


def test_players_get_only_their_own_view_at_a_version(api: TestClient, auditor: str) -> None:
    created = api.post("/rooms", json={"ruleset": "board", "player": "vera"}).json()
    room, token = created["room"], created["token"]
    mine = api.get(f"/rooms/{room}/at/1", headers={"Authorization": f"Bearer {token}"})
    assert mine.status_code == 200 and "view" in mine.json() and "state" not in mine.json()
    assert "deck" not in mine.json()["view"]
    other = api.get(f"/rooms/{room}/at/1", params={"player": "mallory"}, headers={"Authorization": f"Bearer {token}"})
    assert other.status_code == 403 and other.json()["code"] == "other_seat"
    assert api.get(f"/rooms/{room}/at/1").status_code == 401
    full = api.get(f"/rooms/{room}/at/1", headers={"Authorization": f"Bearer {auditor}"}).json()
    assert "deck" in full["state"] and "vera" in full["views"]
    series = api.get(f"/rooms/{room}/series", headers={"Authorization": f"Bearer {token}"}).json()
    assert series["scores"] == {"vera": [0] * len(series["versions"])} and series["resources"] == {}


def test_the_console_reads_what_changed_between_two_versions_from_the_one_tree_diff(api: TestClient, auditor: str) -> None:
    board_rules = game_module("board@1", "rules")
    BoardState = game_module("board@1", "state").BoardState  # noqa: N806

    # Given a board room where tess placed her first element: some cells filled, the deck's top card gone
    created = api.post("/rooms", json={"ruleset": "board", "player": "tess"}).json()
    room, player = created["room"], {"Authorization": f"Bearer {created['token']}"}
    auditor_headers = {"Authorization": f"Bearer {auditor}"}
    before = api.get(f"/rooms/{room}/state", headers=auditor_headers).json()
    state = msgspec.convert(before["state"]["game"], BoardState)
    move = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
    command = {"kind": "place_element", "row": move.row, "column": move.column, "rotation": move.rotation,
               "mirror": move.mirror}
    assert api.post(f"/rooms/{room}/commands", json={"command": command}, headers=player).status_code == 200
    latest = api.get(f"/rooms/{room}/at/1", headers=auditor_headers).json()["latest_version"]
    earlier = api.get(f"/rooms/{room}/at/{before['version']}", headers=auditor_headers).json()["state"]

    # When the auditor's console asks for the latest version with what changed since the one before the move
    answer = api.get(f"/rooms/{room}/at/{latest}", params={"since": before["version"]}, headers=auditor_headers).json()

    # Then each changed cell is its own row and the deck one row, the card that left (after: null): element by
    # element, the rows `almanac state --diff --json` prints, from the one tree-diff
    rows = answer["changes"]
    assert answer["since"] == before["version"] and rows == change_rows(earlier, answer["state"])
    cells = [row for row in rows if row["path"].startswith("board")]
    assert cells and all(re.fullmatch(r"board\[\d+\]\[\d+\]", row["path"]) for row in cells), cells
    [deck] = [row for row in rows if row["path"].startswith("deck")]
    assert deck["before"] is not None and deck["after"] is None
    # And a player's console gets the changes of their own view only (the deck is not in it)
    mine = api.get(f"/rooms/{room}/at/{latest}", params={"since": before["version"]}, headers=player).json()
    assert mine["changes"] and not [row for row in mine["changes"] if row["path"].startswith("deck")]
    too_late = api.get(f"/rooms/{room}/at/{latest}", params={"since": latest + 1}, headers=player)
    assert too_late.status_code == 422 and too_late.json()["field"] == "since"


def test_cors_is_off_by_default_and_on_when_configured(api: TestClient, stack) -> None:
    preflight = {"Origin": "https://game.example", "Access-Control-Request-Method": "POST"}
    assert "access-control-allow-origin" not in api.options("/rooms", headers=preflight).headers
    app = create_app(gateway_settings(stack, cors_origins="https://game.example"))
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.options("/rooms/x/commands", headers=preflight)
        assert answer.headers["access-control-allow-origin"] == "https://game.example"
        command = client.post("/rooms/x/commands", json={}, headers={"Origin": "https://game.example"})
        assert command.status_code == 401
        assert command.headers["access-control-allow-origin"] == "https://game.example"


def test_scores_series_is_public_and_a_token_of_another_room_is_still_refused(api: TestClient) -> None:
    first = api.post("/rooms", json={"ruleset": "board", "player": "pia"}).json()
    other = api.post("/rooms", json={"ruleset": "board", "player": "olaf"}).json()
    public = api.get(f"/rooms/{first['room']}/series")
    assert public.status_code == 200
    assert public.json()["scores"] == {"pia": [0] * len(public.json()["versions"])} and public.json()["resources"] == {}
    foreign = api.get(f"/rooms/{first['room']}/series", headers={"Authorization": f"Bearer {other['token']}"})
    assert foreign.status_code == 403 and foreign.json()["code"] == "wrong_room"


def test_every_route_declares_a_typed_success_answer(api: TestClient) -> None:
    document = api.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            success = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
            assert success, (method, path)
            for status, response in success.items():
                [(media, content)] = response["content"].items()
                schema = content["schema"]
                if media == "text/plain":
                    continue
                assert media == "application/json" and "$ref" in schema, (method, path, status)
                declared = schemas[schema["$ref"].rsplit("/", 1)[-1]]
                # an answer whose part depends on its rule-set (or read model) is a union told apart by that field
                members = [schemas[m["$ref"].rsplit("/", 1)[-1]] for m in declared["oneOf"]] \
                    if "oneOf" in declared and "discriminator" in declared else [declared]
                for member in members:
                    assert member["type"] == "object" and member["properties"], (method, path, status)


def test_real_answers_convert_into_their_declared_types(api: TestClient, auditor: str) -> None:
    import msgspec

    board_rules = game_module("board@1", "rules")
    BoardState = game_module("board@1", "state").BoardState
    from almanac.services.gateway.responses import RESPONSES

    def check(method: str, route: str, answer) -> None:
        status, body = RESPONSES[(method, route)]
        assert answer.status_code == status, (route, answer.text)
        # Unknown fields are refused: the declaration names everything the route answers.
        strict = msgspec.defstruct(body.__name__, [], bases=(body,), forbid_unknown_fields=True, kw_only=True)
        msgspec.convert(answer.json(), strict, strict=False)

    auditor_headers = {"Authorization": f"Bearer {auditor}"}
    created = api.post("/rooms", json={"ruleset": "board", "player": "tess"})
    check("post", "/rooms", created)
    room, headers = created.json()["room"], {"Authorization": f"Bearer {created.json()['token']}"}
    state = msgspec.convert(api.get(f"/rooms/{room}/state", headers=auditor_headers).json()["state"]["game"],
                            BoardState)
    move = board_rules.legal_placements(state.board, board_rules.current_element(state))[0]
    command = {"kind": "place_element", "row": move.row, "column": move.column, "rotation": move.rotation,
               "mirror": move.mirror}
    played = api.post(f"/rooms/{room}/commands", json={"command": command, "command_id": "typed-1"}, headers=headers)
    check("post", "/rooms/{room}/commands", played)
    check("get", "/rooms/{room}/commands/{command_id}", api.get(f"/rooms/{room}/commands/typed-1", headers=headers))
    gets = [
        ("/rooms", "/rooms", {}), ("/rulesets", "/rulesets", {}), ("/rooms/{room}", f"/rooms/{room}", {}),
        ("/rooms/{room}/view", f"/rooms/{room}/view", headers),
        ("/rooms/{room}/scores", f"/rooms/{room}/scores", {}),
        ("/rooms/{room}/resources", f"/rooms/{room}/resources", auditor_headers),
        ("/rooms/{room}/events", f"/rooms/{room}/events", headers),
        ("/rooms/{room}/events", f"/rooms/{room}/events", auditor_headers),
        ("/rooms/{room}/state", f"/rooms/{room}/state", auditor_headers),
        ("/rooms/{room}/rejections", f"/rooms/{room}/rejections", auditor_headers),
        ("/rooms/{room}/verification", f"/rooms/{room}/verification", auditor_headers),
        ("/leaderboards/{ruleset}", "/leaderboards/board", {}),
        ("/read-models/{model}", f"/read-models/{sorted(registry.read_models())[0]}", auditor_headers),
        ("/health", "/health", {}), ("/asyncapi", "/asyncapi", {}),
        ("/rulesets/{name}/schema", "/rulesets/board/schema", {}),
        ("/status", "/status", {}), ("/status/rooms", "/status/rooms", {}),
        ("/rooms/{room}/at/{version}", f"/rooms/{room}/at/2", headers),
        ("/rooms/{room}/at/{version}", f"/rooms/{room}/at/2", auditor_headers),
        ("/rooms/{room}/at/{version}", f"/rooms/{room}/at/3?since=1", headers),
        ("/rooms/{room}/at/{version}", f"/rooms/{room}/at/3?since=1", auditor_headers),
        ("/rooms/{room}/series", f"/rooms/{room}/series", auditor_headers),
    ]
    for route, url, sent in gets:
        check("get", route, api.get(url, headers=sent))
    joined = api.post("/rooms", json={"ruleset": "realm", "player": "uma", "join": False}).json()
    check("post", "/rooms/{room}/join", api.post(f"/rooms/{joined['room']}/join", json={"player": "alice"}))
    check("post", "/rooms/{room}/end", api.post(f"/rooms/{room}/end", json={"reason": "typed"}, headers=headers))


def test_the_vendored_files_are_exactly_the_ones_recorded_in_SHA256SUMS() -> None:
    import hashlib

    vendor = STATIC_DIR / "vendor"
    recorded = {}
    for line in (vendor / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        recorded[name] = digest
    present = {str(p.relative_to(vendor)) for p in vendor.rglob("*")
               if p.is_file() and p.name not in ("README.md", "SHA256SUMS")}
    assert present == set(recorded), f"unlisted: {present - set(recorded)}; missing: {set(recorded) - present}"
    for name, digest in recorded.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, f"{name} changed since vendoring"
    # Every file the README's table names (by its file name) is one of them.
    readme = (vendor / "README.md").read_text()
    table = re.findall(r"^\| (\w[\w-]*)/ \| [^|]+ \| [^|]+ \| ([^|]+) \|", readme, re.M)
    assert len(table) == 5, table
    for folder, files in table:
        for file in re.split(r",\s*", files.strip()):
            assert f"{folder}/{file.rsplit('/', 1)[-1]}" in recorded, (folder, file)


def test_the_document_marks_the_token_required_exactly_where_a_call_without_one_is_refused(api: TestClient) -> None:
    # Given a room, and a value for every path and query parameter the document names
    room = api.post("/rooms", json={"ruleset": "board", "player": "nadia"}).json()["room"]
    public_model = next(name for name, (_, model) in registry.read_models().items() if not model.auditors_only)
    values = {"room": room, "version": 1, "command_id": "c-1", "view": "trade", "item": "t-1", "ruleset": "board",
              "name": "board", "model": public_model, "subscription": "wh_0000000000000000"}
    by_type = {"string": "time", "integer": 1, "boolean": "false", "number": 1}
    document = api.get("/openapi.json").json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            parameters = operation.get("parameters", [])
            url = path.format(**{p["name"]: values[p["name"]] for p in parameters if p["in"] == "path"})
            query = {p["name"]: by_type[p["schema"].get("type", "string")] for p in parameters
                     if p["in"] == "query" and p.get("required")}
            # When it is called without a token
            answer = api.request(method, url, params=query, json={} if "requestBody" in operation else None)
            # Then the document says the token is required exactly when the call was refused for the lack of one
            security = operation["security"]
            assert {"bearer": []} in security, (method, path)
            required = {} not in security
            assert required == (answer.status_code == 401), (method, path, security, answer.status_code, answer.text)


def test_an_outsider_is_told_401_before_anything_is_checked_on_every_operation_that_requires_a_token(
        api: TestClient) -> None:
    # Given every operation the document says requires the bearer token
    document = api.get("/openapi.json").json()
    guarded = [(method, path, operation) for path, item in document["paths"].items()
               for method, operation in item.items() if {} not in operation["security"]]
    assert len(guarded) > 10
    refused = []
    for method, path, operation in guarded:
        parameters = operation.get("parameters", [])
        junk = {p["name"]: "junk" for p in parameters if p["in"] == "query"}
        for value in ("not a valid id!", "nothing-here"):  # a malformed id, and a well-formed one of nothing
            url = path.format(**{p["name"]: value for p in parameters if p["in"] == "path"})
            for query, body in (({}, None), (junk, {"junk": 1})):
                # When an outsider calls it with no token, its parameters missing or junk, its body missing or junk
                answer = api.request(method, url, params=query, json=body)
                # Then the answer is 401 (who are you) before any 422 (what did you send) or 404 (is it there)
                if answer.status_code != 401:
                    refused.append((method, url, query, answer.status_code))
    assert refused == [], "\n".join(map(str, refused))
