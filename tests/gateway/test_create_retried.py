"""A create that names no room, sent again with its command id, finds its first room and answer: never a second room.

Found by the acceptance review (2026-12-06): the README and docs/client.md promise that a create retried with the
same `command_id` (16 characters or more) gets its token back, but a create naming no room drew a new room id at
each try, so a retry after a lost answer made a second room, seated its player twice, took its bot seats twice and
counted twice against its address; the Python client's `create_room(room=None)` resends exactly that after a
dropped connection. The room is now derived from the player and the command id under the deployment's key.
"""

from __future__ import annotations

import secrets

import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack

from almanac.services import bots
from almanac.storage.keys import Keys


def test_a_create_naming_no_room_resent_with_its_id_answers_its_first_room(api: TestClient, stack: Stack) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    held = client.hlen(bots.bot_seats_key(Keys(16).prefix))
    # Given a realm create naming no room, with two seats for bots and a long command id, answered once
    command_id = f"hal-create-{secrets.token_hex(8)}"
    body = {"ruleset": "realm", "player": "hal", "options": {"players": ["hal", "b1", "b2"]}, "bots": ["b1", "b2"],
            "command_id": command_id}
    first = api.post("/rooms", json=body)
    assert first.status_code == 201, first.text
    # When it is sent again (its answer lost), twice
    again = [api.post("/rooms", json=body) for _ in range(2)]
    # Then each resend answers the same room at the same version, with the seat's token, as a duplicate
    for answer in again:
        assert answer.status_code == 201, answer.text
        assert answer.json()["room"] == first.json()["room"] and answer.json()["version"] == first.json()["version"]
        assert answer.json()["duplicate"] is True and answer.json()["token"]
    # and the deployment holds the two bot seats once
    assert client.hlen(bots.bot_seats_key(Keys(16).prefix)) == held + 2
    # while another command id, or another player with the same id, makes a room of its own
    other_id = api.post("/rooms", json={**body, "command_id": f"hal-create-{secrets.token_hex(8)}", "bots": []})
    other_player = api.post("/rooms", json={**body, "player": "ivy", "options": {"players": ["ivy", "b1", "b2"]},
                                             "bots": []})
    rooms = {first.json()["room"], other_id.json()["room"], other_player.json()["room"]}
    assert len(rooms) == 3, rooms
