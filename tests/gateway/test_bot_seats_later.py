"""POST /rooms/{room}/bots: a seat handed to a bot after the room exists, by whom it may be, and every refusal."""

from __future__ import annotations

import asyncio
import secrets

from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings, redis_commands_seen
from test_bot_seats import KEYS, _seats, auth, bots_rounds

from almanac.services.gateway import create_app


def realm_room(api: TestClient, **create: object) -> tuple[str, str, str, str, str]:
    """A realm room of alice's for alice, bob and carol, created with seat bots (``create`` adds to or overrides the
    request); alice and carol seated, bob's seat empty."""
    alice, bob, carol = (f"{name}-{secrets.token_hex(3)}" for name in ("alice", "bob", "carol"))
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "seat_bots": True,
                                       "options": {"players": [alice, bob, carol], "years": 1}, **create})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    joined = api.post(f"/rooms/{room}/join", json={"player": carol})
    assert joined.status_code == 200, joined.text
    return room, alice, created.json()["token"], carol, joined.json()["token"]


def test_the_rooms_creator_hands_an_empty_seat_to_a_bot_which_takes_and_plays_it(api: TestClient,
                                                                                  stack: Stack) -> None:
    room, alice, alice_token, carol, carol_token = realm_room(api)
    bob = [p for p in api.get(f"/rooms/{room}").json()["seats"] if p not in (alice, carol)][0]
    # When carol (a player, not the creator) asks for bob's empty seat to go to a bot, she is refused
    refused = api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": bob})
    assert (refused.status_code, refused.json()["code"]) == (403, "not_room_owner")
    # When alice, the room's creator, asks
    handed = api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": bob})
    # Then the seat is a bot seat, and asking again adds nothing
    assert handed.status_code == 200, handed.text
    assert {k: handed.json()[k] for k in ("room", "seat", "how", "added")} == {"room": room, "seat": bob,
                                                                            "how": "empty", "added": True}
    assert (room, bob) in asyncio.run(_seats(stack.redis_url))
    again = api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": bob})
    assert again.status_code == 200 and again.json()["added"] is False

    def bob_joined() -> bool:
        events = api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"]
        return any(e["type"] == "room.player_joined" and e["player"] == bob for e in events)

    # and the bots service takes the seat under the bot's own join
    asyncio.run(bots_rounds(stack, bob_joined))
    taken = api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": bob})
    assert taken.status_code == 200 and taken.json()["how"] == "already"


def test_a_player_leaves_their_own_seat_to_a_bot_and_every_player_sees_it(api: TestClient, stack: Stack) -> None:
    room, alice, alice_token, carol, carol_token = realm_room(api)
    # When alice (the creator) asks for carol's seat, which carol holds, she is refused: only carol can leave it
    held = api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": carol})
    assert (held.status_code, held.json()["code"], held.json()["field"]) == (409, "seat_held", "seat")
    # When carol leaves her own seat to a bot
    left = api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": carol})
    # Then the room decided it as an event, which alice sees in the room's events
    assert left.status_code == 200, left.text
    assert (left.json()["how"], left.json()["added"]) == ("left", True)
    assert [e["type"] for e in left.json()["handed"]["events"]] == ["room.seat_to_bot"]
    seen = api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"]
    handover = [e for e in seen if e["type"] == "room.seat_to_bot"]
    assert [(e["player"], e["event"]["player"], e["event"]["reason"]) for e in handover] == [(carol, carol, "left")]
    assert (room, carol) in asyncio.run(_seats(stack.redis_url))
    # and leaving it again is answered as a bot seat already
    again = api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": carol})
    assert again.status_code == 200 and again.json()["how"] == "already"


def test_a_room_created_without_seat_bots_refuses_a_player_leaving_their_seat_and_records_nothing(
        api: TestClient, stack: Stack) -> None:
    # Given a realm room created as before seat bots existed (no seat_bots, no bot_after_missed)
    room, alice, alice_token, carol, carol_token = realm_room(api, seat_bots=False)
    assert api.get(f"/rooms/{room}").json()["bot_policy"] is None
    before = api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"]
    # When carol leaves her own seat to a bot
    left = api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": carol})
    # Then she is refused, naming the seat, and nothing is written: no event, no bot seat
    assert (left.status_code, left.json()["code"], left.json()["field"]) == (422, "no_bot_policy", "seat"), left.text
    assert api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"] == before
    assert (room, carol) not in asyncio.run(_seats(stack.redis_url))
    # and the room itself refuses the command too, should it reach it (POST /commands points at this route)
    direct = api.post(f"/rooms/{room}/commands", headers=auth(carol_token), json={"command": {"kind": "hand_to_bot"}})
    assert direct.status_code == 422, direct.text
    assert api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"] == before


def test_a_claim_room_created_with_seat_bots_lets_its_player_leave_the_seat(api: TestClient, stack: Stack) -> None:
    # Given a claim room (no deadlines) whose creator asked for seat bots
    alice = f"alice-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "claim", "player": alice, "seat_bots": True})
    assert created.status_code == 201, created.text
    room, token = created.json()["room"], created.json()["token"]
    # Then the room says so: players may leave, missed deadlines never hand a seat over
    assert api.get(f"/rooms/{room}").json()["bot_policy"] == {"after_missed": 0}
    # When alice leaves her seat to a bot, then the room hands it over
    left = api.post(f"/rooms/{room}/bots", headers=auth(token), json={"seat": alice})
    assert (left.status_code, left.json()["how"]) == (200, "left"), left.text
    assert [e["type"] for e in left.json()["handed"]["events"]] == ["room.seat_to_bot"]
    assert (room, alice) in asyncio.run(_seats(stack.redis_url))


