"""Bots at room creation: the create request's ``bots`` hands seats to bots, which take and play them through the
engine like any player; a person cannot take a bot's seat, and a bot never gets the creator's."""

from __future__ import annotations

import asyncio
import hashlib
import secrets

import redis
import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings

from almanac.services.bots import bot_seats
from almanac.services.gateway import create_app
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

KEYS = Keys(16)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def bots_rounds(stack: Stack, until, rounds: int = 300) -> None:
    """Rounds of an in-process bots service of the stack's deployment, playing through a gateway of its own, until
    ``until()`` (a sync check through the API) holds."""
    client = aioredis.Redis.from_url(stack.redis_url)
    try:
        async with served_gateway(stack.redis_url, ALMANAC_DATA_DIR=str(stack.data_dir)) as gateway:
            bots = bots_for(gateway, client, RedisEventStore(client, shard_count=16), KEYS, rate=0)
            for _ in range(rounds):
                await bots.tick()
                if await asyncio.to_thread(until):  # (a check through the API: the served gateway keeps serving)
                    return
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    raise AssertionError("the bots did not get there")


def test_a_realm_room_created_with_a_bot_seat_plays_the_bots_city(api: TestClient, stack: Stack) -> None:
    alice, bob = f"alice-{secrets.token_hex(3)}", f"bob-{secrets.token_hex(3)}"
    # Given alice creates a realm room and hands bob's seat to a bot
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "bots": [bob],
                                       "options": {"players": [alice, bob], "years": 1}})
    assert created.status_code == 201, created.text
    room, token = created.json()["room"], created.json()["token"]
    assert created.json()["bots"] == [bob]
    assert asyncio.run(_seats(stack.redis_url)) >= {(room, bob)}

    def events() -> list[dict]:
        return api.get(f"/rooms/{room}/events", headers=auth(token)).json()["events"]

    def bob_acted() -> bool:
        return any(e["player"] == bob and e["type"].startswith("realm.") for e in events())

    # When the bots service runs, and alice ends her turn
    asyncio.run(bots_rounds(stack, lambda: any(e["type"] == "room.player_joined" and e["player"] == bob
                                                         for e in events())))
    ended = api.post(f"/rooms/{room}/commands", headers=auth(token),
                     json={"command": {"kind": "end_turn"}, "command_id": secrets.token_hex(16)})
    assert ended.status_code in (200, 202), ended.text
    asyncio.run(bots_rounds(stack, bob_acted))
    # Then the bot took bob's seat under its own join id, and bob's city acts, as an ordinary logged command
    moves = [e for e in events() if e["player"] == bob and e["type"].startswith("realm.")]
    assert moves and all(e["version"] > 3 for e in moves)
    # and nobody else can take the bot's seat
    again = api.post(f"/rooms/{room}/join", json={"player": bob})
    assert again.status_code == 422 and again.json()["code"] == "already_joined"


async def _seats(redis_url: str) -> set[tuple[str, str]]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        return set(await bot_seats(client, KEYS, range(16)))
    finally:
        await client.aclose()


def test_a_bot_is_never_handed_the_creators_own_seat(api: TestClient) -> None:
    alice = f"alice-{secrets.token_hex(3)}"
    refused = api.post("/rooms", json={"ruleset": "board", "player": alice, "bots": [alice]})
    assert refused.status_code == 422 and refused.json()["code"] == "bot_seat_taken"
    too_many = api.post("/rooms", json={"ruleset": "realm", "player": alice, "bots": [f"b{i}" for i in range(17)]})
    assert too_many.status_code == 422 and too_many.json()["field"] == "bots"


def test_rooms_with_bots_are_refused_once_the_deployment_holds_its_bot_seats(stack: Stack) -> None:
    held = len(asyncio.run(_seats(stack.redis_url)))
    mallory = f"mallory-{secrets.token_hex(3)}"
    # Given a deployment that holds at most 4 more bot seats than it does now
    with TestClient(create_app(gateway_settings(stack, max_bot_seats=held + 4))) as api:
        # When mallory creates realm rooms, handing two seats of each to bots
        answers = [api.post("/rooms", json={"ruleset": "realm", "player": mallory, "room": f"{mallory}-{index}",
                                            "bots": ["b1", "b2"], "options": {"players": [mallory, "b1", "b2"]}})
                   for index in range(4)]
        # Then the first two are created, and the others refused before any room exists
        assert [answer.status_code for answer in answers] == [201, 201, 429, 429], [a.text for a in answers]
        assert {key: answers[2].json()[key] for key in ("code", "field")} == {"code": "bot_seats_full",
                                                                           "field": "bots"}
        assert not redis.Redis.from_url(stack.redis_url).exists(KEYS.version(f"{mallory}-2"))
        # while a room without bots is still created
        plain = api.post("/rooms", json={"ruleset": "board", "player": mallory})
        assert plain.status_code == 201, plain.text
    assert len(asyncio.run(_seats(stack.redis_url))) == held + 4


