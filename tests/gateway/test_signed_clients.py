"""Signed seats through the packaged Python clients (almanac.client, almanac.client.aio) against engine, projector and
gateway processes (docs/client.md, docs/dice.md): a seat made with a PlayerKey signs its join and every command over
the version it saw, re-signs once when the room moved, comes back with its seat key and exported key, and what an
attacker holding the seat's token (the operator can mint one) sends with a borrowed or bent signature is refused
with nothing written."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gateway_stack import client_stack

from almanac.client import ApiError, Client, KeySubstituted, PlayerKey, Seat
from almanac.client.aio import AsyncClient
from almanac.events.signing import command_bytes, signature_valid

SECRET = "signed-clients-test-secret-" + "x" * 32
REFUSED_SMELT = {"kind": "smelt", "ore": "bronze", "amount": 5000}  # no city starts with bronze ore: always refused
MINE = {"kind": "mine", "ore": "stone"}


@pytest.fixture(scope="module")
def live(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(gateway URL, auditor token): engine, projector and a gateway process sharing one secret."""
    with client_stack(redis_url, tmp_path_factory.mktemp("signed-clients"), SECRET) as (url, auditor, _):
        yield url, auditor


def signed_room(client: Client, *, seat_bots: bool = False) -> tuple[Seat, Seat]:
    """ann creates a realm room (scheme 3 by default; with ``seat_bots`` its seats may be left to a bot, recorded
    as room.bot_policy at version 2) and bob joins it, each with a key made by the client."""
    ann = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=PlayerKey.generate(),
                             nonce=secrets.token_hex(32), seat_bots=seat_bots)
    assert ann.room.startswith("realm-") and ann.seen_version == 2 + seat_bots, (ann.room, ann.seen_version)
    bob = client.join(ann.room, "bob", player_key=PlayerKey.generate(), nonce=secrets.token_hex(32))
    return ann, bob


def version_of(client: Client, auditor: str, room: str) -> int:
    return client.events(room, token=auditor)["latest_version"]


