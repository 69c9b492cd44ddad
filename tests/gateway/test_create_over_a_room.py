"""A create naming a room that exists writes nothing into that room.

Found by the acceptance review (2026-12-06): with no token, `POST /rooms` naming a live room, any player's name and
up to 64 KB of valid options was answered 409 `room_exists` and recorded in the room's refusal log (and a dedupe
record kept as long), under the player it named: 300 such requests added 24 MB to Redis, and the room's auditor saw
refusals "from" alice, bob and mallory that none of them sent. A create is not the room's command: its refusal is
answered, and kept only for the dedupe window, never in the room's log.
"""

from __future__ import annotations

import secrets

import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack
from suite_settings import suite_settings

from almanac.storage.keys import Keys

ATTEMPTS = 40
MINE = "alice-create-" + "x" * 8  # 16 characters or more: a resend of it gets its token again


def big_colony() -> dict:
    """Valid sectors options of ~56 KB: a 30x30 colony of prairie sectors."""
    sectors = [{"row": row, "column": column, "type": "prairie", "population": 1}
               for row in range(30) for column in range(30)]
    return {"setup": {"rows": 30, "columns": 30, "sectors": sectors}}


def room_keys(client: redis.Redis, room: str) -> dict[bytes, int]:
    """Every key of ``room`` (its hash tag's shard, its name in the key) and its size in bytes."""
    return {key: client.memory_usage(key) or 0 for key in client.scan_iter(match=f"*:{room}:*", count=1000)}


def test_creates_naming_a_live_room_are_refused_and_leave_nothing_in_it(api: TestClient, auditor: str,
                                                                         stack: Stack) -> None:
    # Given alice's live sectors room
    room = f"victim-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "sectors", "player": "alice", "room": room, "command_id": MINE})
    assert created.status_code == 201, created.text
    client = redis.Redis.from_url(stack.redis_url)
    rejected_key = Keys(16).rejected(room)
    before_keys, before_refusals = room_keys(client, room), client.xlen(rejected_key)
    # When outsiders, with no token, send creates naming it, under its players' names and others, with 56 KB of options
    for n in range(ATTEMPTS):
        answer = api.post("/rooms", json={"ruleset": "sectors", "player": ("alice", "bob", "mallory")[n % 3],
                                          "room": room, "options": big_colony()})
        # Then each is refused 409 room_exists
        assert answer.status_code == 409 and answer.json()["code"] == "room_exists", answer.text
    # and the room holds nothing more for long: no refusal in its log, nothing of its own changed, and each answer kept
    # only for the dedupe window (a resend within it is answered the same)
    assert client.xlen(rejected_key) == before_refusals
    after = room_keys(client, room)
    assert {key: after[key] for key in before_keys} == before_keys
    window_ms = suite_settings().dedupe_retain_s * 1000
    answers = set(after) - set(before_keys)
    assert len(answers) == ATTEMPTS and all(0 < client.pttl(key) <= window_ms for key in answers)
    refusals = api.get(f"/rooms/{room}/rejections", headers={"Authorization": f"Bearer {auditor}"}).json()
    assert not any(item["player"] in ("bob", "mallory") for item in refusals["rejections"]), refusals
    # while alice's own create, sent again with its id, is still answered as it was
    again = api.post("/rooms", json={"ruleset": "sectors", "player": "alice", "room": room, "command_id": MINE})
    assert again.status_code == 201 and again.json()["version"] == created.json()["version"], again.text
