"""Paged listings: given rooms in play and finished rooms the archiver moved out (their listing rows in the archive
index's blocks), when a client follows GET /rooms' and GET /status/rooms' next_cursor from the first page to the
last, then it sees every room once (no duplicate, no gap), rooms in play newest first before the archived ones; and a
limit or cursor the listing does not take is refused with a 4xx {code, message, field}."""

from __future__ import annotations

import asyncio
import base64

import redis
from fastapi.testclient import TestClient
from gateway_stack import gateway_settings
from test_gateway_archived_reads import archive_as_the_archiver
from test_gateway_forensics import auth
from waiting import wait_until

from almanac.projections.read_model_queries import ReadModels
from almanac.services import bootstrap
from almanac.services.gateway.schemas import DEFAULT_PAGE, MAX_PAGE


def pages(api: TestClient, url: str, limit: int, headers: dict | None = None, **params: str) -> list[list[dict]]:
    """Every page of a listing, its next_cursor followed to the last."""
    found, cursor = [], None
    while True:
        answer = api.get(url, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})},
                         headers=headers or {})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found.append(body["rooms"])
        cursor = body["next_cursor"]
        if cursor is None:
            return found


def test_paging_through_every_room_in_play_and_archived_shows_each_once(api: TestClient, stack,
                                                                       auditor: str) -> None:
    # Given eight board rooms, five of them ended and archived as the archiver does (their rows leave for blocks)
    created = []
    for index in range(8):
        answer = api.post("/rooms", json={"ruleset": "board", "player": "pat", "room": f"paged-{index}"})
        assert answer.status_code == 201, answer.text
        created.append((answer.json()["room"], answer.json()["token"]))
    ended = [room for room, _ in created[:5]]
    for room, token in created[:5]:
        assert api.post(f"/rooms/{room}/end", json={"reason": "paged"}, headers=auth(token)).status_code == 200
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    for room in ended:  # the projector projected the end: the room is on the archiver's list
        wait_until(lambda room=room: client.zscore(keys.ended_rooms(keys.shard(room)), room),
                   lambda score: score is not None)
        assert asyncio.run(archive_as_the_archiver(stack, room))[0] == "archived"
    assert sum(client.hlen(keys.archived_listings(s)) for s in range(keys.shard_count)) >= 1
    every = {room for room, _ in created}
    in_play = [room for room, _ in created[5:]]
    # the rooms in play are projected (their rows in Redis), so the listing's first tier holds them all
    wait_until(lambda: {r["room"] for r in api.get("/rooms").json()["rooms"]}, lambda rows: set(in_play) <= rows)

    for url, headers in (("/rooms", None), ("/status/rooms", auth(auditor))):
        for limit in (1, 2, 3, DEFAULT_PAGE):
            # When a client follows the cursor from the first page to the last
            seen = [row["room"] for page in pages(api, url, limit, headers) for row in page]
            # Then every room shows once, the rooms in play first, newest first
            assert sorted(seen) == sorted(every) and len(seen) == len(set(seen)), (url, limit, seen)
            assert seen[:3] == in_play[::-1], (url, limit, seen)
            assert set(seen[3:]) == set(ended)
    # and a page is never larger than its limit; the default page holds them all here, with no next page
    assert all(len(page) <= 2 for page in pages(api, "/rooms", 2))
    first = api.get("/rooms").json()
    assert len(first["rooms"]) == 8 and first["next_cursor"] is None
    # A rule-set's filter pages the same way: only its rooms, each once
    assert sorted(r["room"] for page in pages(api, "/rooms", 2, ruleset="board") for r in page) == sorted(every)
    assert [page for page in pages(api, "/rooms", 2, ruleset="realm") for _ in page] == []

    # and the full listing the CLI reads (ReadModels.rooms) still holds the archived rooms, from the cached blocks
    assert asyncio.run(full_listing(stack)) == every


async def full_listing(stack) -> set[str]:
    runtime = bootstrap.runtime(gateway_settings(stack), bootstrap.Role.TOOL)
    try:
        models = ReadModels(runtime.client, runtime.settings.shard_count, keys=runtime.keys, store=runtime.store)
        return {row["room"] for row in await models.rooms()}
    finally:
        await runtime.aclose()


def test_a_limit_or_cursor_the_listing_does_not_take_is_refused_with_the_field_named(api: TestClient,
                                                                                     auditor: str) -> None:
    forged = base64.urlsafe_b64encode(b'["a",99,"x","y"]').decode().rstrip("=")  # a shard the store lacks
    not_json = base64.urlsafe_b64encode(b"not a cursor").decode().rstrip("=")
    for url, headers in (("/rooms", {}), ("/status/rooms", auth(auditor))):
        for params, field in (({"limit": 0}, "limit"), ({"limit": MAX_PAGE + 1}, "limit"), ({"limit": "x"}, "limit"),
                              ({"cursor": "!!"}, "cursor"), ({"cursor": "a" * 513}, "cursor"),
                              ({"cursor": forged}, "cursor"), ({"cursor": not_json}, "cursor"),
                              ({"cursor": "e30"}, "cursor"), ({"ruleset": "no/such"}, "ruleset")):
            # When a listing is asked with it
            answer = api.get(url, params=params, headers=headers)
            # Then it is refused, the field named
            assert 400 <= answer.status_code < 500, (url, params, answer.text)
            body = answer.json()
            assert body["field"] == field and body["code"] and body["message"], (url, params, body)
