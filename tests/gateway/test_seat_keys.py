"""Seats that survive: the join's seat key gets a fresh token for the same seat; nothing else does."""

from __future__ import annotations

import asyncio
import hashlib
import secrets

import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings, seated_realm_answers
from test_gateway_archived_reads import archive_as_the_archiver
from waiting import wait_until

from almanac.services import bootstrap
from almanac.storage.keys import Keys
from almanac.storage.seat_keys import seat_field


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def reclaim(api: TestClient, room: str, player: str, key: object):
    return api.post(f"/rooms/{room}/seat", json={"player": player, "seat_key": key})


def test_a_player_who_closed_the_tab_gets_the_seat_back_with_the_seat_key(api: TestClient) -> None:
    # Given bob joined and kept only his seat key (the tab with the token is gone)
    room, _, bob = seated_realm_answers(api)
    assert len(bob["seat_key"]) == 43
    # When he presents it
    answer = reclaim(api, room, bob["player"], bob["seat_key"])
    # Then a fresh token acts for the same seat: his view, and a move of his
    assert answer.status_code == 200, answer.text
    token = answer.json()["token"]
    assert api.get(f"/rooms/{room}/view", headers=auth(token)).json()["player"] == bob["player"]
    moved = api.post(f"/rooms/{room}/commands", headers=auth(token),
                     json={"command": {"kind": "end_turn"}, "command_id": secrets.token_hex(16)})
    assert moved.status_code in (200, 202), moved.text
    # and joining again is still refused: the key is the way back, not a second join
    again = api.post(f"/rooms/{room}/join", json={"player": bob["player"]})
    assert again.status_code == 422 and again.json()["code"] == "already_joined"


def test_the_creator_who_joined_gets_a_seat_key_too(api: TestClient) -> None:
    room, alice, _ = seated_realm_answers(api)
    assert alice["joined"] is True
    assert reclaim(api, room, alice["player"], alice["seat_key"]).status_code == 200


def test_a_wrong_key_another_seats_key_or_another_room_opens_nothing(api: TestClient) -> None:
    room, alice, bob = seated_realm_answers(api)
    other_room, _, _ = seated_realm_answers(api)
    # A rival presenting her own key for bob's seat, a guessed key, or bob's key in another room
    for player, key, in_room in ((bob["player"], alice["seat_key"], room),
                                 (bob["player"], secrets.token_urlsafe(32), room),
                                 (bob["player"], bob["seat_key"], other_room),
                                 ("nobody", bob["seat_key"], room),
                                 (bob["player"], bob["seat_key"], "no-such-room")):
        answer = reclaim(api, in_room, player, key)
        assert answer.status_code == 403, answer.text
        assert answer.json()["code"] == "seat_key_invalid" and answer.json()["field"] == "seat_key"
        assert "token" not in answer.json()
    # A body outside the schema: refused by field, before any lookup
    for body in ({"player": bob["player"]}, {"player": bob["player"], "seat_key": "short"},
                 {"player": bob["player"], "seat_key": bob["seat_key"], "extra": 1},
                 {"player": bob["player"], "seat_key": "!" * 43}, {"player": "a" * 500, "seat_key": bob["seat_key"]}):
        assert api.post(f"/rooms/{room}/seat", json=body).status_code == 422, body
    # and the right key still works afterwards
    assert reclaim(api, room, bob["player"], bob["seat_key"]).status_code == 200


def test_a_refused_join_for_a_taken_seat_does_not_replace_its_key(api: TestClient) -> None:
    room, _, bob = seated_realm_answers(api)
    # A squatter tries to join as bob: refused, and handed no key
    squat = api.post(f"/rooms/{room}/join", json={"player": bob["player"]})
    assert squat.status_code == 422 and "seat_key" not in squat.json()
    assert reclaim(api, room, bob["player"], bob["seat_key"]).status_code == 200


def test_the_server_keeps_only_a_hash_of_the_key(api: TestClient, stack: Stack) -> None:
    # An operator with Redis access reads the seat keys' bucket: it holds digests, never the key
    room, _, bob = seated_realm_answers(api)
    keys = Keys(16)
    client = redis.Redis.from_url(stack.redis_url)
    try:
        kept = client.hget(keys.seat_key_bucket(room), seat_field(room, bob["player"]))
        bucket = client.hgetall(keys.seat_key_bucket(room))
        room_values = b"".join(client.dump(key) or b"" for key in client.scan_iter(match=f"*{room}*"))
        encoding = client.object("encoding", keys.seat_key_bucket(room))
    finally:
        client.close()
    assert kept == hashlib.sha256(bob["seat_key"].encode()).digest()
    assert bob["seat_key"].encode() not in room_values + b"".join(bucket.values())
    # a listpack entry per seat, no key of the room's own (docs/capacity.md: 273 B per two-seat room before)
    assert encoding in (b"listpack", b"ziplist") and not client.exists(keys.first_layout_seat_keys(room))


def test_a_seat_key_granted_before_the_buckets_still_opens_its_seat_until_a_new_one_is_granted(
        api: TestClient, stack: Stack) -> None:
    # Given bob's seat key kept where the version before the buckets kept it (a hash per room, hex digests)
    room, _, bob = seated_realm_answers(api)
    keys = Keys(16)
    old_key = secrets.token_urlsafe(32)
    client = redis.Redis.from_url(stack.redis_url)
    try:
        client.hdel(keys.seat_key_bucket(room), seat_field(room, bob["player"]))
        client.hset(keys.first_layout_seat_keys(room), bob["player"], hashlib.sha256(old_key.encode()).hexdigest())
        # When he presents it, it opens his seat; a guessed key still does not
        assert reclaim(api, room, bob["player"], old_key).status_code == 200
        assert reclaim(api, room, bob["player"], secrets.token_urlsafe(32)).status_code == 403
        # and when his join is retried under its long command id (a new key for the seat), the old key stops working
        joined = api.post(f"/rooms/{room}/join", json={"player": bob["player"], "command_id": bob["command_id"]})
        assert joined.status_code == 200, joined.text
        assert reclaim(api, room, bob["player"], joined.json()["seat_key"]).status_code == 200
        assert reclaim(api, room, bob["player"], old_key).status_code == 403
        assert not client.hexists(keys.first_layout_seat_keys(room), bob["player"])
    finally:
        client.close()


def test_a_seat_key_opens_its_seat_once_the_room_is_archived(api: TestClient, stack: Stack) -> None:
    # Given bob's room ended and moved to the archive (its log and records out of Redis)
    room, alice, bob = seated_realm_answers(api)
    assert api.post(f"/rooms/{room}/end", headers=auth(alice["token"]), json={}).status_code == 200
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    try:
        wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    finally:
        client.close()
    status, left = asyncio.run(archive_as_the_archiver(stack, room))
    assert status == "archived" and left == []
    # When bob presents his seat key, it gives him a token for his seat: his own view of the archived room
    answer = reclaim(api, room, bob["player"], bob["seat_key"])
    assert answer.status_code == 200, answer.text
    assert api.get(f"/rooms/{room}/view", headers=auth(answer.json()["token"])).json()["player"] == bob["player"]
