"""The gateway finds the engines, projectors (and archivers) through their registry sets, which a process joins at
each beat: one that stopped beating a moment ago is what /health is for, reported missing even beside a live one (what
its death costs is its shards: the read side is degraded while no live projector holds one, missing or forgotten, as a
shard without an engine makes the gateway not ready); one missing far longer than its heartbeat lives (renamed, scaled
away) is forgotten, no longer listed nor in the set, or /health would report it for ever; one stopped cleanly leaves
the set itself.
/metrics forgets a gone archiver, and one stopped cleanly. Only the readers' clock (Redis') says how long a process
has been missing, counted from the first look that found it so: not the process's own, which may be behind, nor
its last beat, which a Redis outage makes old for every process at once."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url
from fastapi.testclient import TestClient
from suite_settings import suite_settings
from waiting import wait_until

from almanac.projections.projector import Projector
from almanac.services.archiver import Archiver
from almanac.services.engine.shard_engine import Engine, EngineConfig
from almanac.services.gateway import create_app
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR
from almanac.storage.keys import (
    archiver_stats_key,
    archivers_key,
    engine_heartbeat_key,
    engine_stats_key,
    engines_key,
    projector_stats_key,
    projectors_key,
)
from almanac.storage.process_registry import (
    FORGET_AFTER_TTLS,
    MISSING_FIELD,
    REGISTRY_FIELDS,
    missing_or_forget,
)

SHARDS = 16
LIVE_TTL_MS = 60_000
SHORT_TTL_MS = 10  # a beat this short is gone for good (FORGET_AFTER_TTLS of them) after 1.2 s
ENGINE_TTL_MS = 3_000  # an engine's heartbeat with a short lease (its floor)


async def beat(redis_url: str, name: str, ttl_ms: int, shards: list[int] | None = None) -> None:
    """One heartbeat of projector ``name`` (as its heartbeat loop writes it), living ``ttl_ms``, holding ``shards``
    (by default every one)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        await Projector(client, SHARDS, name=name, heartbeat_ttl_ms=ttl_ms, shards=shards).publish_status()
    finally:
        await client.aclose()


async def engine_registered(redis_url: str, name: str, heartbeat_ttl_ms: int | None = None, dies: bool = False) -> None:
    """Engine ``name`` (holding shard 0, its lease 300 ms, its heartbeat living ``heartbeat_ttl_ms`` or by default
    ENGINE_TTL_MS) runs until it has registered, then stops cleanly or, when it ``dies``, stops dead: everything it
    was running cancelled at once, as a kill -9 leaves it (nothing given back: its lease lapses, its heartbeat
    expires)."""
    client = aioredis.Redis.from_url(redis_url)
    ttl = {} if heartbeat_ttl_ms is None else {"heartbeat_ttl_ms": heartbeat_ttl_ms}
    engine = Engine(client, EngineConfig(name=name, shards=[0], lease_ms=300, **ttl))
    await engine.start()
    deadline = time.monotonic() + 10
    while not await client.sismember(engines_key(), name) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert await client.sismember(engines_key(), name)
    if dies:
        running = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    else:
        await engine.stop()
    await client.aclose()


def gone_for_good_s(ttl_ms: int) -> float:
    """Seconds past FORGET_AFTER_TTLS heartbeats of ``ttl_ms``."""
    return (FORGET_AFTER_TTLS + 20) * ttl_ms / 1000


@pytest.fixture
def client(sync_redis: redis.Redis) -> redis.Redis:
    """The test's Redis, flushed (conftest's ``sync_redis``)."""
    return sync_redis


def ready_health(redis_url: str, tmp_path: Path) -> dict:
    """/health of a gateway (its own engine leasing every shard) once its engine is ready."""
    return looks(redis_url, tmp_path)[0]