def test_a_client_seat_signs_its_join_and_every_command_and_verify_names_it_signing(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        # Given ann and bob seated with keys the client made
        ann, bob = signed_room(client, seat_bots=True)
        # When ann mines, reveals her nonce, bob leaves his seat to a bot and ann ends the room, all through the
        # client (each signed over the version the seat last saw)
        mined = ann.command(MINE)
        assert mined.version == 5 and ann.seen_version == 5
        handed = bob.hand_to_bot()
        assert handed["how"] == "left" and handed["handed"]["version"] == 6
        ended = ann.end("over")
        # Then every one was accepted, and the room verifies with both players' joins and commands signed
        assert ended.version >= 7
        report = client.verification(ann.room, token=auditor)
        assert report["ok"] is True, report
        assert (report["dice_scheme"], report["signing_players"], report["unsigned_players"]) == (3, ["ann", "bob"], [])
        assert (report["signed_joins"], report["unsigned_joins"]) == (["ann", "bob"], [])
        assert report["commands_signed"] >= 3, report


def test_a_seat_reveals_its_nonce_signed(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        nonce = secrets.token_hex(32)
        ann = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=PlayerKey.generate(),
                                 nonce=nonce)
        client.join(ann.room, "bob")
        revealed = ann.reveal_nonce(nonce)
        assert [event["type"] for event in revealed.events] == ["room.nonce_revealed"]
        assert client.verification(ann.room, token=auditor)["ok"] is True


def test_a_stale_seat_signs_again_once_over_the_version_the_room_moved_to(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        # Given ann's seat saw version 2 (her own join), and the room moved on: bob joined and mined
        ann, bob = signed_room(client)
        bob.command(MINE)
        assert (ann.seen_version, version_of(client, auditor, ann.room)) == (2, 4)
        # When ann sends a command the rules refuse: the room, at 4, answers 409 version_moved (a refusal stands only
        # at the version signed), and the client signs it again over 4 and sends it once more with the same id
        with pytest.raises(ApiError) as refused:
            ann.command(REFUSED_SMELT, command_id="smelt-1")
        # Then what comes back is the rules' own refusal at version 4, signed there, with nothing written
        assert (refused.value.status, refused.value.code) == (422, "realm.not_enough_bronze"), refused.value
        assert ann.seen_version == 4 and version_of(client, auditor, ann.room) == 4
        report = client.verification(ann.room, token=auditor)
        assert report["ok"] and report["refusals_signed"] == 1, report
        # and a command the rules accept at the newer version is decided there, no retry needed
        bob.command(MINE)
        assert ann.command(MINE).version == 6 and ann.seen_version == 6


class MovingTransport(httpx.HTTPTransport):
    """The real connection to the gateway; after the first 409 version_moved it passes on, a real player moves the
    room before the client's resend arrives (a busy room), so the resend meets a moved room too."""

    def __init__(self, move: Any) -> None:
        super().__init__()
        self.move, self.moved, self.bodies = move, False, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/commands"):
            self.bodies.append(json.loads(request.content))
        response = super().handle_request(request)
        if response.status_code == 409 and not self.moved:
            response.read()
            self.moved = True
            self.move()
        return response


def test_a_command_that_meets_a_moved_room_twice_is_raised_never_dropped(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        ann, bob = signed_room(client)
        bob.command(MINE)
        transport = MovingTransport(lambda: bob.command(MINE))
        with Client(url, transport=transport) as busy:
            stale = busy.seat(ann.room, "ann", ann.token, player_key=ann.player_key)
            stale.seen_version = ann.seen_version  # 2: the room is at 4
            # When her refused command meets the room moved (4), and moved again (5) when signed over 4
            with pytest.raises(ApiError) as raised:
                stale.command(REFUSED_SMELT, command_id="smelt-twice")
        # Then the second move is raised to the caller, with the version to sign over; the two sends used one id
        # and signed 2 then 4
        assert (raised.value.status, raised.value.code, raised.value.allowed) == (409, "version_moved", 5)
        assert [(body["command_id"], body["seen_version"]) for body in transport.bodies] == [
            ("smelt-twice", 2), ("smelt-twice", 4)]
        # and nothing was recorded under that id (no outcome), so the caller may send it again, decided once
        with pytest.raises(ApiError) as unknown:
            ann.outcome("smelt-twice")
        assert unknown.value.code == "outcome_unknown"
        assert version_of(client, auditor, ann.room) == 5


def test_a_seat_comes_back_with_its_seat_key_and_its_exported_player_key(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        ann, _ = signed_room(client)
        seat_key, exported = ann.seat_key, ann.player_key.export()
        assert seat_key and PlayerKey.import_key(exported).public_key == ann.player_key.public_key
    # When ann, on another machine, takes her seat back with the seat key and the key exported as the console does
    with Client(url) as elsewhere:
        back = elsewhere.reclaim_seat(ann.room, "ann", seat_key, player_key=PlayerKey.import_key(exported))
        # Then her new seat signs (over the version its answer's checkpoint shows) and is accepted
        assert back.seen_version == 3
        assert back.command(MINE).version == 4
        # while the seat taken back without the key is only a token: its commands are refused, nothing written
        bare = elsewhere.reclaim_seat(ann.room, "ann", back.seat_key)
        with pytest.raises(ApiError) as refused:
            bare.command(MINE)
        assert (refused.value.status, refused.value.code) == (422, "signature_required")
        assert version_of(elsewhere, auditor, ann.room) == 4


def test_the_key_formats_are_the_consoles_and_the_clis(tmp_path) -> None:
    # The console keeps base64 PKCS#8 (crypto.subtle.exportKey("pkcs8")), `almanac player-key` 64 hex digits
    key = PlayerKey.generate()
    assert len(__import__("base64").b64decode(key.export())) == 48
    raw = key._key.private_bytes_raw().hex()
    assert PlayerKey.import_key(raw).public_key == key.public_key
    assert PlayerKey.import_key(key.export()).export() == key.export()
    for bad in ("", "not a key", "ab" * 31, "MCowBQYDK2VwAyEA" + "A" * 43 + "="):
        with pytest.raises(ValueError):
            PlayerKey.import_key(bad)
    assert key.export() not in repr(key)


def test_a_join_answered_with_another_key_is_raised_to_the_player(live: tuple[str, str]) -> None:
    # The operator's own key in ann's join answer (signed by itself) is what the client checks for: here the
    # client is handed an answer registering another key, as a substituting operator would give
    url, _ = live
    with Client(url) as client:
        mine, theirs = PlayerKey.generate(), PlayerKey.generate()
        ann = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=theirs)
        seat = client.seat(ann.room, "ann", ann.token, player_key=mine)
        seat.answer = ann.answer
        with pytest.raises(KeySubstituted) as substituted:
            seat.checked_join()
        assert substituted.value.registered == theirs.public_key and substituted.value.seat is seat


def _post(client: Client, seat: Seat, body: dict[str, Any]) -> httpx.Response:
    return client.http.post(f"/rooms/{seat.room}/commands", json=body, headers={"Authorization": f"Bearer {seat.token}"})


def test_an_attacker_with_the_seats_token_cannot_borrow_or_bend_a_signature(live: tuple[str, str]) -> None:
    url, auditor = live
    with Client(url) as client:
        ann, bob = signed_room(client)
        accepted = ann.command(MINE, command_id="mine-1")
        assert accepted.version == 4
        before = client.events(ann.room, token=auditor)["events"]
        mallory = PlayerKey.generate()
        # ann's own body of mine-1, as her client sent it (signed over version 2, her join: Ed25519 is deterministic)
        honest = {"command": MINE, "command_id": "mine-1", "seen_version": 2,
                  "signature": ann.player_key.sign_command(ann.room, "ann", "mine-1", MINE, 2)}
        attacks = {
            # a command for ann's seat signed by another key, over the right bytes
            "another key": {"command": MINE, "command_id": "m-mallory", "seen_version": 4,
                            "signature": mallory.sign_command(ann.room, "ann", "m-mallory", MINE, 4)},
            # ann's accepted signature replayed under another command id (a second roll): as signed, over version 2
            # (the engine decides it against 4 only as a command that would stand there: it does not) ...
            "replayed under another id": {**honest, "command_id": "mine-again"},
            # ... and re-stamped with the room's version
            "replayed, version re-stamped": {**honest, "command_id": "mine-again", "seen_version": 4},
            # ann's signature over an older version sent as if over the newer one (a refusal moved elsewhere)
            "older seen version": {"command": REFUSED_SMELT, "command_id": "smelt-old", "seen_version": 4,
                                   "signature": ann.player_key.sign_command(ann.room, "ann", "smelt-old",
                                                                            REFUSED_SMELT, 3)},
            # ann's signature of one command on another body
            "another body": {"command": {"kind": "mine", "ore": "gold"}, "command_id": "mine-2", "seen_version": 4,
                             "signature": ann.player_key.sign_command(ann.room, "ann", "mine-2", MINE, 4)},
        }
        answers = {name: _post(client, ann, body) for name, body in attacks.items()}
        # Then each is refused as not ann's signature, naming the field
        assert {name: (a.status_code, a.json()["code"], a.json()["field"]) for name, a in answers.items()} == {
            name: (422, "signature_invalid", "signature") for name in attacks}
        # with nothing written: not one more event, no refusal kept under any of those ids (ann may still send her
        # own command under one: it is decided, not answered with the attacker's refusal)
        assert client.events(ann.room, token=auditor)["events"] == before
        for body in attacks.values():
            with pytest.raises(ApiError) as unknown:
                ann.outcome(body["command_id"])
            assert unknown.value.code == "outcome_unknown", body
        assert ann.command(MINE, command_id="mine-again").version == 5
        # and the honest signature over its older version, replayed unchanged once the room moved, is the old
        # command again (answered as the duplicate it is), never a second decision
        bob.command(MINE)
        again = _post(client, ann, honest)
        assert again.status_code == 200 and again.json()["duplicate"] and again.json()["version"] == 4, again.text
        # a refused command's signature over the version it was refused at, replayed after the room moved, is not
        # decided again at the new version: 409 version_moved, nothing written
        old = {"command": REFUSED_SMELT, "command_id": "smelt-3", "seen_version": 3,
               "signature": ann.player_key.sign_command(ann.room, "ann", "smelt-3", REFUSED_SMELT, 3)}
        moved = _post(client, ann, old)
        assert (moved.status_code, moved.json()["code"], moved.json()["allowed"]) == (409, "version_moved", 6)
        assert len(client.events(ann.room, token=auditor)["events"]) == len(before) + 2  # ann's and bob's mines
        assert client.verification(ann.room, token=auditor)["ok"] is True


def test_a_signed_command_replayed_in_another_room_of_the_same_key_is_refused(live: tuple[str, str]) -> None:
    # Given ann's one key (a key file she reuses) registered in two rooms, and her mine accepted in the first
    url, auditor = live
    with Client(url) as client:
        key = PlayerKey.generate()
        first = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=key,
                                   nonce=secrets.token_hex(32))
        client.join(first.room, "bob", player_key=PlayerKey.generate(), nonce=secrets.token_hex(32))
        second = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=key,
                                    nonce=secrets.token_hex(32))
        client.join(second.room, "bob", player_key=PlayerKey.generate(), nonce=secrets.token_hex(32))
        assert first.command(MINE, command_id="mine-1").version == 4
        # her body of mine-1 as her client sent it (signed over version 2, her join: Ed25519 is deterministic)
        honest = {"command": MINE, "command_id": "mine-1", "seen_version": 2,
                  "signature": key.sign_command(first.room, "ann", "mine-1", MINE, 2)}
        before = client.events(second.room, token=auditor)["events"]
        # When whoever holds ann's token for the second room (the operator can mint it) posts her signed command
        # there unchanged, and re-stamped with the second room's version
        answers = [_post(client, second, body) for body in (honest, {**honest, "seen_version": len(before)})]
        # Then each is refused as not ann's signature (the room is in the signed bytes), with nothing written
        assert [(a.status_code, a.json()["code"]) for a in answers] == [(422, "signature_invalid")] * 2
        assert client.events(second.room, token=auditor)["events"] == before
        with pytest.raises(ApiError) as unknown:
            second.outcome("mine-1")
        assert unknown.value.code == "outcome_unknown"


def test_the_client_signs_the_bytes_events_signing_checks() -> None:
    # One rule, events/signing.py: the client's signature verifies against it (keys sorted, non-ASCII as UTF-8)
    key = PlayerKey.generate()
    body = {"kind": "mine", "ore": "stone", "note": "bjørn", "a": {"z": 1, "b": [2, "ü"]}}
    signature = key.sign_command("r-1", "ann", "c-1", body, 7)
    assert signature_valid(key.public_key, signature, command_bytes("r-1", "ann", "r-1:ann:c-1", body, 7))
    assert not signature_valid(key.public_key, signature, command_bytes("r-1", "ann", "r-1:ann:c-1", body, 6))


def test_the_async_client_signs_as_the_sync_one(live: tuple[str, str]) -> None:
    url, auditor = live

    async def story() -> tuple[str, int, int]:
        async with AsyncClient(url) as client:
            key = PlayerKey.generate()
            ann = await client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=key,
                                           nonce=secrets.token_hex(32))
            bob = await client.join(ann.room, "bob", player_key=PlayerKey.generate())
            await bob.command(MINE)  # ann saw 2, the room is at 4
            try:
                await ann.command(REFUSED_SMELT)
            except ApiError as error:
                refused = error.code
            mined = await ann.command(MINE)
            seen = ann.seen_version
            await ann.end("over")
            return ann.room, mined.version, seen, refused

    room, version, seen, refused = asyncio.run(story())
    assert (version, seen, refused) == (5, 5, "realm.not_enough_bronze")
    with Client(url) as client:
        report = client.verification(room, token=auditor)
    assert report["ok"] and report["signing_players"] == ["ann", "bob"] and report["refusals_signed"] == 1, report


