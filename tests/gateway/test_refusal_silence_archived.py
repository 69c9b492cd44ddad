"""A rival cannot tell that another seat's command to a room archived idle was refused (issue 28, a leftover of
test_refusal_silence.py).

An engine that held the room in memory decided a command for it against that state: a refusal was recorded with
the room left in the archive. An engine that did not (restarted, or a shard's lease moved) brought the room back
into Redis first, accepted or refused (services.room_service ``RoomService.load``), and the archiver moved it again
once it had been idle for the window since: the public /metrics counted both, the engines'
``almanac_room_restore_seconds`` and the archiver's ``almanac_archiver_rooms_total`` and ``_bytes_total``, while the
room's version stood still. Now a room comes back only for a command the rules accept. The same comparison as
test_refusal_silence.py with the room idle in the archive and a fresh engine when alice's command is refused: every
GET operation of /openapi.json and every live channel of /asyncapi, read as the public, as bob and as a spectator,
moves exactly as in a quiet period.
"""

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
    command,
    fillers,
    follow,
    messages,
    moved,
    read_all,
    reads,
    told_apart,
)
from waiting import wait_until

from almanac.services import bootstrap
from almanac.services.gateway.auth import TokenSigner


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
        beats = [client.get(f"alm:engine:{name.decode()}:heartbeat") for name in client.smembers("alm:engines")]
        return any(json.loads(beat).get("consumed_ms", 0) > started_ms for beat in beats if beat)

    assert wait_until(consumed, bool, timeout_s=120), "the engine did not come back"


def test_a_rival_sees_nothing_move_when_a_command_to_an_archived_room_is_refused(served) -> None:
    """Given a realm room of alice and bob moved to the archive after a second idle, and bob, a spectator and the
    public each reading every GET operation of /openapi.json and following every live channel of /asyncapi, when
    alice's ``smelt`` of bronze she does not hold is refused by an engine that holds nothing of the room in memory
    (it was restarted), then every value they read moves exactly as in a quiet period of the same length while the
    room lay in the archive; when alice's next command is accepted the same reads see it; and the room came back
    from the archive once, for the accepted command, as the operator's metrics count it, the refusal among them."""
    url, auditor, client, keys, stack = served
    with httpx.Client(base_url=url, timeout=60) as http, contextlib.ExitStack() as closing:
        room, created, joined = seated_realm_answers(http)
        alice, bob = created["player"], joined["player"]
        assert command(http, room, created["token"], ACCEPTED, "warm-up").status_code == 200
        spectator = TokenSigner(SECRET, 3600).issue(room, "spectator", ruleset="realm@1")
        viewers = {"public": None, "rival": joined["token"], "spectator": spectator}
        urls = list(reads(http.get("/openapi.json").json(), fillers(room, (alice, bob))))
        asyncapi = http.get("/asyncapi").json()
        live = [re.sub(r"\{room\}", room, channel["address"]) for channel in asyncapi["channels"].values()
                if any(server["$ref"].endswith("/gateway") for server in channel.get("servers", []))]
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
        idle_in_the_archive(client, keys, room)  # moved again once idle: the refusal touched it
        time.sleep(PERIOD_S)
        after_refusal = read_all(http, urls, viewers)
        told = told_apart(moved(first, quiet), moved(quiet, after_refusal))
        assert not told, "a rival can tell the refusal from:\n" + "\n".join(
            f"{viewer} GET {read}: {name}: quiet {a!r}, after the refusal {b!r}"
            for (viewer, read, name), (a, b) in sorted(told.items(), key=str))
        said = {key: got for key, socket in feeds.items() if (got := messages(socket, 0.5))}
        assert not said, f"live feeds spoke of the refusal: {said}"

        # The same reads see an accepted command to the archived room: the comparison can fail.
        assert command(http, room, created["token"], ACCEPTED, "accepted").status_code == 200
        time.sleep(PERIOD_S)
        after_accepted = read_all(http, urls, viewers)
        told = told_apart(moved(first, quiet), moved(after_refusal, after_accepted))
        for viewer in viewers:
            assert (viewer, f"/rooms/{room}", "body.version") in told, viewer

        # The room came back once, for the accepted command (the operator's /metrics, as everyone's, count that trip)
        operator = http.get("/metrics", headers={"Authorization": f"Bearer {auditor}"}).text
        restored = sum(float(n) for n in re.findall(r"^almanac_room_restore_seconds_count\{[^}]*\} (\S+)$",
                                                    operator, re.M))
        assert restored == 1, operator
        assert re.search(r'almanac_engine_counter\{engine="[^"]+",field="rejected"\} 1', operator), operator
