"""The gateway's Redis connections are bounded: with every one busy a request is refused (503 overloaded) after a
short wait, never served by yet another connection, and the store is not taken for down."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient
from suite_settings import suite_settings

from almanac.services.gateway import create_app

MAX_CONNECTIONS = 4


def test_a_gateway_whose_redis_connections_are_all_busy_refuses_503_and_opens_no_more(redis_url: str,
                                                                                     tmp_path: Path) -> None:
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path), redis_max_connections=MAX_CONNECTIONS,
                             redis_pool_wait_ms=200)
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        gateway = api.app.state.gateway
        pool = gateway.client.connection_pool
        assert api.get("/rooms/nowhere").status_code == 404  # a read takes a pooled connection and gives it back

        # Something holds every connection the pool may open (the outcome subscription holds one for good).
        async def take_the_rest() -> list:
            return [await pool.get_connection() for _ in range(MAX_CONNECTIONS - len(pool._in_use_connections))]

        held = api.portal.call(take_the_rest)
        refused = api.get("/rooms/nowhere")
        assert refused.status_code == 503, refused.text
        assert refused.json()["code"] == "overloaded" and refused.headers["Retry-After"]
        assert "Redis connections" in refused.json()["message"]
        assert len(pool._in_use_connections) + len(pool._available_connections) == MAX_CONNECTIONS
        assert gateway.store_outage_ms == 0  # overload, not an outage: /health stays as it was

        async def give_back() -> None:
            for connection in held:
                await pool.release(connection)

        api.portal.call(give_back)
        assert api.get("/rooms/nowhere").status_code == 404
