"""Every HTTP query (and the console's reads) answers the same for an archived room as for it live: given an
ended realm room played through the real engine and projector (a trade in it, so the audit views have an item),
when the archiver moves it out of Redis, then every read of it answers as before, a command is refused 4xx, and the
leaderboard still counts it.

Nothing here lists routes: the reads are the gateway's own /openapi.json, by construction: every GET operation
that names a room (a ``room`` parameter, in its path or its query), each filled and varied as the hidden-routes
property fills it (tests/gateway/test_hidden_routes.py: ``calls`` and ``fillers``; a parameter nothing fills fails
the test with the operation's name), and every other GET operation whose live answer names the room (the room
listings: /rooms, /status/rooms, the leaderboards), compared on this room's rows. A paged listing (an answer with a
``next_cursor``) is read to its last page: archived, the room moves from Redis' rows to the archived tier, a later
page of the same listing (docs/archive.md), and its row must be the same there. Each is asked by the public, a
player and an auditor."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import redis
from fastapi.testclient import TestClient
from gateway_stack import gateway_settings, seated_realm
from hidden_games import Receipt
from test_gateway_forensics import auth, realm_room
from test_hidden_routes import calls, fillers
from waiting import wait_until

from almanac.services import bootstrap
from almanac.storage import archive_index
from almanac.storage.archive import archive_room

# What may differ between a room's answer live and archived, and why; nothing else may.
DIFFERS = {
    "exported_at_ms": "when a bundle was made: the clock at the ask, not the room",
    "exported_at": "the same, as a date",
}


def traded_room(api: TestClient) -> tuple[str, str, str, dict[str, str], list[str]]:
    """A realm room of alice-X and bob-X: bob mines, alice's merchant trades with bob, she ends the room. Every
    command with its own id: (room, alice, bob, tokens, command ids)."""
    room, alice, bob, tokens = seated_realm(api)
    sent: list[str] = []

    def play(player: str, command: dict) -> dict:
        command_id = f"c-{len(sent) + 1}"
        answer = api.post(f"/rooms/{room}/commands", headers=auth(tokens[player]),
                          json={"command": command, "command_id": command_id})
        assert answer.status_code == 200, answer.text
        sent.append(command_id)
        return answer.json()

    play(bob, {"kind": "mine", "ore": "gold"})  # (the merchant takes alice's whole turn)
    merchant = play(alice, {"kind": "send_merchant", "to": bob, "load": {"food": 6000, "gold": 2000}})
    trade = f"trade-{merchant['first_version']}"
    play(alice, {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1})
    play(bob, {"kind": "counter_offer", "trade_id": trade, "want": "gold"})
    play(alice, {"kind": "agree_trade", "trade_id": trade})
    play(bob, {"kind": "agree_trade", "trade_id": trade})
    assert api.post(f"/rooms/{room}/end", headers=auth(tokens[alice]), json={}).status_code == 200
    return room, alice, bob, tokens, sent


def claim_room(api: TestClient) -> tuple[str, str, dict[str, str], list[str]]:
    """A claim room of alice-X (its registry row in claim's ``claims`` read model), ended: (room, alice, tokens,
    command ids)."""
    alice = f"alice-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "claim", "player": alice, "options": {"block": "North Forty"}})
    assert created.status_code == 201, created.text
    room, token = created.json()["room"], created.json()["token"]
    cruised = api.post(f"/rooms/{room}/commands", headers=auth(token), json={"command": {"kind": "cruise"},
                                                                           "command_id": "c-1"})
    assert cruised.status_code == 200, cruised.text
    assert api.post(f"/rooms/{room}/end", headers=auth(token), json={}).status_code == 200
    return room, alice, {alice: token}, ["c-1"]


def room_fill(stack, room: str, alice: str, bob: str, sent: list[str], ruleset: str = "realm") -> dict[str, list[str]]:
    """Values for every parameter of the document's operations: the hidden-routes property's, from this room's
    stored events (versions, the audit views' ids...), with this room's players, command ids and paths."""
    async def stored() -> list:
        runtime = bootstrap.runtime(gateway_settings(stack), bootstrap.Role.TOOL)
        try:
            return await runtime.store.read(room)
        finally:
            await runtime.aclose()

    envelopes = asyncio.run(stored())
    fill = fillers(room, ruleset, [Receipt(envelopes=envelopes, refused=False, seen={})], 0)
    return fill | {
        "player": [alice, bob], "command_id": [*sent, "c-never"],
        "path": ["scores", f"scores.{bob}", f"actions_used.{alice}"],
        "where": ["room.ended == true", f"actions_used.{bob} >= 1", f"scores.{bob} >= 1"],
    }


def comparable(body: bytes, room: str) -> Any:
    """An answer as compared: its JSON without the fields that may differ (``DIFFERS``), and in every list of
    rows naming rooms only this room's rows (other tests' rooms come and go meanwhile); other bodies as bytes."""
    try:
        value = json.loads(body)
    except ValueError:
        return body

    def strip(item: Any) -> Any:
        if isinstance(item, dict):
            return {key: strip(value) for key, value in item.items() if key not in DIFFERS}
        if isinstance(item, list):
            return [strip(row) for row in item
                    if not (isinstance(row, dict) and isinstance(row.get("room"), str) and row["room"] != room)]
        return item

    return strip(value)


def room_operations(document: dict) -> dict[str, dict]:
    """The document's GET operations that name a room (a ``room`` parameter, in the path or the query), as
    ``calls`` takes them."""
    return {path: {"get": operations["get"]} for path, operations in document["paths"].items()
            if "get" in operations and any(p["name"] == "room" for p in operations["get"].get("parameters", []))}


def reads(api: TestClient, room: str, fill: dict[str, list[str]], viewers: dict[str, str | None],
          listings: set[tuple[str, str]] | None = None) -> dict[tuple[str, str, str], tuple[int, str, Any]]:
    """(operation, URL, viewer) -> (status, content type, answer as compared) of every read of the room (the
    module's docstring says which). ``listings``: the (URL, viewer) of the operations naming no room to ask; None:
    every one, kept where the answer names the room (the live reads choose them; the archived ask the same)."""
    document = api.app.openapi()
    about = room_operations(document)
    gets = {path: {"get": operations["get"]} for path, operations in document["paths"].items() if "get" in operations}
    answers = {}
    for name, _, url, _ in calls({"paths": gets}, fill):
        of_the_room = name.split(" ", 1)[1] in about
        for viewer, token in viewers.items():
            if not of_the_room and listings is not None and (url, viewer) not in listings:
                continue
            answer = api.get(url, headers=auth(token) if token else {})
            content = answer.content if of_the_room else every_page(api, url, token, answer)
            if not of_the_room and listings is None and room.encode() not in content:
                continue
            answers[(name, url, viewer)] = (answer.status_code, answer.headers.get("content-type", ""),
                                            comparable(content, room))
    return answers


def every_page(api: TestClient, url: str, token: str | None, answer: Any) -> bytes:
    """A listing's answer with the rows of every page after it (its ``next_cursor`` followed to the last), as one
    answer of the listing from that page on; any other answer as it came."""
    body = answer.json() if answer.status_code == 200 and "json" in answer.headers.get("content-type", "") else None
    if not isinstance(body, dict) or "next_cursor" not in body:
        return answer.content
    rooms, cursor = list(body["rooms"]), body["next_cursor"]
    while cursor is not None:
        page = api.get(url, params={"cursor": cursor}, headers=auth(token) if token else {}).json()
        rooms, cursor = rooms + page["rooms"], page["next_cursor"]
    return json.dumps({**body, "rooms": rooms, "next_cursor": None}).encode()


def listed(api: TestClient, answers: dict[tuple[str, str, str], Any]) -> set[tuple[str, str]]:
    """The (URL, viewer) of the reads of operations naming no room (the listings found naming it)."""
    about = {f"GET {path}" for path in room_operations(api.app.openapi())}
    return {(url, viewer) for name, url, viewer in answers if name not in about}


def same_live_and_archived(api: TestClient, stack, room: str, fill: dict[str, list[str]],
                           viewers: dict[str, str | None], asked: TestClient | None = None,
                           listings: tuple[str, ...] = ("GET /rooms", "GET /status/rooms",
                                                        "GET /leaderboards/{ruleset}"),
                           unanswered: frozenset[str] = frozenset()) -> int:
    """Ask every read of the room live, archive it as the archiver does, ask them again (of ``asked``, a gateway
    built after the move, when given): every answer must be the same; the number of answers compared."""
    live = reads(api, room, fill, viewers)
    answered = {name for (name, _, _), (status, _, _) in live.items() if status == 200}
    # every operation of the room answered some of its reads (not only refusals), and the listings were found
    # (``unanswered``: operations the room's rule-set has nothing for, e.g. audit views of a game that declares none)
    expected = {f"GET {path}" for path in room_operations(api.app.openapi())} - unanswered
    assert expected <= answered, sorted(expected - answered)
    assert set(listings) <= answered, sorted(answered)
    status, left = asyncio.run(archive_as_the_archiver(stack, room))
    assert status == "archived" and left == [], (status, left)  # the room's log and records are out of Redis
    archived = reads(asked or api, room, fill, viewers, listed(api, live))
    differ = {key: (seen, archived.get(key)) for key, seen in live.items() if archived.get(key) != seen}
    assert not differ, f"{len(differ)} of {len(live)} answers differ, e.g. {list(differ.items())[:3]}"
    print(f"{len(live)} answers compared live and archived, of {sorted({name for name, _, _ in live})}")
    return len(live)


async def archive_as_the_archiver(stack, room: str) -> tuple[str, list[bytes]]:
    """Archive the room as an archiver pass does (the move, then the archive index): (status, room keys left)."""
    settings = gateway_settings(stack)
    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL)
    try:
        result = await archive_room(runtime.store, room)
        await archive_index.compact(runtime.store, [room])  # as the archiver's pass does after its moves
        left = await runtime.client.keys(f"*room:{room}:*")
        # the pointer (the seats' key digests stay in their shard's buckets: a player reclaims a token to read
        # their own view of the room)
        return result.status, sorted(k for k in left if not k.endswith((b":version", b":archived")))
    finally:
        await runtime.aclose()


def test_every_read_route_answers_the_same_for_the_room_archived(api: TestClient, stack, auditor: str) -> None:
    room, alice, bob, tokens, sent = traded_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    settings = gateway_settings(stack)
    keys = bootstrap.process_keys(settings.shard_count)
    # the projector has projected the end (the room is on the archiver's list)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    viewers = {"public": None, "player": tokens[alice], "auditor": auditor}

    assert same_live_and_archived(api, stack, room, room_fill(stack, room, alice, bob, sent), viewers)

    assert client.zscore(keys.ended_rooms(keys.shard(room)), room) is None  # off the archiver's list
    assert client.hget(keys.summaries(keys.shard(room)), room) is None  # its summary is folded from the archive
    # its listing row is in the archive index's blocks now: the listing kept counting it (compared above)
    assert client.hget(keys.listings(keys.shard(room)), room) is None
    assert client.hlen(keys.archived_listings(keys.shard(room))) >= 1
    # and its trade rows in the trades model's blocks: the read-model routes answered the same from there
    assert not client.exists(keys.model_ledger(keys.shard(room), "trades", room))
    assert not client.sismember(keys.model_ledger_rooms(keys.shard(room), "trades"), room)
    refused = api.post(f"/rooms/{room}/commands", headers=auth(tokens[alice]),
                       json={"command": {"kind": "mine", "ore": "gold"}})
    assert refused.status_code == 422 and refused.json()["code"] == "room_ended", refused.text
    client.close()


def test_a_claim_rooms_registry_row_answers_the_same_archived_and_leaves_redis(api: TestClient, stack,
                                                                                auditor: str) -> None:
    """The read-model routes with rows that exist: claim's registry row of the room, for the room and in the listing
    of every room's (the realm room above has its trade rows); after the move no row of it is left in Redis."""
    room, alice, tokens, sent = claim_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    assert [row["room"] for row in api.get("/read-models/claims", params={"room": room}).json()["rows"]] == [room]
    fill = room_fill(stack, room, alice, alice, sent, "claim") | {
        "path": ["scores", f"scores.{alice}", "room.players"], "where": ["room.ended == true"]}

    same_live_and_archived(api, stack, room, fill, {"public": None, "player": tokens[alice], "auditor": auditor},
                           listings=("GET /rooms", "GET /status/rooms", "GET /read-models/{model}"),
                           unanswered=frozenset({"GET /rooms/{room}/audit/{view}", "GET /rooms/{room}/audit/{view}/{item}"}))

    assert not client.hexists(keys.model_rows(keys.shard(room), "claims"), room)  # in the archive index's block
    client.close()


def test_the_gateway_of_another_process_reads_the_archived_room(api: TestClient, stack, auditor: str) -> None:
    """A gateway that never saw the room live (no cache) reads it from the archive alone."""
    from almanac.services.gateway import create_app  # noqa: PLC0415

    room, alice, bob, tokens, sent = traded_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    fill = room_fill(stack, room, alice, bob, sent)
    with TestClient(create_app(gateway_settings(stack)), raise_server_exceptions=False) as fresh:
        same_live_and_archived(api, stack, room, fill, {"player": tokens[alice], "auditor": auditor}, asked=fresh)
    client.close()


def test_the_archiver_process_archives_ended_rooms_and_reports_in_metrics(api: TestClient, stack, auditor) -> None:
    """`almanac archiver` as a real process (ALMANAC_DEDUPE_RETAIN=0: at once): an ended room leaves Redis by
    itself, a room still playing stays, and /metrics shows the archiver's figures."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from gateway_stack import CHILD  # noqa: PLC0415

    room, alice, _, tokens = realm_room(api)
    playing, *_ = realm_room(api, ended=False)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    env = {**stack.env, "ALMANAC_DEDUPE_RETAIN": "0", "ALMANAC_ARCHIVER_INTERVAL_S": "0.2"}
    archiver = subprocess.Popen([sys.executable, "-c", CHILD, "archiver"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # the pointer is the commit point; the delete step follows it, so wait for both
        assert wait_until(lambda: client.hexists(keys.pointer_bucket(room), room) and not client.exists(
            keys.events(room)), bool, timeout_s=30), "not archived and deleted"
        assert client.exists(keys.events(playing))
        assert api.get(f"/rooms/{room}/verification", headers=auth(auditor)).json()["ok"] is True
        text = wait_until(lambda: api.get("/metrics").text, lambda t: "almanac_archiver_rooms_total{" in t)
        assert "almanac_archiver_up 1" in text and 'almanac_archiver_lag_rooms{archiver="archiver"}' in text
    finally:
        archiver.terminate()
        archiver.wait(timeout=10)
        client.close()


def test_a_join_with_its_own_nonce_to_a_room_archived_finished_is_refused_and_writes_nothing(api: TestClient, stack,
                                                                                              auditor: str) -> None:
    """Given an ended realm room the archiver moved out of Redis, when a newcomer joins it sending their own nonce,
    then the join is refused ``room_ended`` and nothing of the room is written back into Redis: the gateway used to
    keep the nonce first, leaving a nonce hash in Redis for an archived room (one per such join, for ever), which hid
    the archived players' nonces from the engine: the join was answered 503 ``nonce_missing``."""
    room, alice, bob, tokens, sent = traded_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    status, left = asyncio.run(archive_as_the_archiver(stack, room))
    assert status == "archived" and not client.exists(keys.nonces(room)), left

    joined = api.post(f"/rooms/{room}/join", json={"player": f"carol-{secrets.token_hex(3)}",
                                                   "nonce": secrets.token_hex(32)})

    assert joined.status_code == 422 and joined.json()["code"] == "room_ended", joined.text
    assert not client.exists(keys.nonces(room))
    assert asyncio.run(archive_as_the_archiver(stack, room)) == ("already", left)  # nothing else came back either
    client.close()
