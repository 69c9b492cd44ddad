"""The gateway finds the projectors (and archivers) through their registry sets, which a process joins at each beat:
one that stopped beating a moment ago is what /health is for, reported missing (degraded) even beside a live one;
one gone far longer than its heartbeat lives (renamed, scaled away) is forgotten, no longer listed nor in the set,
or /health would report it for ever; one stopped cleanly leaves the set itself. /metrics forgets a gone archiver."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url
from fastapi.testclient import TestClient

from almanac.projections.projector import Projector
from almanac.services.archiver import Archiver
from almanac.services.gateway import create_app
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR
from almanac.services.settings import load_settings
from almanac.storage.keys import archivers_key, projector_stats_key, projectors_key
from almanac.storage.process_registry import FORGET_AFTER_TTLS

SHARDS = 16
LIVE_TTL_MS = 60_000
SHORT_TTL_MS = 10  # a beat this short is gone for good (FORGET_AFTER_TTLS of them) after 1.2 s


async def beat(redis_url: str, name: str, ttl_ms: int) -> None:
    """One heartbeat of projector ``name`` (as its heartbeat loop writes it), living ``ttl_ms``."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        await Projector(client, SHARDS, name=name, heartbeat_ttl_ms=ttl_ms).publish_status()
    finally:
        await client.aclose()


def gone_for_good(ttl_ms: int) -> None:
    time.sleep((FORGET_AFTER_TTLS + 20) * ttl_ms / 1000)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


def ready_health(redis_url: str, tmp_path: Path) -> dict:
    """/health of a gateway (its own engine leasing every shard) once its engine is ready."""
    settings = load_settings({}, redis_url=redis_url, data_dir=str(tmp_path / "gateway"))
    with TestClient(create_app(settings)) as api:
        deadline = time.monotonic() + 30
        answer = api.get("/health")
        while answer.status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = api.get("/health")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_projector_that_missed_its_last_beats_is_reported_missing_beside_a_live_one(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "b", whose heartbeat (200 ms) has expired a moment ago, and projector "a" beating
    asyncio.run(beat(redis_url, "b", 200))
    time.sleep(0.4)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then "b" is reported missing (for at least the 200 ms since its heartbeat expired) and the read side not ok
    projector = health["projector"]
    assert health["status"] == "degraded" and projector["ok"] is False, health
    assert [beat["name"] for beat in projector["projectors"]] == ["a"]
    assert [m["name"] for m in projector["missing"]] == ["b"] and projector["missing"][0]["missing_ms"] >= 200
    assert client.smembers(projectors_key()) == {b"a", b"b"}  # still registered: it may come back


def test_a_projector_gone_far_longer_than_its_heartbeat_lives_is_forgotten(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "old-name", silent for more than FORGET_AFTER_TTLS of its heartbeat's life, and "a" beating
    asyncio.run(beat(redis_url, "old-name", SHORT_TTL_MS))
    gone_for_good(SHORT_TTL_MS)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then the set and its figures no longer hold "old-name", it is neither listed nor missing, the read side is ok
    assert client.smembers(projectors_key()) == {b"a"}
    assert not client.exists(projector_stats_key("old-name"))
    projector = health["projector"]
    assert health["status"] == "ok" and projector["ok"] is True, health
    assert [beat["name"] for beat in projector["projectors"]] == ["a"] and projector["missing"] == []


def test_a_registered_projector_whose_figures_keep_no_beat_time_is_missing_from_the_first_look(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given "older", registered by code whose figures kept no time of its last beat, its heartbeat long expired
    client.sadd(projectors_key(), "older")
    client.hset(projector_stats_key("older"), mapping={"events_applied": 7, "batches": 1})

    asked_ms = int(client.time()[0]) * 1000

    # When /health is asked, then it is missing, counted from the first look (how long before, nothing says)
    missing = ready_health(redis_url, tmp_path)["projector"]["missing"]
    assert [m["name"] for m in missing] == ["older"]
    started_ms = int(client.hget(projector_stats_key("older"), "heartbeat_at_ms"))
    assert started_ms >= asked_ms and missing[0]["missing_ms"] <= int(client.time()[0]) * 1000 + 1000 - started_ms
    # and still registered: it is forgotten FORGET_AFTER_TTLS heartbeats after that first look, like any other
    assert client.sismember(projectors_key(), "older")


def test_a_projector_stopped_cleanly_leaves_the_set(redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    async def run_and_stop() -> None:
        redis_client = aioredis.Redis.from_url(redis_url)
        stop = asyncio.Event()
        projector = Projector(redis_client, SHARDS, name="scaled-down", block_ms=20)
        task = asyncio.create_task(projector.run(stop))
        deadline = time.monotonic() + 10
        while not await redis_client.sismember(projectors_key(), "scaled-down") and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()
        await task
        await redis_client.aclose()

    # Given a projector that ran (and joined the set), then was stopped on purpose
    asyncio.run(run_and_stop())

    # Then it is out of the set, and /health reports no projector missing
    assert client.smembers(projectors_key()) == set()
    assert ready_health(redis_url, tmp_path)["projector"]["missing"] == []


def test_an_archiver_gone_for_good_is_forgotten_by_metrics(redis_url: str, client: redis.Redis,
                                                           tmp_path: Path) -> None:
    async def report(name: str, ttl_ms: int) -> None:
        redis_client = aioredis.Redis.from_url(redis_url)
        store = archiving_store(redis_client, file_archive_url(tmp_path / "archive"))
        await Archiver(store, name=name, heartbeat_ttl_ms=ttl_ms).report(0.0)
        await redis_client.aclose()

    # Given archiver "retired", silent for more than FORGET_AFTER_TTLS of its heartbeat's life, and "working"
    asyncio.run(report("retired", SHORT_TTL_MS))
    gone_for_good(SHORT_TTL_MS)
    asyncio.run(report("working", LIVE_TTL_MS))

    # When /metrics is scraped
    settings = load_settings({}, redis_url=redis_url, data_dir=str(tmp_path / "gateway")).model_copy(
        update={"engine_shards": "none"})
    with TestClient(create_app(settings)) as api:
        token = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        text = api.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text

    # Then only "working" has figures, and "retired" is out of the set
    assert set(re.findall(r'almanac_archiver_rooms_total\{archiver="(\w+)"\}', text)) == {"working"}
    assert "almanac_archiver_up 1" in text
    assert client.smembers(archivers_key()) == {b"working"}