def looks(redis_url: str, tmp_path: Path, apart_s: float = 0, then: Callable[[], None] | None = None,
          first_at_once: bool = False) -> list[dict]:
    """/health of a gateway (its own engine leasing every shard) once its engine is ready, and when ``apart_s`` is
    given, again that long after (``then`` run in between): the first look, and the second. ``first_at_once``: the
    first look is the gateway's first /health, ready or not (its `engine` part is there either way), so that a
    registry clock shorter than the gateway's start (a 10 ms heartbeat is forgotten after 1.2 s) starts at it."""
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway"))
    answers = []

    def ready(answer: httpx.Response) -> httpx.Response:
        deadline = time.monotonic() + 30
        while answer.status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = api.get("/health")
        assert answer.status_code == 200, answer.text
        return answer

    with TestClient(create_app(settings)) as api:
        answer = api.get("/health")
        answers.append(answer if first_at_once else ready(answer))
        if apart_s:
            time.sleep(apart_s)
            if then is not None:
                then()
            answers.append(ready(api.get("/health")))
    return [answer.json() for answer in answers]


def test_a_projector_that_missed_its_last_beats_is_reported_missing_beside_a_live_one(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "b", whose heartbeat (200 ms) has expired a moment ago, and projector "a" beating, holding
    # every shard ("b"'s among them: a crashed projector replaced under another name)
    asyncio.run(beat(redis_url, "b", 200))
    time.sleep(0.4)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then "b" is reported missing, from this first look that found it so, and still registered: it may come back
    projector = health["projector"]
    assert [beat["name"] for beat in projector["projectors"]] == ["a"]
    assert [m["name"] for m in projector["missing"]] == ["b"] and projector["missing"][0]["missing_ms"] >= 0
    assert client.smembers(projectors_key()) == {b"a", b"b"}
    assert client.hexists(projector_stats_key("b"), MISSING_FIELD)
    # but no shard's read model waits for it ("a" holds them all): the read side is ok (it was degraded for the 10
    # minutes "b" stayed listed, though nothing was stale)
    assert health["status"] == "ok" and projector["ok"] is True, health


def test_a_missing_projector_whose_shards_no_live_one_holds_degrades_the_read_side(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "b" (shards 8 to 15), whose heartbeat expired a moment ago, and "a" beating with shards 0 to 7
    asyncio.run(beat(redis_url, "b", 200, shards=list(range(8, SHARDS))))
    time.sleep(0.4)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS, shards=list(range(8))))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then "b" is reported missing and, half the shards held by no live projector, the read side is degraded
    projector = health["projector"]
    assert [m["name"] for m in projector["missing"]] == ["b"]
    assert health["status"] == "degraded" and projector["ok"] is False, health


