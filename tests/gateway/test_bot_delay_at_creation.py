"""Bots with a move delay at room creation: POST /rooms's ``bots`` with ``bot_delay_ms`` hands seats to bots that
play them like any seat, each move no sooner than the delay after the room's newest event and within the stated
margin after it (services/bots.py DELAY_MARGIN_MS), and the room verifies."""

from __future__ import annotations

import asyncio
import secrets

import redis.asyncio as aioredis
from fastapi.testclient import TestClient
from gateway_stack import Stack
from test_bot_seats import KEYS, auth, bots_rounds

from almanac.events.envelope import Envelope
from almanac.services.bots import (
    ATTEMPTS,
    DELAY_MARGIN_MS,
    MAX_DELAY_MS,
    RETRY_AFTER_MS,
    bot_command_id,
)
from almanac.services.bus import internal_command_id
from almanac.services.forensics.verify import verify_room
from almanac.storage.redis_store import RedisEventStore

DELAY_MS = 300


async def _log_and_verdict(redis_url: str, room: str) -> tuple[list[Envelope], bool, int | None]:
    """The room's log, whether it verifies, and its bot delay as kept for the bots."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        store = RedisEventStore(client, shard_count=16)
        report = await verify_room(store, room)
        delay = await client.hget(KEYS.bot_delays(KEYS.shard(room)), room)
        return await store.read(room), report.ok, None if delay is None else int(delay)
    finally:
        await client.aclose()


def _bot_gaps(envelopes: list[Envelope], seat: str) -> list[tuple[int, int]]:
    """For each command of the bot's seat (its first event): ms between its stamp and the room's event it was
    decided after, and the draws refused before it there. Its id names both (services/bots.py bot_command_id: the
    version it saw, the attempt; scoped by the gateway it came through); the join's names neither, so it counts from the event before it."""
    gaps = []
    for at in range(1, len(envelopes)):
        mine = envelopes[at]
        if mine.player != seat or mine.command_id == envelopes[at - 1].command_id:
            continue
        seen, refused = next(((before, attempt) for before in reversed(envelopes[:at]) for attempt in range(ATTEMPTS)
                              if mine.command_id == internal_command_id(
                                  mine.room, seat, bot_command_id(mine.room, seat, before.version, attempt))),
                             (envelopes[at - 1], 0))
        gaps.append((mine.server_time_ms - seen.server_time_ms, refused))
    return gaps


def _within_the_delay(gaps: list[tuple[int, int]]) -> bool:
    """No sooner than the delay; within the margin after it, plus the wait of each refused draw before."""
    return bool(gaps) and all(DELAY_MS <= gap <= DELAY_MS + DELAY_MARGIN_MS + refused * RETRY_AFTER_MS
                              for gap, refused in gaps)


def test_a_realm_room_created_with_a_delayed_bot_plays_its_year_with_a_person(api: TestClient, stack: Stack,
                                                                            auditor: str) -> None:
    alice, bob = f"alice-{secrets.token_hex(3)}", f"bob-{secrets.token_hex(3)}"
    # Given alice creates a realm room for one year, bob's city handed to a bot that waits 300 ms before each move
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "bots": [bob], "bot_delay_ms": DELAY_MS,
                                       "options": {"players": [alice, bob], "years": 1}})
    assert created.status_code == 201, created.text
    assert (created.json()["bots"], created.json()["bot_delay_ms"]) == ([bob], DELAY_MS)
    room, token = created.json()["room"], created.json()["token"]

    def events() -> list[dict]:
        return api.get(f"/rooms/{room}/events", headers=auth(auditor)).json()["events"]

    def bob_ended() -> int:
        return sum(e["player"] == bob and e["type"] == "realm.turn_ended" for e in events())

    def over() -> bool:
        return bool(api.get(f"/rooms/{room}").json()["over"])

    # When alice ends her turn every season, and the bots service plays bob's city meanwhile
    for _ in range(12):
        if over():
            break
        ended = bob_ended()
        turn = api.post(f"/rooms/{room}/commands", headers=auth(token),
                        json={"command": {"kind": "end_turn"}, "command_id": secrets.token_hex(16)})
        assert turn.status_code in (200, 422), turn.text  # 422: the season she ended is still waiting for bob
        asyncio.run(bots_rounds(stack, lambda ended=ended: over() or bob_ended() > ended))
    # Then the year is played to its end by the rules, alice's commands and the bot's in one log
    assert over(), [e["type"] for e in events()][-10:]
    envelopes, verified, delay = asyncio.run(_log_and_verdict(stack.redis_url, room))
    assert {e.player for e in envelopes if e.type.startswith("realm.")} == {alice, bob}
    # and every command of bob's seat, its join included, came no sooner than the delay after the room's event
    # before it, and within the margin after the delay
    gaps = _bot_gaps(envelopes, bob)
    assert len(gaps) >= 5 and _within_the_delay(gaps), gaps
    # and the room verifies; the delay was kept for the bots as asked
    assert verified
    assert delay in (DELAY_MS, None)  # (None once a round saw the room ended and dropped it)
    print("bot gaps past the event each move was decided after (ms, refused draws):", gaps)


