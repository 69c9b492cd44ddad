"""Every landed rule-set played over HTTP by several players against a real engine and projector.

Checks: refusals carry their codes; views, scores and leaderboards match a fold of the stored log; hidden
information never reaches another player's view, event stream or live feed; a live client that reconnects
from its last version misses nothing and sees nothing twice.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import msgspec
import pytest
import redis
from fastapi.testclient import TestClient
from game_modules import game_module
from gateway_stack import landed_rulesets
from waiting import wait_until

from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.events.room import RoomState
from almanac.events.step import advance
from almanac.storage.keys import Keys

MOVES_PER_ROOM = 10


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def projected_version(redis_url: str, room: str) -> int:
    """The room version the read models have applied (projections' versions hash), read from Redis directly."""
    client = redis.Redis.from_url(redis_url)
    try:
        keys = Keys(16)
        return int(client.hget(keys.versions(keys.shard(room)), room) or 0)
    finally:
        client.close()


def fold_log(redis_url: str, room: str) -> tuple[RoomState, list]:
    """The room folded from its stored stream, independently of the gateway."""
    client = redis.Redis.from_url(redis_url)
    try:
        entries = client.xrange(Keys(16).events(room), "-", "+")
    finally:
        client.close()
    state = None
    envelopes = []
    for entry_id, fields in entries:
        envelope = codec.decode_envelope(fields[b"e"], room, int(entry_id.split(b"-")[0]))
        envelopes.append(envelope)
        state = advance(state, envelope)
    assert state is not None
    return state, envelopes


def as_json(value: Any) -> Any:
    return json.loads(codec.to_json(value))


class Table:
    """Players and their rooms for one rule-set: a shared room, or one room each from the same challenge."""

    def __init__(self, api: TestClient, auditor: str, ruleset: str) -> None:
        self.api, self.auditor, self.ruleset = api, auditor, ruleset
        suffix = secrets.token_hex(3)
        self.players = [f"alice-{suffix}", f"bob-{suffix}"]
        self.challenge = f"test-{suffix}"
        self.tokens: dict[tuple[str, str], str] = {}  # (room, player) -> token
        self.refusals: list[str] = []
        decider = registry.get(ruleset)
        options = {"players": self.players} if "players" in decider.options_type.__struct_fields__ else {}
        first = self.create(self.players[0], options)
        self.rooms = [first]
        joined = api.post(f"/rooms/{first}/join", json={"player": self.players[1]})
        if joined.status_code == 200:
            self.tokens[(first, self.players[1])] = joined.json()["token"]
        else:
            assert joined.status_code == 422, joined.text
            self.refusals.append(joined.json()["code"])
            self.rooms.append(self.create(self.players[1], options))

    def create(self, player: str, options: dict) -> str:
        answer = self.api.post("/rooms", json={"ruleset": self.ruleset, "player": player, "options": options,
                                               "challenge": self.challenge})
        assert answer.status_code == 201 and answer.json()["joined"], answer.text
        room = answer.json()["room"]
        self.tokens[(room, player)] = answer.json()["token"]
        return room

    def seated(self, room: str) -> list[tuple[str, str]]:
        return [(p, t) for (r, p), t in self.tokens.items() if r == room]

    def play(self) -> None:
        manifest = registry.manifest(self.ruleset)
        decider, policy = manifest.decider, manifest.policy
        for room in self.rooms:
            for step in range(MOVES_PER_ROOM):
                for player, token in self.seated(room):
                    state = self.api.get(f"/rooms/{room}/state", headers=auth(self.auditor)).json()["state"]
                    game = msgspec.convert(state["game"], decider.state_type, strict=False)
                    command = policy(game, player, Dice(b"t", room, step), int(time.time() * 1000))
                    if command is None:
                        continue
                    answer = self.api.post(f"/rooms/{room}/commands", headers=auth(token),
                                           json={"command": codec.encode_command(command)})
                    assert answer.status_code in (200, 422), answer.text
                    if answer.status_code == 200:
                        assert answer.json()["version"] >= answer.json()["first_version"] >= 1
                    else:
                        self.refusals.append(answer.json()["code"])


@pytest.fixture(scope="module")
def tables(api: TestClient, auditor: str) -> dict[str, Table]:
    played = {}
    for ruleset in landed_rulesets():
        table = Table(api, auditor, ruleset)
        # Refusals through the engine, with their codes: joining twice, and an unknown command.
        room = table.rooms[0]
        player, token = table.seated(room)[0]
        again = api.post(f"/rooms/{room}/join", json={"player": player})
        assert again.status_code == 422 and again.json()["code"] == "already_joined", again.text
        unknown = api.post(f"/rooms/{room}/commands", headers=auth(token), json={"command": {"kind": "fly"}})
        assert unknown.status_code == 422 and unknown.json()["code"] == "unknown_command"
        table.play()
        played[ruleset] = table
    return played


@pytest.mark.parametrize("ruleset", landed_rulesets())
def test_game_over_http_matches_the_fold_of_the_log(api: TestClient, stack, tables: dict[str, Table],
                                                    ruleset: str) -> None:
    table = tables[ruleset]
    decider = registry.get(ruleset)
    if len(decider.seats(fold_log(stack.redis_url, table.rooms[0])[0].game)) == 1:
        assert "no_seat" in table.refusals  # the second player cannot sit at a one-seat table
    for room in table.rooms:
        state, envelopes = fold_log(stack.redis_url, room)
        assert state.version == len(envelopes) > 2 + MOVES_PER_ROOM // 2  # created, joined, and moves
        for player, token in table.seated(room):
            view = api.get(f"/rooms/{room}/view", headers=auth(token)).json()
            assert view["version"] == state.version and view["player"] == player
            # the rules' view as the API shows it (its "" for nothing as null: RuleSet.present_view)
            assert view["view"] == as_json(registry.manifest(ruleset).shown_view(state.game, player))
        report = api.get(f"/rooms/{room}/verification", headers=auth(table.seated(room)[0][1])).json()
        assert report["ok"] is True and report["room"] == room, report
        scores = api.get(f"/rooms/{room}/scores").json()
        assert scores["scores"] == as_json(decider.public_scores(state.game))
        assert api.get(f"/rooms/{room}", headers={}).json()["players"] == list(state.players)
    # The table's rooms are challenge rooms: a public seed makes every roll predictable, so they never rank
    # (docs/dice.md). Once the projector has applied every room's last version, none of their players is ranked.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(
            projected_version(stack.redis_url, room) < fold_log(stack.redis_url, room)[0].version
            for room in table.rooms):
        time.sleep(0.2)
    assert all(projected_version(stack.redis_url, room) > 0 for room in table.rooms)
    board = api.get(f"/leaderboards/{ruleset}", params={"limit": 1000}).json()["leaderboard"]
    assert [entry for entry in board if entry["player"] in table.players] == []