def test_a_create_hands_bots_only_seats_of_the_room_each_once(api: TestClient) -> None:
    alice = f"alice-{secrets.token_hex(3)}"
    realm = {"ruleset": "realm", "player": alice, "options": {"players": [alice, "bob", "carol"]}}
    # Given creates naming a bot seat the room does not have, and one naming a seat twice
    stranger = api.post("/rooms", json={**realm, "bots": ["bob", "mallory"]})
    twice = api.post("/rooms", json={**realm, "bots": ["bob", "bob"]})
    # Then each is refused with a 422 naming `bots`, the first with the room's seats, and no room is made
    assert stranger.status_code == 422, stranger.text
    assert (stranger.json()["code"], stranger.json()["field"]) == ("no_seat", "bots")
    assert stranger.json()["allowed"] == [alice, "bob", "carol"]
    assert twice.status_code == 422, twice.text
    assert (twice.json()["code"], twice.json()["field"]) == ("duplicate_bot_seat", "bots")
    # while bots for seats the room has are handed as before
    fine = api.post("/rooms", json={**realm, "bots": ["bob", "carol"]})
    assert fine.status_code == 201, fine.text
    assert fine.json()["bots"] == ["bob", "carol"]


def test_one_address_asking_past_its_hourly_bot_seats_is_refused_while_another_still_gets_a_bot(stack: Stack) -> None:
    # Given a deployment of 1,600 bot seats: one client address may ask for a hundredth of them (16) an hour
    settings = gateway_settings(stack, max_bot_seats=1_600)
    mallory_at, carol_at = (f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{n}" for n in (1, 2))
    mallory = f"mallory-{secrets.token_hex(3)}"
    with (TestClient(create_app(settings), client=(mallory_at, 40000)) as from_mallory,
          TestClient(create_app(settings), client=(carol_at, 40000)) as from_carol):
        # When mallory, anonymous, creates realm rooms handing two seats of each to bots, nine times
        answers = [from_mallory.post("/rooms", json={"ruleset": "realm", "player": mallory,
                                                     "room": f"{mallory}-{index}", "bots": ["b1", "b2"],
                                                     "options": {"players": [mallory, "b1", "b2", "b3"]}})
                   for index in range(9)]
        # Then her first eight (16 seats) are created, and the ninth is refused before any room exists, with the
        # time to wait, though the deployment has seats to spare
        assert [answer.status_code for answer in answers] == [201] * 8 + [429], [a.text for a in answers]
        assert (answers[8].json()["code"], answers[8].json()["field"]) == ("bot_seats_rate_limited", "bots")
        assert 0 < int(answers[8].headers["Retry-After"]) <= 3600
        assert not redis.Redis.from_url(stack.redis_url).exists(KEYS.version(f"{mallory}-8"))
        # and nor can she hand her room's empty seat to a bot with its token
        token = answers[0].json()["token"]
        handed = from_mallory.post(f"/rooms/{mallory}-0/bots", headers=auth(token), json={"seat": "b3"})
        assert (handed.status_code, handed.json()["code"]) == (429, "bot_seats_rate_limited"), handed.text
        # while carol, from another address, still creates a room with a bot, and mallory one without
        carol = f"carol-{secrets.token_hex(3)}"
        created = from_carol.post("/rooms", json={"ruleset": "realm", "player": carol, "bots": ["b1"],
                                                  "options": {"players": [carol, "b1"]}})
        assert created.status_code == 201, created.text
        assert created.json()["bots"] == ["b1"]
        assert from_mallory.post("/rooms", json={"ruleset": "board", "player": mallory}).status_code == 201


def test_a_command_sent_first_under_a_reclaims_public_id_is_not_taken_for_the_reclaim(api: TestClient,
                                                                                       stack: Stack) -> None:
    # Given carol's seat handed to a bot, the room at version `at`
    alice = f"alice-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "seat_bots": True,
                                       "options": {"players": [alice, "bob", "carol"], "years": 1}})
    room, alice_token = created.json()["room"], created.json()["token"]
    joined = api.post(f"/rooms/{room}/join", json={"player": "carol"})
    carol_token, carol_key = joined.json()["token"], joined.json()["seat_key"]
    assert api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": "carol"}).status_code in (200, 201)
    at = api.get(f"/rooms/{room}").json()["version"]
    # When her old token first sends a move under the id the reclaim after that move (at `at` + 1) had when it was
    # derived from public values alone (room, player, version), then she presents her seat key
    public_id = "reclaim-" + hashlib.sha256(f"{room}\x00carol\x00{at + 1}".encode()).hexdigest()[:32]
    moved = api.post(f"/rooms/{room}/commands", headers=auth(carol_token),
                     json={"command": {"kind": "mine", "ore": "stone"}, "command_id": public_id})
    assert moved.status_code == 200, moved.text
    back = api.post(f"/rooms/{room}/seat", json={"player": "carol", "seat_key": carol_key})
    # Then the answer says reclaimed only because the log says so: the reclaim's own event, for carol
    assert back.status_code == 200, back.text
    assert back.json()["reclaimed"] is True, back.json()
    log = api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"]
    assert [event for event in log if event["type"] == "room.seat_reclaimed"], [event["type"] for event in log]
    # and no bot holds her seat any more
    assert (room, "carol") not in asyncio.run(_seats(stack.redis_url))
