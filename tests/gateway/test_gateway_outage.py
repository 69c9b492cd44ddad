"""Redis going away and coming back, on a private redis-server: every route answers 503 store_unavailable
with Retry-After while it is gone, and /health stays not ready until the engine has worked again."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings
from waiting import wait_until

from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.gateway import create_app

ELEMENT = {"kind": "place_element", "row": 5, "column": 5}


@pytest.fixture
def private(tmp_path) -> Iterator[tuple[list[EmbeddedRedis], Stack]]:
    """A redis-server of this test alone (persistent, so it comes back with its data) and an engine on it;
    a restarted server goes into the list, to be stopped with the first."""
    servers = [EmbeddedRedis(tmp_path / "redis", persist=True).start()]
    stack = Stack(servers[0].url, tmp_path)
    stack.start("engine")
    try:
        stack.wait_ready()
        yield servers, stack
    finally:
        engine = stack.processes["engine"]
        if engine.poll() is None:
            os.kill(engine.pid, signal.SIGCONT)
        stack.stop()
        for server in servers:
            server.stop()


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "store_unavailable" and response.json()["message"]
    assert int(response.headers["Retry-After"]) > 0


def test_while_redis_is_down_every_route_is_503_and_health_waits_for_the_engine(private) -> None:
    servers, stack = private
    server = servers[0]
    with TestClient(create_app(gateway_settings(stack)), raise_server_exceptions=False) as api:
        created = api.post("/rooms", json={"ruleset": "board", "player": "alice", "room": "outage"})
        assert created.status_code == 201, created.text
        token = created.json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        ready = wait_until(lambda: api.get("/health"), lambda r: r.status_code == 200, 30.0)
        assert ready.json()["ready"], ready.text

        # Given Redis stops.
        port = server.port
        redis.Redis.from_url(server.url).bgrewriteaof()
        time.sleep(0.5)
        server.stop()
        # Then every route answers 503 store_unavailable with Retry-After, never 500.
        assert_unavailable(api.post("/rooms/outage/commands", json={"command": ELEMENT}, headers=headers))
        assert_unavailable(api.post("/rooms", json={"ruleset": "board", "player": "bob"}))
        assert_unavailable(api.post("/rooms/outage/join", json={"player": "bob"}))
        assert_unavailable(api.get("/rooms/outage"))
        assert_unavailable(api.get("/rooms"))
        assert_unavailable(api.get("/rooms/outage/view", headers=headers))
        assert_unavailable(api.get("/rooms/outage/events", headers=headers))
        assert_unavailable(api.post("/rooms/outage/end", json={}, headers=headers))
        down = api.get("/health")
        assert down.status_code == 503 and down.json()["status"] == "down" and down.headers["Retry-After"]
        # A command refused for itself before any read (its body is invalid) keeps its 4xx: only its count
        # against the token's rate limit needed the store.
        invalid = api.post("/rooms/outage/commands", json={"command": ELEMENT, "surprise": 1}, headers=headers)
        assert invalid.status_code == 422 and invalid.json()["field"] == "surprise", invalid.text

        # When Redis comes back while the engine has not yet worked again (held still here, to be sure)...
        engine = stack.processes["engine"]
        os.kill(engine.pid, signal.SIGSTOP)
        servers.append(EmbeddedRedis(server.data_dir, port=port, persist=True).start())
        # ...then /health answers Redis ok, yet not ready, with a reason.
        for _ in range(3):
            waiting = api.get("/health")
            assert waiting.status_code == 503, waiting.text
            assert waiting.json()["status"] == "not_ready" and waiting.json()["redis"]["ok"]
            assert waiting.json()["reasons"] and waiting.headers["Retry-After"]
            time.sleep(0.5)
        # And once the engine runs again it becomes ready, and a command is accepted.
        os.kill(engine.pid, signal.SIGCONT)
        ready = wait_until(lambda: api.get("/health"), lambda r: r.status_code == 200, 30.0)
        assert ready.status_code == 200 and ready.json()["ready"], ready.text
        moved = api.post("/rooms/outage/commands", json={"command": ELEMENT}, headers=headers)
        assert moved.status_code == 200, moved.text
