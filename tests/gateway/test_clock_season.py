"""A realm room whose players stop playing ends its seasons by itself, on time, through a real gateway and engine."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import httpx
import pytest
from gateway_stack import engine_and_gateway
from waiting import CLOCK_LATE_MS

from almanac.client import Client, PlayerKey

TIMEOUT_MS = 1_500


@pytest.fixture(scope="module")
def url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One engine and gateway for the module: each story plays a room of its own, and neither changes a setting,
    stops a process or flushes Redis, so a second stack would only cost another two process starts."""
    with engine_and_gateway(redis_url, tmp_path_factory.mktemp("clock-season")) as (running, _):
        yield running


def room_events(http: httpx.Client, room: str, token: str) -> list[dict]:
    answer = http.get(f"/rooms/{room}/events", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()["events"]


def season_endings(http: httpx.Client, room: str, token: str) -> list[dict]:
    return [event for event in room_events(http, room, token) if event["type"] == "realm.season_ended"]


def on_time(events: list[dict], endings: list[dict]) -> None:
    """Each season of ``endings`` ended on time: never before its timeout, and within CLOCK_LATE_MS after it (the
    clock's measured lateness, with room to spare: tests/waiting.py). The first began when the room was created."""
    assert events[0]["type"] == "room.created", events[0]
    started = events[0]["server_time_ms"]
    for ending in endings:
        lateness_ms = ending["event"]["at_ms"] - (started + TIMEOUT_MS)
        assert 0 <= lateness_ms <= CLOCK_LATE_MS, (lateness_ms, ending)
        started = ending["event"]["at_ms"]


def test_a_realm_whose_players_stop_playing_ends_its_year_by_itself(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        # Given a one-year realm of two seated players with a season timeout of 1.5 s, and nobody moving
        alice, bob = f"alice-{secrets.token_hex(2)}", f"bob-{secrets.token_hex(2)}"
        created = http.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {
            "players": [alice, bob], "years": 1, "season_timeout_ms": TIMEOUT_MS}})
        assert created.status_code == 201, created.text
        room, token = created.json()["room"], created.json()["token"]
        assert http.post(f"/rooms/{room}/join", json={"player": bob}).status_code == 200
        # When the clock alone moves the room (four seasons: the whole year)
        deadline = time.monotonic() + 60
        endings: list[dict] = []
        while time.monotonic() < deadline and len(endings) < 4:
            time.sleep(0.25)
            endings = season_endings(http, room, token)
        # Then each season ended once, on time (within CLOCK_LATE_MS after its timeout, never before), forced as
        # the first seated player
        assert [e["event"]["season_index"] for e in endings] == [0, 1, 2, 3], endings
        on_time(room_events(http, room, token), endings)
        assert {e["event"]["forced_by"] for e in endings} == {alice}
        # and the room is over, and its log verifies: the clock's commands are decided again like any other
        summary = http.get(f"/rooms/{room}").json()
        assert summary["over"] is True, summary
        verified = http.get(f"/rooms/{room}/verification", headers={"Authorization": f"Bearer {token}"}).json()
        assert verified["ok"] is True, verified
        # and nothing more happens after the end (no deadline is left in an ended room)
        time.sleep(2 * TIMEOUT_MS / 1000)
        assert len(season_endings(http, room, token)) == 4


def test_a_realm_whose_seats_all_sign_ends_its_seasons_by_itself(url: str) -> None:
    with Client(url) as client:
        # Given a one-year realm whose two seated players both sign their commands (as the console does by
        # default), with a season timeout of 1.5 s, and nobody moving
        alice, bob = f"alice-{secrets.token_hex(2)}", f"bob-{secrets.token_hex(2)}"
        seat = client.create_room("realm", alice, options={"players": [alice, bob], "years": 1,
                                                            "season_timeout_ms": TIMEOUT_MS},
                                  player_key=PlayerKey.generate(), nonce=secrets.token_hex(32))
        client.join(seat.room, bob, player_key=PlayerKey.generate(), nonce=secrets.token_hex(32))
        # When the clock alone moves the room, sending each season's timeout unsigned as the first seated player
        deadline = time.monotonic() + 60
        endings: list[dict] = []
        while time.monotonic() < deadline and len(endings) < 2:
            time.sleep(0.25)
            endings = [e for e in seat.events()["events"] if e["type"] == "realm.season_ended"]
        # Then the seasons end by themselves, each forced as alice once its timeout passed, on time
        assert [e["event"]["season_index"] for e in endings[:2]] == [0, 1], endings
        assert {e["event"]["forced_by"] for e in endings} == {alice}
        on_time(seat.events()["events"], endings)
        # and the log verifies, naming those commands the clock's: never signed by alice, never forged
        verified = client.verification(seat.room, token=seat.token)
        assert verified["ok"] is True, verified
        assert verified["signing_players"] == sorted([alice, bob])
        assert verified["commands_by_clock"] >= 2 and verified["commands_signed"] == 0, verified
        assert any("sent by the clock for a due deadline" in note for note in verified["notes"]), verified["notes"]
