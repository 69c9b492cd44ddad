"""Idle rooms through the real processes: given a realm room still being played, when nobody touches it for
ALMANAC_ARCHIVE_IDLE_AFTER, the `almanac archiver` process moves it to the archive; every read still answers the
same, and a player's next command brings it back (the engine process) and is decided once."""

from __future__ import annotations

import subprocess
import sys

import redis
from fastapi.testclient import TestClient
from gateway_stack import CHILD, gateway_settings
from prometheus_client.parser import text_string_to_metric_families
from test_gateway_forensics import auth, realm_room
from waiting import wait_until

from almanac.services import bootstrap
from almanac.storage.archive import decode_pointer


def test_an_idle_room_leaves_redis_by_itself_and_a_players_command_brings_it_back(api: TestClient, stack,
                                                                                  auditor: str) -> None:
    room, alice, bob, tokens = realm_room(api, ended=False)
    client = redis.Redis.from_url(stack.redis_url)
    keys = bootstrap.process_keys(gateway_settings(stack).shard_count)
    version = int(client.get(keys.version(room)))
    wait_until(lambda: api.get(f"/rooms/{room}").json().get("version"), lambda v: v == version)
    before = {path: api.get(path, headers=auth(auditor)).json()
              for path in (f"/rooms/{room}", f"/rooms/{room}/events", f"/rooms/{room}/state")}
    # the console's rooms table: its version and last activity, once the projector has caught up with the room
    # (its rows are projected apart from the room read above: a CI run once read them two versions behind)
    row = wait_until(lambda: status_row(api, room, auditor), lambda r: r["projector_lag_versions"] == 0)
    assert row["latest_version"] == version and row["last_activity_ms"] is not None

    env = {**stack.env, "ALMANAC_ARCHIVE_IDLE_AFTER": "1", "ALMANAC_ARCHIVER_INTERVAL_S": "0.2"}
    archiver = subprocess.Popen([sys.executable, "-c", CHILD, "archiver"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # When nobody touches it for a second, the archiver process moves it (reason "idle")
        assert wait_until(lambda: client.hget(keys.pointer_bucket(room), room), bool, timeout_s=30), "not archived"
        pointer = decode_pointer(room, client.hget(keys.pointer_bucket(room), room))
        assert pointer.reason == "idle" and pointer.version == version
        # The pointer is the move's commit point; the room's keys are deleted by the next step (storage/archive.py)
        assert not wait_until(lambda: client.exists(keys.events(room)), lambda n: not n, timeout_s=30)
        # Then every read answers as before, from the archive
        assert {path: api.get(path, headers=auth(auditor)).json() for path in before} == before
        assert status_row(api, room, auditor) == row
        # When bob mines, his command is decided on the room brought back, once, right after the archived head
        mined = api.post(f"/rooms/{room}/commands", headers=auth(tokens[bob]),
                         json={"command": {"kind": "mine", "ore": "gold"}, "command_id": f"{room}-bob-1"})
        assert mined.status_code == 200, mined.text
        assert mined.json()["first_version"] == version + 1
        # (its first object is kept while the room lives in Redis, the one copy of its history outside it; the
        # archiver may move it again a second after this command, so it is looked at now)
        old_object = stack.data_dir / "archive" / pointer.path
        kept, back = old_object.exists(), client.hget(keys.pointer_bucket(room), room)
        assert kept or (back is not None and decode_pointer(room, back).digest != pointer.digest)
        again = api.post(f"/rooms/{room}/commands", headers=auth(tokens[bob]),
                         json={"command": {"kind": "mine", "ore": "gold"}, "command_id": f"{room}-bob-1"})
        assert again.status_code == 200 and again.json()["first_version"] == version + 1  # a resend: the first answer
        events = api.get(f"/rooms/{room}/events", headers=auth(auditor)).json()["events"]
        assert events[:version] == before[f"/rooms/{room}/events"]["events"]
        (decided,) = {e["command_id"] for e in events[version:]}  # the resend appended nothing
        assert decided.endswith(f"{room}-bob-1")
        assert api.get(f"/rooms/{room}/verification", headers=auth(auditor)).json()["ok"] is True

        # And /metrics counts the trip back and how long the command waited for it (Prometheus' parser reads it)
        seen = wait_until(lambda: restores(api), lambda found: found.get(("count", None), 0) >= 1, timeout_s=30)
        assert seen[("count", None)] == 1 == seen[("bucket", "+Inf")] and seen[("sum", None)] > 0
        assert seen[("bucket", "10")] == 1

        # And when nobody touches it again, it moves to the archive again and its first object is removed
        moved = wait_until(lambda: client.hget(keys.pointer_bucket(room), room), bool, timeout_s=30)
        assert moved and decode_pointer(room, moved).digest != pointer.digest
        assert wait_until(old_object.exists, lambda exists: not exists, timeout_s=30) is False
        assert (stack.data_dir / "archive" / decode_pointer(room, moved).path).exists()
        assert api.get(f"/rooms/{room}/verification", headers=auth(auditor)).json()["ok"] is True
    finally:
        archiver.terminate()
        archiver.wait(timeout=10)
        client.close()


def status_row(api: TestClient, room: str, auditor: str) -> dict:
    return next(r for r in api.get("/status/rooms", headers=auth(auditor)).json()["rooms"] if r["room"] == room)


def restores(api: TestClient) -> dict[tuple[str, str | None], float]:
    """The engines' ``almanac_room_restore_seconds`` histogram in /metrics, summed over engines: (part, le) -> value."""
    found: dict[tuple[str, str | None], float] = {}
    for family in text_string_to_metric_families(api.get("/metrics").text):
        for sample in family.samples:
            if sample.name.startswith("almanac_room_restore_seconds_"):
                part = (sample.name.removeprefix("almanac_room_restore_seconds_"), sample.labels.get("le"))
                found[part] = found.get(part, 0) + sample.value
    return found
