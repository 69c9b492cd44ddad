"""A token that keeps sending past its limit costs next to nothing: the gateway refuses it from memory.

Given a real gateway process whose room tokens may send 3 commands per second, when one token sends 30 in
a burst, then 3 are served and the rest are refused 429 ``rate_limited`` with Retry-After and a request id,
and once the gateway has seen the window used up it answers the rest itself: Redis runs the counting script
for a few of them only, not for each. When the window has ended, the token is served again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from gateway_stack import engine_and_gateway

from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.settings import load_settings
from almanac.storage.keys import Keys

ELEMENT = {"kind": "place_element", "row": -1, "column": 5}  # refused by the rules (422) after counting


@pytest.fixture(scope="module")
def limited(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, redis.Redis]]:
    client = redis.Redis.from_url(redis_url)
    try:
        with engine_and_gateway(redis_url, tmp_path_factory.mktemp("rate-limited"),
                                ALMANAC_RATE_COMMANDS="3/second", ALMANAC_RATE_ANON="off") as (url, _):
            yield url, client
    finally:
        client.close()


def counted(client: redis.Redis, room: str, player: str) -> int:
    """The seat's window counter in Redis: every request the submit script counted."""
    limit = RateLimits(load_settings({}, rate_commands="3/second"), client, Keys(16)).seat_limit(room, player)
    value = client.get(limit.key)
    return 0 if value is None else int(value)


def test_a_token_past_its_limit_is_refused_from_memory_until_its_window_ends(limited):
    url, client = limited
    with httpx.Client(base_url=url, timeout=10) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": "ann", "room": "hammer"})
        assert created.status_code == 201, created.text
        token = created.json()["token"]
        headers = {"Authorization": f"Bearer {token}"}

        answers = [http.post("/rooms/hammer/commands", json={"command": ELEMENT}, headers=headers)
                   for _ in range(30)]

        counted_in_redis = counted(client, "hammer", "ann")
        statuses = [answer.status_code for answer in answers]
        assert statuses.count(422) == 3 and statuses.count(429) == 27, statuses
        for refused in answers[3:]:
            body = refused.json()
            assert body["code"] == "rate_limited" and body["message"]
            assert 1 <= int(refused.headers["Retry-After"]) <= 1 and refused.headers["X-Request-ID"]
        # 3 counted and served, 1 counted and refused, the other 26 answered without Redis.
        assert counted_in_redis == 4, f"Redis counted {counted_in_redis} of 30 requests"

        # The same token in another room is judged as usual (a 403: it is not that room's), and so is a
        # request with another (here: a forged) token.
        elsewhere = next(room for room in (f"other-{n}" for n in range(500))
                         if Keys(16).shard(room) == Keys(16).shard("hammer"))  # its counter's very shard
        assert http.post(f"/rooms/{elsewhere}/commands", json={"command": ELEMENT},
                         headers=headers).status_code == 403
        assert http.post("/rooms/hammer/commands", json={"command": ELEMENT},
                         headers={"Authorization": "Bearer not-a-token"}).status_code == 401
        for _ in range(60):  # the window (1 s) ends: served again
            answer = http.post("/rooms/hammer/commands", json={"command": ELEMENT}, headers=headers)
            if answer.status_code != 429:
                break
            time.sleep(0.05)
        assert answer.status_code == 422, answer.text
