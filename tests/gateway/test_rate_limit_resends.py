"""A resend of a decided command is answered its stored outcome whatever the seat's rate limit, and is never charged.

Given a real gateway process whose seats may send 5 commands a minute (a minute's window, so that no window ends in
the middle of a story on a loaded machine), through both command paths (the gateway deciding its own commands, and
the command stream to an engine process):

- a seat that used its window up and resends its decided command ids (its answers were lost) gets their stored
  outcomes (200, the same version and events, ``duplicate``), not 429; a new command id is refused 429 as before;
- resends do not use up the window: after three commands and their three resends, three new commands are served;
- a resend with another body gets the first outcome, the idempotency rule of every command id;
- a resent end (POST /rooms/{room}/end naming its command id) likewise gets its stored outcome;
- no free pass: another seat's decided id, and an id refused 429 (never decided), are counted and refused as new.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import httpx
import pytest
import redis
from gateway_stack import Stack

from almanac.bench.e2e import CHALLENGE, _script
from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.settings import load_settings
from almanac.storage.keys import Keys

LIMIT = 5  # a minute, per seat (a create's own join is not counted)
RATE = f"{LIMIT}/minute"
MOVES = asyncio.run(_script("board"))


@pytest.fixture(scope="module", params=["decided-in-gateway", "through-the-stream"])
def gateway(request: pytest.FixtureRequest, redis_url: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[str]:
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, tmp_path_factory.mktemp("rate-limit-resends"))
    try:
        if request.param == "decided-in-gateway":
            stack.start("projector")
            yield stack.start_gateway(ALMANAC_ENGINE_SHARDS="all", ALMANAC_RATE_COMMANDS=RATE, ALMANAC_RATE_ANON="off")
        else:
            stack.start("engine")
            stack.wait_ready()
            yield stack.start_gateway(ALMANAC_RATE_COMMANDS=RATE, ALMANAC_RATE_ANON="off")
    finally:
        stack.stop()


def seat(http: httpx.Client, player: str = "ann") -> tuple[str, dict[str, str]]:
    """A new room and its creator's seat."""
    room = f"resend-{secrets.token_hex(4)}"
    created = http.post("/rooms", json={"ruleset": "board", "player": player, "challenge": CHALLENGE, "room": room})
    assert created.status_code == 201 and created.json()["joined"], created.text
    return room, {"Authorization": f"Bearer {created.json()['token']}"}


def send(http: httpx.Client, room: str, headers: dict[str, str], move: dict, command_id: str) -> httpx.Response:
    return http.post(f"/rooms/{room}/commands", json={"command": move, "command_id": command_id}, headers=headers)


def resend_at_once(url: str, room: str, headers: dict[str, str], sent: list[tuple[dict, str]]) -> list[httpx.Response]:
    async def all_of_them() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            return list(await asyncio.gather(*(
                http.post(f"/rooms/{room}/commands", json={"command": move, "command_id": command_id},
                          headers=headers) for move, command_id in sent)))
    return asyncio.run(all_of_them())


def assert_limited(answer: httpx.Response) -> None:
    assert answer.status_code == 429 and answer.json()["code"] == "rate_limited", answer.text


def same_outcome(first: httpx.Response, again: httpx.Response) -> None:
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True, again.text
    for field in ("version", "events", "command_id"):
        assert again.json()[field] == first.json()[field], (field, first.text, again.text)


def counted(redis_url: str, room: str, player: str) -> int:
    """The seat's window counter in Redis: every request its scripts counted."""
    client = redis.Redis.from_url(redis_url)
    try:
        limit = RateLimits(load_settings({}, rate_commands=RATE), client, Keys(16)).seat_limit(room, player)
        value = client.get(limit.key)
        return 0 if value is None else int(value)
    finally:
        client.close()


def test_resends_past_the_limit_are_answered_their_stored_outcomes_and_a_new_id_is_refused(gateway, redis_url):
    with httpx.Client(base_url=gateway, timeout=20) as http:
        # Given a seat that used its window up: five commands, all decided...
        room, headers = seat(http)
        sent = [(move, f"move-{index}") for index, move in enumerate(MOVES[:LIMIT])]
        first = [send(http, room, headers, move, command_id) for move, command_id in sent]
        assert [answer.status_code for answer in first] == [200] * LIMIT, [a.text for a in first]
        # ...when its client, whose answers were lost, resends the five at once, then each is answered its stored
        # outcome, not 429 (counted by the submit script, which finds each decided)...
        for answer, resent in zip(first, resend_at_once(gateway, room, headers, sent), strict=True):
            same_outcome(answer, resent)
        # ...and a new command id is refused, the window untouched by the resends.
        assert_limited(send(http, room, headers, MOVES[LIMIT], "move-new"))
        # When it resends them again, now that the gateway knows the window used up (it refuses from memory, before
        # the body is decoded), then each is still answered its stored outcome, and a new id is still refused.
        for answer, resent in zip(first, resend_at_once(gateway, room, headers, sent), strict=True):
            same_outcome(answer, resent)
        assert_limited(send(http, room, headers, MOVES[LIMIT], "move-newer"))
        assert counted(redis_url, room, "ann") == LIMIT + 1  # the five, the first new id (the gateway knew the next)
        for refused in ("move-new", "move-newer"):  # nothing appended for either
            assert http.get(f"/rooms/{room}/commands/{refused}", headers=headers).status_code == 404


