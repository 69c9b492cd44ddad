"""A Redis that refuses writes (full at maxmemory, or unable to persist) refuses commands with 503; nothing is
set aside or lost.

Given a real stack (engine and gateway processes) on its own Redis, when that Redis runs out of memory,
then a command is answered 503 ``store_unavailable`` with Retry-After (never a 500), the engine neither
counts the failures as the command's attempts nor moves it to the dead letters, and once memory is freed
the same command, resent with its id, is accepted exactly once.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from gateway_stack import Stack

from almanac.bench.e2e import CHALLENGE, _script
from almanac.services.embedded_redis import EmbeddedRedis, free_port
from almanac.storage.keys import Keys

FILLER = "filler:"
KEYS = Keys(16)
FIRST_MOVE = asyncio.run(_script("board"))[0]  # a legal first move in every room of the challenge


def open_room(http: httpx.Client, room: str) -> dict[str, str]:
    created = http.post("/rooms", json={"ruleset": "board", "player": "p", "challenge": CHALLENGE, "room": room})
    assert created.status_code == 201 and created.json()["joined"], created.text
    return {"Authorization": f"Bearer {created.json()['token']}"}


def logged(client: redis.Redis, room: str) -> int:
    return client.xlen(KEYS.events(room))


def dead_letters(client: redis.Redis) -> int:
    return sum(client.xlen(KEYS.dead_letters(shard)) for shard in range(16))


@pytest.fixture(scope="module")
def full_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, redis.Redis, Stack]]:
    data_dir = tmp_path_factory.mktemp("store-full")
    server = EmbeddedRedis(data_dir / "redis", port=free_port(), persist=False).start()
    client = redis.Redis.from_url(server.url)
    stack = Stack(server.url, data_dir)
    # Short leases: Redis refuses writes for longer than a lease in these stories, so the engine's leases
    # lapse (their renewals are writes) and must be taken again once Redis mends.
    stack.env["ALMANAC_LEASE_MS"] = "1000"
    try:
        stack.start("engine")
        stack.wait_ready()
        yield stack.start_gateway(ALMANAC_COMMAND_TIMEOUT_MS="3000"), client, stack
    finally:
        stack.stop()
        client.close()
        server.stop()


def fill_memory(client: redis.Redis) -> None:
    """Junk, then maxmemory well below what is used: every write that needs memory is refused (OOM)."""
    client.config_set("maxmemory-policy", "noeviction")
    for index in range(200):
        client.set(f"{FILLER}{index}", "x" * 10_000)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used - 1_000_000))
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set(f"{FILLER}probe", "x")


def free_memory(client: redis.Redis) -> None:
    client.config_set("maxmemory", "0")
    for key in client.scan_iter(match=f"{FILLER}*", count=1000):
        client.delete(key)


def test_a_full_redis_refuses_commands_with_503_and_the_resent_command_lands_once(full_stack):
    url, client, stack = full_stack
    http = httpx.Client(base_url=url, timeout=15)
    headers = open_room(http, "full-1")
    before = logged(client, "full-1")
    move = {"command_id": "m-1", "command": FIRST_MOVE}

    fill_memory(client)
    try:
        refused = [http.post("/rooms/full-1/commands", json=move, headers=headers) for _ in range(4)]
        assert {answer.status_code for answer in refused} == {503}, [a.text for a in refused]
        assert all(answer.json()["code"] == "store_unavailable" and answer.headers.get("Retry-After")
                   for answer in refused)
        assert logged(client, "full-1") == before  # refused: nothing changed
    finally:
        free_memory(client)

    landed = http.post("/rooms/full-1/commands", json=move, headers=headers)
    assert landed.status_code == 200, landed.text
    again = http.post("/rooms/full-1/commands", json=move, headers=headers)
    assert again.status_code == 200 and again.json()["duplicate"], again.text
    assert logged(client, "full-1") == before + len(landed.json()["events"])  # once
    assert dead_letters(client) == 0
    assert "Traceback" not in stack.log("gateway") + stack.log("engine")


def lose_disk(client: redis.Redis) -> None:
    """Saving on, then the server's working directory removed: every save fails, so writes get MISCONF."""
    client.config_set("save", "3600 1")
    shutil.rmtree(client.config_get("dir")["dir"])
    client.bgsave()
    deadline = time.monotonic() + 10
    while client.info("persistence")["rdb_last_bgsave_status"] != "err" and time.monotonic() < deadline:
        time.sleep(0.05)


def mend_disk(client: redis.Redis) -> None:
    client.config_set("stop-writes-on-bgsave-error", "no")  # the operator's fix


def assert_a_queued_command_survives(full_stack, room: str, break_redis, mend_redis) -> None:
    """Given a command waiting in its stream (the engine held still) when Redis starts refusing writes, when
    the engine meets the refusals for a while, then a new command is refused 503 meanwhile, and once Redis
    mends, the waiting command, resent with its id, was decided exactly once and nothing was set aside."""
    url, client, stack = full_stack
    http = httpx.Client(base_url=url, timeout=15)
    headers = open_room(http, room)
    before = logged(client, room)
    queued = {"command_id": "q-1", "command": FIRST_MOVE}
    engine = stack.processes["engine"]
    sender = threading.Thread(target=lambda: http.post(f"/rooms/{room}/commands", json=queued, headers=headers,
                                                       timeout=20))
    engine.send_signal(signal.SIGSTOP)
    try:
        sender.start()
        time.sleep(0.5)
        break_redis(client)
    finally:
        engine.send_signal(signal.SIGCONT)  # the engine meets a Redis that refuses every write it tries
    try:
        refused = http.post(f"/rooms/{room}/commands", json={"command_id": "m-2", "command": FIRST_MOVE},
                            headers=headers)
        assert refused.status_code == 503 and refused.json()["code"] == "store_unavailable", refused.text
        assert refused.headers["Retry-After"]
        health = http.get("/health")  # the load balancer sees it too
        assert health.status_code == 503 and health.json()["status"] in ("down", "not_ready"), health.text
        time.sleep(1.5)  # several of the engine's attempts fail: none may count against the command
    finally:
        mend_redis(client)
    sender.join(30)
    resent = http.post(f"/rooms/{room}/commands", json=queued, headers=headers)
    assert resent.status_code == 200, resent.text
    assert logged(client, room) == before + len(resent.json()["events"])  # decided once
    assert dead_letters(client) == 0, "a command was set aside because Redis refused writes"
    assert "Traceback" not in stack.log("gateway") + stack.log("engine")


def test_a_command_queued_before_redis_filled_up_is_decided_once_memory_returns(full_stack):
    assert_a_queued_command_survives(full_stack, "full-2", fill_memory, free_memory)


def test_a_command_queued_before_redis_lost_its_disk_is_decided_once_it_can_persist(full_stack):
    """MISCONF (stop-writes-on-bgsave-error: the disk gone or full): the same story as a full Redis."""
    assert_a_queued_command_survives(full_stack, "misconf", lose_disk, mend_disk)