def test_a_live_projector_holding_only_some_shards_degrades_the_read_side_with_none_missing(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "a" beating with shards 0 to 7 alone, and no projector missing (the one that held the others
    # crashed long ago and was forgotten, or never ran)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS, shards=list(range(8))))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then, half the shards held by no live projector, the read side is degraded though none is listed missing
    projector = health["projector"]
    assert projector["missing"] == [] and [beat["name"] for beat in projector["projectors"]] == ["a"]
    assert health["status"] == "degraded" and projector["ok"] is False, health


def test_a_projector_whose_clock_runs_behind_is_reported_missing_not_forgotten(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "behind", whose heartbeat expired a moment ago, its host's clock an hour behind: its figures
    # say (as code that trusted the process's clock wrote them) that it last beat an hour ago
    asyncio.run(beat(redis_url, "behind", 200))
    hour_ago_ms = int(client.time()[0]) * 1000 - 3_600_000
    client.hset(projector_stats_key("behind"), "heartbeat_at_ms", hour_ago_ms)
    time.sleep(0.4)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then it is reported missing, and still registered: how long it has been missing, Redis' clock says
    assert [m["name"] for m in health["projector"]["missing"]] == ["behind"], health
    assert client.sismember(projectors_key(), "behind")


def test_a_projector_missing_far_longer_than_its_heartbeat_lives_is_forgotten(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "old-name", whose heartbeat expired, and "a" beating
    asyncio.run(beat(redis_url, "old-name", SHORT_TTL_MS))
    time.sleep(0.05)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health finds it missing, then asks again more than FORGET_AFTER_TTLS of its heartbeat's life later
    first, health = looks(redis_url, tmp_path, apart_s=gone_for_good_s(SHORT_TTL_MS), first_at_once=True)
    assert [m["name"] for m in first["projector"]["missing"]] == ["old-name"]

    # Then the set and its figures no longer hold "old-name", it is neither listed nor missing, the read side is ok
    assert client.smembers(projectors_key()) == {b"a"}
    assert not client.exists(projector_stats_key("old-name"))
    projector = health["projector"]
    assert health["status"] == "ok" and projector["ok"] is True, health
    assert [beat["name"] for beat in projector["projectors"]] == ["a"] and projector["missing"] == []


def test_a_registered_projector_whose_figures_keep_no_heartbeat_ttl_is_missing_from_the_first_look(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given "older", registered by code whose figures kept no registry field, its heartbeat long expired
    client.sadd(projectors_key(), "older")
    client.hset(projector_stats_key("older"), mapping={"events_applied": 7, "batches": 1})

    asked_ms = int(client.time()[0]) * 1000

    # When /health is asked, then it is missing, counted from the first look (how long before, nothing says)
    missing = ready_health(redis_url, tmp_path)["projector"]["missing"]
    assert [m["name"] for m in missing] == ["older"]
    started_ms = int(client.hget(projector_stats_key("older"), MISSING_FIELD))
    assert started_ms >= asked_ms and missing[0]["missing_ms"] <= int(client.time()[0]) * 1000 + 1000 - started_ms
    # and still registered: it is forgotten FORGET_AFTER_TTLS heartbeats (of a projector's default) after that
    # first look, like any other
    assert client.sismember(projectors_key(), "older")


def test_after_an_outage_that_let_every_heartbeat_expire_nothing_is_forgotten_at_the_first_look(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given engine "e" and projector "p", whose last beats are more than FORGET_AFTER_TTLS heartbeats old (as after a
    # Redis outage that long), never seen missing, and projector "a" beating again
    asyncio.run(engine_registered(redis_url, "e", heartbeat_ttl_ms=SHORT_TTL_MS, dies=True))
    asyncio.run(beat(redis_url, "p", SHORT_TTL_MS))
    time.sleep(gone_for_good_s(SHORT_TTL_MS))
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then both are reported missing, none forgotten: still registered, their figures and counters kept
    assert [m["name"] for m in health["engine"]["missing"]] == ["e"], health
    assert [m["name"] for m in health["projector"]["missing"]] == ["p"], health
    assert client.sismember(engines_key(), "e") and client.sismember(projectors_key(), "p")
    assert client.hexists(engine_stats_key("e"), "shards_held")
    assert client.hexists(projector_stats_key("p"), "events_applied")


def test_a_projector_that_came_back_is_missing_again_only_from_its_new_silence(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "b", found missing by /health, and "a" beating
    asyncio.run(beat(redis_url, "b", SHORT_TTL_MS))
    time.sleep(0.05)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    def comes_back_and_dies_again() -> None:
        asyncio.run(beat(redis_url, "b", SHORT_TTL_MS))
        assert not client.hexists(projector_stats_key("b"), MISSING_FIELD)  # its beat says it is back
        time.sleep(0.05)

    # When, FORGET_AFTER_TTLS heartbeats after that, "b" beats once more and dies again, and /health is asked
    first, health = looks(redis_url, tmp_path, apart_s=gone_for_good_s(SHORT_TTL_MS), then=comes_back_and_dies_again,
                          first_at_once=True)
    assert [m["name"] for m in first["projector"]["missing"]] == ["b"]

    # Then it is missing again, counted from this look: not forgotten
    assert [m["name"] for m in health["projector"]["missing"]] == ["b"], health
    assert client.sismember(projectors_key(), "b")


def test_a_projector_that_beats_between_a_readers_look_and_its_forget_is_not_forgotten(
        redis_url: str, client: redis.Redis) -> None:
    # Given projector "b", which a reader found missing for far longer than FORGET_AFTER_TTLS of its beats (the
    # figures it read say so)
    asyncio.run(beat(redis_url, "b", SHORT_TTL_MS))
    long_ago_ms = int(client.time()[0]) * 1000 - 60_000
    client.hset(projector_stats_key("b"), MISSING_FIELD, long_ago_ms)
    read = client.hgetall(projector_stats_key("b"))

    # and "b" beats again before that reader forgets it
    asyncio.run(beat(redis_url, "b", SHORT_TTL_MS))

    # When the reader decides on the figures it read
    async def decide() -> dict[str, int]:
        redis_client = aioredis.Redis.from_url(redis_url)
        try:
            return await missing_or_forget(redis_client, projectors_key(), {"b": (projector_stats_key("b"), read)},
                                           SHORT_TTL_MS)
        finally:
            await redis_client.aclose()

    assert asyncio.run(decide()) == {}

    # Then "b", back, keeps its name in the set and its figures
    assert client.sismember(projectors_key(), "b")
    assert client.hexists(projector_stats_key("b"), "events_applied")
    assert not client.hexists(projector_stats_key("b"), MISSING_FIELD)


def test_a_registered_name_without_figures_was_forgotten_and_is_taken_out_without_a_trace(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given the names "ghost" in the engines' and projectors' sets without figures (another gateway forgot them after
    # this one read the sets: every process writes its figures before joining), and "a" beating
    client.sadd(engines_key(), "ghost")
    client.sadd(projectors_key(), "ghost")
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked
    health = ready_health(redis_url, tmp_path)

    # Then they are taken out of the sets, no figures are written for them, and neither is listed
    assert not client.sismember(engines_key(), "ghost") and not client.sismember(projectors_key(), "ghost")
    assert not client.exists(engine_stats_key("ghost")) and not client.exists(projector_stats_key("ghost"))
    assert health["engine"]["missing"] == [] and health["projector"]["missing"] == [], health


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

    # Given archiver "retired", whose heartbeat expired, and "working"
    asyncio.run(report("retired", SHORT_TTL_MS))
    asyncio.run(report("working", LIVE_TTL_MS))
    time.sleep(0.05)

    # When /metrics is scraped, then again more than FORGET_AFTER_TTLS of its heartbeat's life later
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway")).model_copy(
        update={"engine_shards": "none"})
    with TestClient(create_app(settings)) as api:
        token = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        first = api.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
        time.sleep(gone_for_good_s(SHORT_TTL_MS))
        text = api.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
    assert 'almanac_archiver_rooms_total{archiver="retired"}' in first  # missing at first, its figures shown

    # Then only "working" has figures, and "retired" is out of the set
    assert set(re.findall(r'almanac_archiver_rooms_total\{archiver="(\w+)"\}', text)) == {"working"}
    assert "almanac_archiver_up 1" in text
    assert client.smembers(archivers_key()) == {b"working"}


def test_an_engine_that_died_a_moment_ago_is_reported_missing_while_its_shards_are_held_by_another(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given engine "crashed", which held shard 0 and died (its heartbeat expired a moment ago), and a projector
    asyncio.run(engine_registered(redis_url, "crashed", dies=True))
    time.sleep(ENGINE_TTL_MS / 1000 + 0.2)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked of a gateway whose own engine holds every shard, the dead one's among them
    health = ready_health(redis_url, tmp_path)

    # Then "crashed" is reported missing, from this first look that found it so, and still registered
    engine = health["engine"]
    assert [m["name"] for m in engine["missing"]] == ["crashed"]
    assert engine["missing"][0]["missing_ms"] >= 0, engine
    assert client.sismember(engines_key(), "crashed")  # it may come back
    # and, its shards held, commands are taken as before: the engines ok and ready, the gateway's status ok
    assert engine["ok"] is True and engine["ready"] is True and engine["shards_held"] == SHARDS, engine
    assert health["status"] == "ok" and health["reasons"] == [], health


def test_an_engine_missing_far_longer_than_its_heartbeat_lives_is_forgotten_its_counters_kept(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given engine "old-host", dead (its heartbeat expired), and a projector
    asyncio.run(engine_registered(redis_url, "old-host", heartbeat_ttl_ms=SHORT_TTL_MS, dies=True))
    time.sleep(0.05)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health finds it missing, then asks again more than FORGET_AFTER_TTLS of its heartbeat's life later
    first, health = looks(redis_url, tmp_path, apart_s=gone_for_good_s(SHORT_TTL_MS), first_at_once=True)
    assert [m["name"] for m in first["engine"]["missing"]] == ["old-host"]

    # Then the set no longer holds "old-host", and it is not reported missing
    assert not client.sismember(engines_key(), "old-host")
    assert health["engine"]["missing"] == [] and health["status"] == "ok", health
    # and its counters are kept (totals since the name first ran, as a clean stop keeps them), the registry's
    # fields alone removed
    counters = client.hgetall(engine_stats_key("old-host"))
    assert b"shards_held" in counters and not {field.encode() for field in REGISTRY_FIELDS} & set(counters)


def test_an_engine_whose_host_clock_runs_a_minute_behind_is_live_not_stale(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given engine "behind", whose last beat (living a minute) was written a moment ago by a host whose clock runs
    # 60 s behind this gateway's, after a round it completed: every time in it is a minute early
    asyncio.run(engine_registered(redis_url, "behind", heartbeat_ttl_ms=LIVE_TTL_MS, dies=True))
    written = json.loads(client.get(engine_heartbeat_key("behind")))
    written["consumed_ms"] = written["time_ms"]
    written.update({field: written[field] - 60_000 for field in ("time_ms", "started_at_ms", "consumed_ms")})
    client.set(engine_heartbeat_key("behind"), json.dumps(written), keepttl=True)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))

    # When /health is asked of a gateway whose own engine holds every shard
    health = ready_health(redis_url, tmp_path)

    # Then its heartbeat's age is what Redis counts since it was written (under a second), not a minute, and the
    # gateway is ready with nothing stale
    behind = next(engine for engine in health["engine"]["engines"] if engine["name"] == "behind")
    assert behind["age_s"] < 5, behind
    assert health["engine"]["ok"] is True and health["status"] == "ok" and health["reasons"] == [], health


def test_readiness_after_an_outage_compares_how_long_ago_not_two_hosts_clocks(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given engines "behind" and "ahead" holding a shard, on hosts whose clocks run a minute behind and a minute ahead
    # of this gateway's, and a gateway that saw Redis fail a moment ago
    def beats(name: str, skew_ms: int, round_ago_ms: int) -> None:
        written = json.loads(client.get(engine_heartbeat_key(name)))
        written["time_ms"] = int(time.time() * 1000) + skew_ms
        written.update(consumed_ms=written["time_ms"] - round_ago_ms, redis_error_ms=0, shards_held=[0])
        client.set(engine_heartbeat_key(name), json.dumps(written), px=LIVE_TTL_MS)

    for name, skew_ms in (("behind", -60_000), ("ahead", 60_000)):
        asyncio.run(engine_registered(redis_url, name, heartbeat_ttl_ms=LIVE_TTL_MS, dies=True))
        beats(name, skew_ms, 0)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway"))
    with TestClient(create_app(settings)) as api:
        assert wait_until(lambda: api.get("/health").status_code, lambda code: code == 200) == 200
        api.app.state.gateway.note_store_outage()
        time.sleep(1.0)

        # When "behind" beats after a round it completed just now (after the outage), and "ahead" after a round it
        # completed 3 s ago (before it), each stamped by its own host's clock
        beats("behind", -60_000, 0)
        beats("ahead", 60_000, 3_000)
        health = api.get("/health").json()

    # Then "behind" is ready and "ahead" is not: each round's age is set against the outage's, where the engine's
    # epoch ms against the gateway's held "behind" not ready for a minute and let "ahead" through at once
    ready = {engine["name"]: engine["ready"] for engine in health["engine"]["engines"]}
    assert ready["behind"] is True and ready["ahead"] is False, health
    assert any(reason.startswith("engine ahead: no completed round") for reason in health["reasons"]), health
    assert not any(reason.startswith("engine behind") for reason in health["reasons"]), health


def test_an_engine_stopped_cleanly_leaves_the_set(redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given an engine that ran (and joined the set), then was stopped on purpose
    asyncio.run(engine_registered(redis_url, "scaled-down"))

    # Then it is out of the set (its counters kept for a restart under its name), and /health reports none missing
    assert not client.sismember(engines_key(), "scaled-down")
    assert client.exists(engine_stats_key("scaled-down"))
    assert ready_health(redis_url, tmp_path)["engine"]["missing"] == []


def test_an_archiver_stopped_cleanly_leaves_the_set_and_metrics(redis_url: str, client: redis.Redis,
                                                                tmp_path: Path) -> None:
    async def run_and_stop() -> None:
        redis_client = aioredis.Redis.from_url(redis_url)
        stop = asyncio.Event()
        archiver = Archiver(archiving_store(redis_client, file_archive_url(tmp_path / "archive")), name="scaled-down")
        task = asyncio.create_task(archiver.run(stop, interval_s=0.05))
        deadline = time.monotonic() + 10
        while not await redis_client.sismember(archivers_key(), "scaled-down") and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()  # what SIGTERM or SIGINT does to `almanac archiver` (bootstrap.run_until_stopped)
        await task
        await redis_client.aclose()

    # Given an archiver that ran (and joined the set), then was stopped on purpose
    asyncio.run(run_and_stop())

    # Then it is out of the set, its figures are gone, and /metrics shows no archiver
    assert client.smembers(archivers_key()) == set()
    assert not client.exists(archiver_stats_key("scaled-down"))
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway")).model_copy(
        update={"engine_shards": "none"})
    with TestClient(create_app(settings)) as api:
        token = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        text = api.get("/metrics", headers={"Authorization": f"Bearer {token}"}).text
    assert "almanac_archiver_up 0" in text and 'archiver="scaled-down"' not in text


def test_a_redis_refusing_the_registrys_writes_still_answers_health_with_the_projector_missing(
        redis_url: str, client: redis.Redis, tmp_path: Path) -> None:
    # Given projector "b", whose heartbeat expired a moment ago (never seen missing: a look would write its mark),
    # and "a" beating
    asyncio.run(beat(redis_url, "b", 200))
    time.sleep(0.4)
    asyncio.run(beat(redis_url, "a", LIVE_TTL_MS))
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway"))
    limit, policy = client.config_get("maxmemory")["maxmemory"], client.config_get("maxmemory-policy")[
        "maxmemory-policy"]
    with TestClient(create_app(settings)) as api:
        deadline = time.monotonic() + 30
        while api.get("/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        client.hdel(projector_stats_key("b"), MISSING_FIELD)  # the ready looks marked it: unmark it
        # and Redis at its maxmemory with noeviction: it answers PING and reads, refuses every write
        try:
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", 1)

            # When /health is asked
            answer = api.get("/health")
        finally:
            client.config_set("maxmemory", limit)
            client.config_set("maxmemory-policy", policy)

    # Then it answers as ever: 200, "b" listed missing (its mark not written: the registry's bookkeeping is best
    # effort)
    assert answer.status_code == 200, answer.text
    assert [m["name"] for m in answer.json()["projector"]["missing"]] == ["b"], answer.text
    assert not client.hexists(projector_stats_key("b"), MISSING_FIELD)