def test_every_bad_request_for_a_bot_seat_is_a_4xx_naming_its_field(api: TestClient, auditor: str) -> None:
    room, alice, alice_token, _, _ = realm_room(api)
    other, _, other_token, _, _ = realm_room(api)
    cases = [
        (room, None, {"seat": "x"}, 401, None),
        (room, other_token, {"seat": "x"}, 403, "room"),
        (room, alice_token, {"seat": "nobody-here"}, 422, "seat"),
        (room, alice_token, {"seat": "bad name!"}, 422, "seat"),
        (room, alice_token, {"seat": alice, "extra": 1}, 422, "extra"),
        (room, alice_token, {}, 422, "seat"),
        ("no-such-room", auditor, {"seat": alice}, 404, "room"),
    ]
    for target, token, body, status, field in cases:
        answer = api.post(f"/rooms/{target}/bots", headers=auth(token) if token else {}, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert {"code", "message"} <= set(answer.json()), answer.text
        if field is not None:
            assert answer.json().get("field") == field, answer.text
    empty = api.post(f"/rooms/{room}/bots", headers={**auth(alice_token), "content-type": "application/json"})
    assert empty.status_code == 400
    # A claim room has no deadlines: bot_after_missed is refused at create, naming the option
    claim = api.post("/rooms", json={"ruleset": "claim", "player": alice, "bot_after_missed": 3})
    assert (claim.status_code, claim.json()["field"]) == (422, "bot_after_missed"), claim.text
    bounds = api.post("/rooms", json={"ruleset": "realm", "player": alice, "bot_after_missed": 0})
    assert (bounds.status_code, bounds.json()["field"]) == (422, "bot_after_missed"), bounds.text
    not_a_flag = api.post("/rooms", json={"ruleset": "claim", "player": alice, "seat_bots": "yes"})
    assert (not_a_flag.status_code, not_a_flag.json()["field"]) == (422, "seat_bots"), not_a_flag.text
    # An ended room hands no seat to a bot
    assert api.post(f"/rooms/{room}/end", headers=auth(alice_token), json={}).status_code == 200
    ended = api.post(f"/rooms/{room}/bots", headers=auth(auditor), json={"seat": alice})
    assert (ended.status_code, ended.json()["code"]) == (409, "room_ended")


def test_an_auditor_hands_a_seat_only_while_the_deployment_holds_fewer_bot_seats_than_its_bound(
        stack: Stack) -> None:
    held = len(asyncio.run(_seats(stack.redis_url)))
    # Given a deployment whose bots hold every seat they may
    with TestClient(create_app(gateway_settings(stack, max_bot_seats=held))) as api:
        from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR  # noqa: PLC0415

        auditor = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        room, alice, _, carol, _ = realm_room(api)
        bob = [p for p in api.get(f"/rooms/{room}").json()["seats"] if p not in (alice, carol)][0]
        # When an auditor hands bob's empty seat to a bot
        full = api.post(f"/rooms/{room}/bots", headers=auth(auditor), json={"seat": bob})
        # Then it is refused before anything is written
        assert (full.status_code, full.json()["code"], full.json()["field"]) == (429, "bot_seats_full", "seat")
    assert len(asyncio.run(_seats(stack.redis_url))) == held
    # and with room for one more, the auditor's request is granted
    with TestClient(create_app(gateway_settings(stack, max_bot_seats=held + 1))) as api:
        granted = api.post(f"/rooms/{room}/bots", headers=auth(auditor), json={"seat": bob})
        assert granted.status_code == 200 and granted.json()["how"] == "empty", granted.text


def test_a_player_asking_for_another_players_seat_is_answered_from_the_state_without_reading_the_log(
        api: TestClient, stack: Stack) -> None:
    # Given alice's realm room whose empty seat (bob's) she handed to a bot, which took it with the bot's own join
    room, alice, alice_token, carol, carol_token = realm_room(api)
    bob = [p for p in api.get(f"/rooms/{room}").json()["seats"] if p not in (alice, carol)][0]
    assert api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": bob}).json()["how"] == "empty"

    def bob_joined() -> bool:
        events = api.get(f"/rooms/{room}/events", headers=auth(alice_token)).json()["events"]
        return any(e["type"] == "room.player_joined" and e["player"] == bob for e in events)

    asyncio.run(bots_rounds(stack, bob_joined))
    whole_log = f"XRANGE {KEYS.events(room)} 1-0 + "  # a read of the room's log from its first event on
    # When alice, the room's creator, asks for bob's seat, the log is read to tell the bot's join from a person's
    with redis_commands_seen(stack.redis_url) as seen:
        owners = api.post(f"/rooms/{room}/bots", headers=auth(alice_token), json={"seat": bob})
    assert (owners.status_code, owners.json()["how"]) == (200, "already"), owners.text
    assert [c for c in seen if c.startswith(whole_log)], "the creator's ask did not read the log"
    # When carol, a player of the room but not its creator, asks for bob's seat, again and again
    for _ in range(3):
        with redis_commands_seen(stack.redis_url) as seen:
            refused = api.post(f"/rooms/{room}/bots", headers=auth(carol_token), json={"seat": bob})
        # Then she is answered from the room's state alone: the seat is joined, so held (a bot's as any other's)
        answer = (refused.status_code, refused.json().get("code"), refused.json().get("field"))
        assert answer == (409, "seat_held", "seat"), refused.text
        # and no ask of hers read the room's log: a read any player could repeat at will
        assert [c for c in seen if c.startswith(whole_log)] == []
    # and the bot seat is unchanged by her asks
    assert (room, bob) in asyncio.run(_seats(stack.redis_url))
