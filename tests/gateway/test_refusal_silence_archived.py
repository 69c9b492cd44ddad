"""A rival cannot tell that another seat's command to a room archived idle, or about to be, was refused (issue 28)."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from gateway_stack import Stack, client_stack, gateway_settings, seated_realm_answers
from test_refusal_silence import (
    ACCEPTED,
    PERIOD_S,
    REFUSED,
    SECRET,
    assert_nothing_told,
    command,
    follow,
    messages,
    read_all,
    told_by_an_accepted_command,
    watched_room,
)
from waiting import wait_until

from almanac.services import bootstrap
from almanac.storage.keys import engine_heartbeat_key, engines_key


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, redis.Redis, Any,
                                                                                    Stack]]:
    """A real gateway, engine, projector and an archiver that moves a room idle for a second: the gateway's URL, an
    auditor's token, a Redis client, the keys and the stack."""
    with client_stack(redis_url, tmp_path_factory.mktemp("refusal-silence-archived"), SECRET) as (url, auditor, stack):
        stack.env.update(ALMANAC_ARCHIVE_IDLE_AFTER="1", ALMANAC_ARCHIVER_INTERVAL_S="0.2")
        stack.start("archiver")
        client = redis.Redis.from_url(redis_url)
        try:
            yield url, auditor, client, bootstrap.process_keys(gateway_settings(stack).shard_count), stack
        finally:
            client.close()


def idle_in_the_archive(client: redis.Redis, keys: Any, room: str) -> None:
    """Wait until the archiver has moved ``room`` (its pointer, the commit point) and deleted its keys from Redis."""
    assert wait_until(lambda: client.hget(keys.pointer_bucket(room), room), bool, timeout_s=30), "not archived"
    assert not wait_until(lambda: client.exists(keys.events(room)), lambda n: not n, timeout_s=30), "keys stayed"


def fresh_engine(stack: Stack, client: redis.Redis) -> None:
    """The engine process started again (a restart, or a shard's lease taken by another engine): it holds no room in
    its cache, so its next command for a room in the archive reads the room's pointer first."""
    stack.processes["engine"].terminate()
    stack.processes["engine"].wait(timeout=30)
    started_ms = time.time() * 1000
    stack.start("engine")

    def consumed() -> bool:
        beats = [client.get(engine_heartbeat_key(name.decode())) for name in client.smembers(engines_key())]
        return any(json.loads(beat).get("consumed_ms", 0) > started_ms for beat in beats if beat)

    assert wait_until(consumed, bool, timeout_s=120), "the engine did not come back"


def test_a_rival_sees_nothing_move_when_a_command_to_an_archived_room_is_refused(served) -> None:
    """Given a realm room of alice and bob moved to the archive after a second idle, and bob, a spectator and the
    public each reading every GET operation of /openapi.json and following every live channel of /asyncapi, when
    alice's ``smelt`` of bronze she does not hold is refused by an engine that holds nothing of the room in memory
    (it was restarted), then every value they read moves exactly as in a quiet period of the same length while the
    room lay in the archive; when alice's next command is accepted the same reads see it; and the room came back
    from the archive once, for the accepted command, as the operator's metrics count it, the refusal among them.

    A leftover of test_refusal_silence.py: an engine that did not hold the room (restarted, or a shard's lease moved)
    used to bring it back into Redis first, accepted or refused, and the archiver moved it again once idle: the
    public /metrics counted both (the engines' ``almanac_room_restore_seconds``, the archiver's
    ``almanac_archiver_rooms_total`` and ``_bytes_total``) while the room's version stood still. Now a refused
    command is decided and recorded against the archived state (services.room_service ``RoomService.handle``) and
    the room comes back only for one the rules accept."""
    url, auditor, client, keys, stack = served
    with httpx.Client(base_url=url, timeout=60) as http, contextlib.ExitStack() as closing:
        room, created, viewers, urls, live = watched_room(http)
        latest = http.get(f"/rooms/{room}").json()["version"]
        idle_in_the_archive(client, keys, room)
        fresh_engine(stack, client)
        opened = {(address, viewer): closing.enter_context(follow(url, f"{address}?from_version={latest + 1}", token))
                  for address in live for viewer, token in viewers.items()}
        time.sleep(PERIOD_S)  # the move's figures reach every surface; the first reads make their series
        read_all(http, urls, viewers)
        feeds = {key: socket for key, socket in opened.items()
                 if not any(isinstance(got, tuple) for got in messages(socket, 0.2))}

        first = read_all(http, urls, viewers)
        time.sleep(PERIOD_S)
        quiet = read_all(http, urls, viewers)
        assert client.hget(keys.pointer_bucket(room), room), "the room left the archive in the quiet period"
        refused = command(http, room, created["token"], REFUSED, "refused")
        assert refused.status_code == 422 and refused.json()["code"] == "realm.not_enough_bronze", refused.text
        idle_in_the_archive(client, keys, room)  # still there: the refusal was decided against the archived state
        time.sleep(PERIOD_S)
        after_refusal = read_all(http, urls, viewers)
        assert_nothing_told(first, quiet, after_refusal, feeds)

        # The same reads see an accepted command to the archived room: the comparison can fail.
        told = told_by_an_accepted_command(http, room, created["token"], urls, viewers, first, quiet, after_refusal)
        for viewer in viewers:
            assert (viewer, f"/rooms/{room}", "body.version") in told, viewer

        # The room came back once, for the accepted command (the operator's /metrics, as everyone's, count that trip)
        operator = http.get("/metrics", headers={"Authorization": f"Bearer {auditor}"}).text
        restored = sum(float(n) for n in re.findall(r"^almanac_room_restore_seconds_count\{[^}]*\} (\S+)$",
                                                    operator, re.M))
        assert restored == 1, operator
        assert re.search(r'almanac_engine_counter\{engine="[^"]+",field="rejected"\} 1', operator), operator


def test_refusals_to_a_live_room_do_not_put_off_its_idle_move(served) -> None:
    """Given a realm room of alice and bob whose last accepted command is a moment old, when alice's commands keep
    being refused (one every quarter second, for four times the archiver's one-second window), then the archiver
    moves the room while they go on, as it would a quiet room, and the public reads no archive bytes. Each refusal
    used to count as a touch: the move waited for the refusals to stop, so the public /metrics'
    ``almanac_archiver_rooms_total`` told a rival when they did, and ``_bytes_total`` grew with their records."""
    url, _, client, keys, _ = served
    with httpx.Client(base_url=url, timeout=60) as http:
        room, created, _ = seated_realm_answers(http)
        assert command(http, room, created["token"], ACCEPTED, "live-accepted").status_code == 200
        refusing_until, sent, moved_meanwhile = time.monotonic() + 4.0, 0, False
        while time.monotonic() < refusing_until:
            sent += 1
            refused = command(http, room, created["token"], REFUSED, f"live-refused-{sent}")
            assert refused.status_code == 422 and refused.json()["code"] == "realm.not_enough_bronze", refused.text
            # read right after a refusal: a move the refusals put off could only come a second after the last one
            moved_meanwhile |= bool(client.hget(keys.pointer_bucket(room), room))
            time.sleep(0.25)
        assert moved_meanwhile, "the refusals put off the room's idle move"
        public = http.get("/metrics").text
        assert "almanac_archiver_rooms_total" in public and "almanac_archiver_bytes_total" not in public
