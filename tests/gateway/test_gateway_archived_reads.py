"""Every HTTP query (and the console's reads) answers the same for an archived room as for it live: given an
ended realm room played through the real engine and projector, when the archiver moves it out of Redis, then
each read route (the listings too) gives the same answer as before, a command is refused 4xx, and the leaderboard still counts it."""

from __future__ import annotations

import asyncio

import redis
from fastapi.testclient import TestClient
from gateway_stack import gateway_settings
from test_gateway_forensics import auth, realm_room, wait_until

from almanac.services import bootstrap
from almanac.storage import archive_index
from almanac.storage.archive import archive_room


def reads(api: TestClient, room: str, alice: str, tokens: dict[str, str], auditor: str) -> dict[str, object]:
    """The answer of every read route of one room, as an auditor and as a player (the console's reads too)."""
    routes = {
        "room": (f"/rooms/{room}", None), "state": (f"/rooms/{room}/state", auditor),
        "at-3": (f"/rooms/{room}/at/3", auditor), "events": (f"/rooms/{room}/events", auditor),
        "events-player": (f"/rooms/{room}/events", tokens[alice]), "rejections": (f"/rooms/{room}/rejections", auditor),
        "view": (f"/rooms/{room}/view", tokens[alice]), "scores": (f"/rooms/{room}/scores", None),
        "resources": (f"/rooms/{room}/resources", auditor), "series": (f"/rooms/{room}/series", None),
        "verification": (f"/rooms/{room}/verification", auditor),
        "explain": (f"/rooms/{room}/explain?path=actions_used.{alice}", auditor),
        "bisect": (f"/rooms/{room}/bisect?where=actions_used.{alice}%20%3E%3D%202", auditor),
        "dispute": (f"/rooms/{room}/dispute?from=2&to=5", auditor),
        "leaderboard": ("/leaderboards/realm", None),
        "listing": ("/rooms?ruleset=realm", None), "listing-all": ("/rooms", None),
    }
    answers: dict[str, object] = {}
    for name, (path, token) in routes.items():
        answer = api.get(path, headers=auth(token) if token else {})
        body = answer.json()
        if isinstance(body, dict):
            for when in ("exported_at_ms", "exported_at"):  # when the bundle was made: all that may differ
                body.pop(when, None)
        if name.startswith("listing"):  # this room's row (other tests' rooms may come and go meanwhile)
            body = [row for row in body["rooms"] if row["room"] == room]
        answers[name] = (answer.status_code, body)
    return answers


async def archive_as_the_archiver(stack, room: str) -> tuple[str, list[bytes]]:
    """Archive the room as an archiver pass does (the move, then the archive index): (status, room keys left)."""
    settings = gateway_settings(stack)
    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL)
    try:
        result = await archive_room(runtime.store, room)
        await archive_index.compact(runtime.store, [room])  # as the archiver's pass does after its moves
        left = await runtime.client.keys(f"*room:{room}:*")
        # the pointer (the seats' key digests stay in their shard's buckets: a player reclaims a token to read
        # their own view of the room)
        return result.status, sorted(k for k in left if not k.endswith((b":version", b":archived")))
    finally:
        await runtime.aclose()


def test_every_read_route_answers_the_same_for_the_room_archived(api: TestClient, stack, auditor: str) -> None:
    room, alice, _, tokens = realm_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    settings = gateway_settings(stack)
    keys = bootstrap.process_keys(settings.shard_count)
    # the projector has projected the end (the room is on the archiver's list)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    live = reads(api, room, alice, tokens, auditor)
    assert all(status == 200 for status, _ in live.values()), {k: v for k, v in live.items() if v[0] != 200}

    status, left = asyncio.run(archive_as_the_archiver(stack, room))

    assert status == "archived" and left == []  # the room's log and records are out of Redis
    assert client.zscore(keys.ended_rooms(keys.shard(room)), room) is None  # and off the archiver's list
    assert client.hget(keys.summaries(keys.shard(room)), room) is None  # its summary is folded from the archive
    # its listing row is in the archive index's blocks now: the listing keeps counting it (below)
    assert client.hget(keys.listings(keys.shard(room)), room) is None
    assert client.hlen(keys.archived_listings(keys.shard(room))) >= 1
    archived = reads(api, room, alice, tokens, auditor)
    assert archived == live
    refused = api.post(f"/rooms/{room}/commands", headers=auth(tokens[alice]),
                       json={"command": {"kind": "mine", "ore": "gold"}})
    assert refused.status_code == 422 and refused.json()["code"] == "room_ended", refused.text
    client.close()


def test_the_gateway_of_another_process_reads_the_archived_room(api: TestClient, stack, auditor: str) -> None:
    """A gateway that never saw the room live (no cache) reads it from the archive alone."""
    from almanac.services.gateway import create_app  # noqa: PLC0415

    room, alice, _, tokens = realm_room(api)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    wait_until(lambda: client.zscore(keys.ended_rooms(keys.shard(room)), room), lambda score: score is not None)
    live = reads(api, room, alice, tokens, auditor)
    assert asyncio.run(archive_as_the_archiver(stack, room))[0] == "archived"
    with TestClient(create_app(gateway_settings(stack)), raise_server_exceptions=False) as fresh:
        assert reads(fresh, room, alice, tokens, auditor) == live
    client.close()


def test_the_archiver_process_archives_ended_rooms_and_reports_in_metrics(api: TestClient, stack, auditor) -> None:
    """`almanac archiver` as a real process (ALMANAC_DEDUPE_RETAIN=0: at once): an ended room leaves Redis by
    itself, a room still playing stays, and /metrics shows the archiver's figures."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from gateway_stack import CHILD  # noqa: PLC0415

    room, alice, _, tokens = realm_room(api)
    playing, *_ = realm_room(api, ended=False)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    env = {**stack.env, "ALMANAC_DEDUPE_RETAIN": "0", "ALMANAC_ARCHIVER_INTERVAL_S": "0.2"}
    archiver = subprocess.Popen([sys.executable, "-c", CHILD, "archiver"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # the pointer is the commit point; the delete step follows it, so wait for both
        assert wait_until(lambda: client.hexists(keys.pointer_bucket(room), room) and not client.exists(
            keys.events(room)), bool, timeout_s=30), "not archived and deleted"
        assert client.exists(keys.events(playing))
        assert api.get(f"/rooms/{room}/verification", headers=auth(auditor)).json()["ok"] is True
        text = wait_until(lambda: api.get("/metrics").text, lambda t: "almanac_archiver_rooms_total{" in t)
        assert "almanac_archiver_up 1" in text and 'almanac_archiver_lag_rooms{archiver="archiver"}' in text
    finally:
        archiver.terminate()
        archiver.wait(timeout=10)
        client.close()