HIDDEN_MARKER = {"hidden": True}


def hidden_keys_are_empty(payload: Any, keys: set[str]) -> bool:
    """True when every occurrence of one of ``keys`` in a JSON payload is empty or the hidden marker."""
    if isinstance(payload, dict):
        return all((value in (HIDDEN_MARKER, [], None) if key in keys else True)
                   and hidden_keys_are_empty(value, keys)
                   for key, value in payload.items())
    if isinstance(payload, list):
        return all(hidden_keys_are_empty(item, keys) for item in payload)
    return True


def live_feed(api: TestClient, room: str, token: str, from_version: int, count: int) -> list[dict]:
    with api.websocket_connect(f"/rooms/{room}/live?from_version={from_version}&token={token}") as socket:
        return [socket.receive_json() for _ in range(count)]


def test_board_deck_order_never_reaches_the_player(api: TestClient, stack, auditor: str,
                                                   tables: dict[str, Table]) -> None:
    table = tables["board"]
    room = table.rooms[0]
    player, token = table.seated(room)[0]
    state, envelopes = fold_log(stack.redis_url, room)
    deck = list(state.game.deck)
    assert len(deck) > 3
    payloads = [
        api.get(f"/rooms/{room}/view", headers=auth(token)).json(),
        api.get(f"/rooms/{room}/events", headers=auth(token)).json(),
        live_feed(api, room, token, 1, len(envelopes)),
    ]
    for payload in payloads:
        assert hidden_keys_are_empty(payload, {"deck", "order"}), payload
        text = json.dumps(payload, separators=(",", ":"))
        assert json.dumps(deck, separators=(",", ":")) not in text
        assert json.dumps(deck[1:], separators=(",", ":")) not in text
    # The auditor does see it: the secret exists and is only withheld.
    audited = api.get(f"/rooms/{room}/state", headers=auth(auditor)).json()["state"]["game"]["deck"]
    assert audited == deck