def test_a_board_map_created_for_a_delayed_bot_is_played_to_its_end(api: TestClient, stack: Stack) -> None:
    alice = f"alice-{secrets.token_hex(3)}"
    # Given alice creates a board map for a bot's seat (she does not join: one map is one player's), 300 ms delay
    created = api.post("/rooms", json={"ruleset": "board", "player": alice, "join": False, "bots": ["robo"],
                                       "bot_delay_ms": DELAY_MS, "options": {"player": "robo"}})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    # When the bots service plays it
    asyncio.run(bots_rounds(stack, lambda: bool(api.get(f"/rooms/{room}").json()["ended"]), rounds=600))
    # Then every move of the map is the bot's, each within the delay, and the room verifies
    envelopes, verified, _ = asyncio.run(_log_and_verdict(stack.redis_url, room))
    gaps = _bot_gaps(envelopes, "robo")
    assert len(gaps) >= 10 and _within_the_delay(gaps), gaps
    assert verified


def test_a_bot_delay_is_bounded_and_goes_with_bots(api: TestClient) -> None:
    alice = f"alice-{secrets.token_hex(3)}"
    base = {"ruleset": "board", "player": alice, "join": False, "options": {"player": "robo"}}
    # Given a create past the delay's bound, a negative one, and one with a delay but no bot seat
    asks = [({**base, "bots": ["robo"], "bot_delay_ms": MAX_DELAY_MS + 1}, "invalid_request"),
            ({**base, "bots": ["robo"], "bot_delay_ms": -1}, "invalid_request"),
            ({**base, "bot_delay_ms": 500}, "bot_delay_without_bots")]
    for body, code in asks:
        # When each is sent, then it is refused with a 422 naming the delay, before any room exists
        refused = api.post("/rooms", json=body)
        assert refused.status_code == 422, refused.text
        assert (refused.json()["code"], refused.json()["field"]) == (code, "bot_delay_ms")


def test_a_bot_delay_goes_with_a_bot_policy_so_seats_handed_later_move_with_it(api: TestClient, stack: Stack) -> None:
    alice = f"alice-{secrets.token_hex(3)}"
    # Given a realm room that hands a seat missing a season's end to a bot, with a delay and no bot seat yet
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "bot_after_missed": 1,
                                       "bot_delay_ms": DELAY_MS,
                                       "options": {"players": [alice, "bob"], "season_timeout_ms": 10_000}})
    # When it is created, then it is, and its delay is kept for the bots: a seat handed later waits it too
    assert created.status_code == 201, created.text
    assert created.json()["bot_delay_ms"] == DELAY_MS and created.json()["bots"] == []
    _, _, delay = asyncio.run(_log_and_verdict(stack.redis_url, created.json()["room"]))
    assert delay == DELAY_MS