def test_the_lean_command_sender_sends_prepared_signed_and_unsigned_commands_and_hands_back_every_answer(
        live: tuple[str, str]) -> None:
    """Given a realm room whose seats sign (made by the async client) and the client's lean sender (the load
    generator's path in ``almanac bench e2e`` and ``bench signing``), when it sends prepared bodies, then a body signed
    by ``signed_command_body`` over the version the seat saw is accepted as the Seat's own, and a refusal (by the
    rules, or an unsigned body from a signed seat) comes back as its status and ``{code}`` body, never raised."""
    from almanac.client.command_sender import CommandSender  # noqa: PLC0415

    url, _ = live

    async def story() -> list[tuple[int, Any]]:
        async with AsyncClient(url) as client:
            key, bob_key = PlayerKey.generate(), PlayerKey.generate()
            ann = await client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=key)
            bob = await client.join(ann.room, "bob", player_key=bob_key)
            sender = CommandSender([url], connections=2)
            try:
                sent = []
                for seat, seat_key, body in ((ann, key, MINE), (ann, key, REFUSED_SMELT), (bob, None, MINE),
                                             (bob, bob_key, MINE)):
                    command_id = secrets.token_urlsafe(24)
                    prepared = (CommandSender.body(body, command_id) if seat_key is None else
                                CommandSender.signed_command_body(seat_key, seat.room, seat.player, body, command_id,
                                                                  max(ann.seen_version, bob.seen_version)))
                    status, payload, _ = await sender.command(seat.room, prepared, seat.token)
                    answer = json.loads(payload)
                    if status == 200:
                        ann.seen_version = bob.seen_version = answer["version"]
                    sent.append((status, answer.get("code") if status != 200 else answer["version"]))
            finally:
                await sender.close()
            return sent

    (mined, mined_version), (smelt, smelt_code), (unsigned, _), (bob_mined, bob_version) = asyncio.run(story())
    assert (mined, smelt, smelt_code, bob_mined) == (200, 422, "realm.not_enough_bronze", 200)
    assert 400 <= unsigned < 500 and bob_version > mined_version