def test_realm_city_secrets_stay_with_their_city(api: TestClient, stack, tables: dict[str, Table]) -> None:
    from almanac.events.disclosure import hidden_fields  # noqa: PLC0415
    SECRETS = game_module("realm@1", "hidden").SECRETS

    table = tables["realm"]
    room = table.rooms[0]
    (alice, alice_token), (bob, bob_token) = table.seated(room)
    state, envelopes = fold_log(stack.redis_url, room)
    alice_view = api.get(f"/rooms/{room}/view", headers=auth(alice_token)).json()["view"]
    bob_view = api.get(f"/rooms/{room}/view", headers=auth(bob_token)).json()["view"]
    assert "stock" in alice_view["cities"][alice] and "stock" not in bob_view["cities"][alice]
    assert "stock" in bob_view["cities"][bob] and "stock" not in alice_view["cities"][bob]
    streams = {
        "events": api.get(f"/rooms/{room}/events", headers=auth(bob_token)).json()["events"],
        "live": live_feed(api, room, bob_token, 1, len(envelopes)),
    }
    checked = 0
    for name, seen in streams.items():
        assert [e["version"] for e in seen] == [e.version for e in envelopes], name
        for shown, envelope in zip(seen, envelopes, strict=True):
            real = codec.decode_event(envelope)
            for field in hidden_fields(SECRETS, real, bob):
                assert shown["event"][field] == HIDDEN_MARKER, (name, envelope.type, field)
                checked += 1
    assert checked, "alice's game produced no secret-bearing event; play longer"


def test_live_reconnect_from_last_version_misses_nothing_and_repeats_nothing(api: TestClient, auditor: str) -> None:
    created = api.post("/rooms", json={"ruleset": "board", "player": "carol", "challenge": "live-test"})
    room, token = created.json()["room"], created.json()["token"]
    choose_command = game_module("board@1", "policy").choose_command

    def move(step: int) -> None:
        state = api.get(f"/rooms/{room}/state", headers=auth(auditor)).json()["state"]
        game = msgspec.convert(state["game"], registry.get("board").state_type, strict=False)
        command = choose_command(game, "carol", Dice(b"live", room, step))
        assert api.post(f"/rooms/{room}/commands", headers=auth(token),
                        json={"command": codec.encode_command(command)}).status_code == 200

    for step in range(3):
        move(step)
    seen: list[dict] = []
    with api.websocket_connect(f"/rooms/{room}/live?from_version=1", headers=auth(token)) as socket:
        latest = api.get(f"/rooms/{room}").json()["version"]
        seen += [socket.receive_json() for _ in range(latest)]
        move(3)  # arrives live, after the history
        seen.append(socket.receive_json())
    for step in range(4, 7):  # happen while the client is away
        move(step)
    latest = api.get(f"/rooms/{room}").json()["version"]
    resume = seen[-1]["version"] + 1
    with api.websocket_connect(f"/rooms/{room}/live?from_version={resume}&token={token}") as socket:
        seen += [socket.receive_json() for _ in range(latest - resume + 1)]
    versions = [message["version"] for message in seen]
    assert versions == list(range(1, latest + 1))
    events = api.get(f"/rooms/{room}/events", headers=auth(token)).json()["events"]
    # the live feed and the event stream tell the same story (each feed message also carries its signed checkpoint)
    assert all(m.pop("checkpoint")["version"] == m["version"] for m in seen)
    assert seen == events


def test_live_refuses_bad_tokens(api: TestClient) -> None:
    from starlette.websockets import WebSocketDisconnect  # noqa: PLC0415

    with api.websocket_connect("/rooms/anything/live?token=forged.token") as socket:
        assert socket.receive_json()["code"] == "token_invalid"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_json()
    assert closed.value.code == 4401


def test_claim_registry_lists_each_owner_claim(api: TestClient, tables: dict[str, Table]) -> None:
    table = tables["claim"]
    for player in table.players:
        claims = wait_until(lambda p=player: api.get("/read-models/claims", params={"owner": p}).json()["rows"], bool)
        assert [c["owner"] for c in claims] == [player] and claims[0]["room"] in table.rooms