def test_resends_do_not_use_up_the_window(gateway, redis_url):
    with httpx.Client(base_url=gateway, timeout=20) as http:
        # Given a seat that sent three commands (of its five)...
        room, headers = seat(http)
        sent = [(move, f"move-{index}") for index, move in enumerate(MOVES[:3])]
        first = [send(http, room, headers, move, command_id) for move, command_id in sent]
        assert [answer.status_code for answer in first] == [200] * 3, [a.text for a in first]
        before = counted(redis_url, room, "ann")
        # ...when it resends the three, once at once and once more one by one...
        again = resend_at_once(gateway, room, headers, sent) + [send(http, room, headers, *pair) for pair in sent]
        for answer, resent in zip(first * 2, again, strict=True):
            same_outcome(answer, resent)
        # ...then none of them was counted, and its two remaining commands are served: the third new one is not.
        assert counted(redis_url, room, "ann") == before
        for index in (3, 4):
            answer = send(http, room, headers, MOVES[index], f"move-{index}")
            assert answer.status_code == 200 and answer.json()["duplicate"] is False, answer.text
        assert_limited(send(http, room, headers, MOVES[5], "move-5"))


def test_a_resend_with_another_body_gets_the_first_outcome_within_and_past_the_limit(gateway):
    with httpx.Client(base_url=gateway, timeout=20) as http:
        room, headers = seat(http)
        first = send(http, room, headers, MOVES[0], "move-0")
        assert first.status_code == 200, first.text
        # Given a command decided, when its id is sent again with another (valid) command, within the limit and
        # past it, then both times the answer is the first outcome: one id, one decision.
        within = send(http, room, headers, MOVES[1], "move-0")
        same_outcome(first, within)
        for index in range(1, LIMIT):
            assert send(http, room, headers, MOVES[index], f"move-{index}").status_code == 200
        assert_limited(send(http, room, headers, MOVES[LIMIT], "move-new"))
        same_outcome(first, send(http, room, headers, MOVES[1], "move-0"))


def test_no_free_pass_for_another_seats_id_or_an_id_that_was_never_decided(gateway, redis_url):
    with httpx.Client(base_url=gateway, timeout=20) as http:
        # Given bob's decided command "shared" in his own room, and ann's seat with a used-up window whose last
        # command "refused" was refused 429 (never decided)...
        bob_room, bob = seat(http, "bob")
        assert send(http, bob_room, bob, MOVES[0], "shared").status_code == 200
        room, ann = seat(http)
        for index in range(LIMIT):
            assert send(http, room, ann, MOVES[index], f"move-{index}").status_code == 200
        assert_limited(send(http, room, ann, MOVES[LIMIT], "refused"))
        # ...when ann sends bob's id, in her room and in his, and resends her refused id, then each is refused
        # 429: none names a decided command of her seat, so none is answered for free.
        assert_limited(send(http, room, ann, MOVES[LIMIT], "shared"))
        assert_limited(send(http, room, ann, MOVES[LIMIT], "refused"))
        other = send(http, bob_room, ann, MOVES[1], "shared")
        assert other.status_code == 403, other.text  # her token is not a seat of bob's room
        assert http.get(f"/rooms/{room}/commands/refused", headers=ann).status_code == 404
        assert http.get(f"/rooms/{room}/commands/shared", headers=ann).status_code == 404


def test_a_resent_end_past_the_limit_is_answered_its_stored_outcome(gateway):
    with httpx.Client(base_url=gateway, timeout=20) as http:
        # Given a seat that ended its room as the last request of its window (its end named its command id), and
        # whose next command was refused 429 (the gateway knows the window used up)...
        room, headers = seat(http)
        for index in range(LIMIT - 1):
            assert send(http, room, headers, MOVES[index], f"move-{index}").status_code == 200
        ended = http.post(f"/rooms/{room}/end", json={"command_id": "end-1"}, headers=headers)
        assert ended.status_code == 200, ended.text
        assert_limited(send(http, room, headers, MOVES[LIMIT - 1], "move-new"))
        # ...when it resends its end, then it is answered the end's stored outcome, not 429; a new end is refused.
        same_outcome(ended, http.post(f"/rooms/{room}/end", json={"command_id": "end-1"}, headers=headers))
        assert_limited(http.post(f"/rooms/{room}/end", json={"command_id": "end-2"}, headers=headers))