def test_realm_trades_in_the_ledger_and_told_to_auditors(api: TestClient, stack, auditor: str) -> None:
    # Given a realm room where alice's merchant trades with bob over HTTP, step by step as the seed says
    suffix = secrets.token_hex(3)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {"players": [alice, bob]}})
    assert created.status_code == 201, created.text
    room, alice_token = created.json()["room"], created.json()["token"]
    bob_token = api.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]

    def play(token: str, command: dict) -> dict:
        answer = api.post(f"/rooms/{room}/commands", headers=auth(token), json={"command": command})
        assert answer.status_code == 200, answer.text
        return answer.json()

    sent = play(alice_token, {"kind": "send_merchant", "to": bob, "load": {"food": 6000, "gold": 2000}})
    trade = f"trade-{sent['first_version']}"
    play(alice_token, {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1})
    play(bob_token, {"kind": "counter_offer", "trade_id": trade, "want": "gold"})
    play(alice_token, {"kind": "agree_trade", "trade_id": trade})
    play(bob_token, {"kind": "agree_trade", "trade_id": trade})
    play(alice_token, {"kind": "decline_trade", "trade_id": trade})
    _, envelopes = fold_log(stack.redis_url, room)
    trade_ids = sorted({getattr(codec.decode_event(e), "trade_id", None) for e in envelopes} - {None})
    assert trade_ids == [trade]

    # Then the auditors' ledger and story tell it, and players may read neither
    ledger = wait_until(lambda: api.get("/read-models/trades", params={"room": room}, headers=auth(auditor)).json()["rows"],
                        lambda rows: {r["trade"] for r in rows} >= set(trade_ids))
    # The ledger holds both cities' holdings after each step: not for players.
    player_token = alice_token
    assert api.get("/read-models/trades", params={"room": room}, headers=auth(player_token)).status_code == 403
    assert {r["trade"] for r in ledger} >= set(trade_ids)
    story = api.get(f"/rooms/{room}/audit/trade/{trade_ids[0]}", headers=auth(auditor))
    assert story.status_code == 200, story.text
    steps = story.json()["story"]
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1)) and steps[0]["text"]
    assert api.get(f"/rooms/{room}/audit/trade/{trade_ids[0]}", headers=auth(player_token)).status_code == 403
    assert api.get(f"/rooms/{room}/audit/trade/no-such-trade", headers=auth(auditor)).json()["code"] == \
        "trade_not_found"
    # An unknown view, or a filter the model does not offer, is refused and names what is allowed
    unknown = api.get(f"/rooms/{room}/audit/harvest/x", headers=auth(auditor))
    assert unknown.status_code == 404 and unknown.json()["allowed"] == ["trade"]
    bad = api.get("/read-models/trades", params={"room": room, "owner": "x"}, headers=auth(auditor))
    assert bad.status_code == 422 and bad.json()["code"] == "unknown_filter" and bad.json()["allowed"] == ["room", "trade"]
    assert api.get("/read-models/nothing").json()["code"] == "unknown_read_model"
    one = api.get("/read-models/trades", params={"trade": trade}, headers=auth(auditor)).json()["rows"]
    assert one and {r["trade"] for r in one} == {trade}


def test_a_rivals_public_scores_and_feed_reveal_no_finds(api: TestClient, auditor: str) -> None:
    """Given a realm room of three, when alice cuts wood and finds herbs (hidden finds), then the scores
    anyone reads at /rooms/{room}/scores do not move while her full score (auditors) does, and carol's
    /events and live feed carry the finds as {"hidden": true}."""
    suffix = secrets.token_hex(3)
    alice, bob, carol = (f"{name}-{suffix}" for name in ("alice", "bob", "carol"))
    # A fixed public challenge: the same dice every run (alice cuts 1,000 wood, then finds herbs).
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "challenge": "hidden-finds",
                                       "options": {"players": [alice, bob, carol]}})
    assert created.status_code == 201, created.text
    room, alice_token = created.json()["room"], created.json()["token"]
    api.post(f"/rooms/{room}/join", json={"player": bob})
    carol_token = api.post(f"/rooms/{room}/join", json={"player": carol}).json()["token"]
    public_before = api.get(f"/rooms/{room}/scores").json()["scores"]
    full_before = api.get(f"/rooms/{room}/resources", headers=auth(auditor)).json()["scores"]
    for kind in ("cut_wood", "find_herbs"):
        answer = api.post(f"/rooms/{room}/commands", headers=auth(alice_token), json={"command": {"kind": kind}})
        assert answer.status_code == 200, answer.text
        found = answer.json()["events"][0]["event"]["amount"]
        public = api.get(f"/rooms/{room}/scores").json()["scores"]
        assert public == public_before, (kind, found)
        assert found > 0
    assert api.get(f"/rooms/{room}/resources", headers=auth(auditor)).json()["scores"][alice] >= full_before[alice]
    latest = api.get(f"/rooms/{room}/events", headers=auth(carol_token)).json()["events"]
    feed = live_feed(api, room, carol_token, 1, len(latest))
    for shown in (latest[-2:], feed[-2:]):
        assert [e["event"]["amount"] for e in shown] == [HIDDEN_MARKER, HIDDEN_MARKER]
        assert [e["event"]["dice"] for e in shown] == [HIDDEN_MARKER, HIDDEN_MARKER]
