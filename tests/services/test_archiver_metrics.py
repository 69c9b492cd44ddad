"""The archiver's figures on the gateway's /metrics are the archiver's work: given two ended realm rooms projected
and past their dedupe window, when an archiver pass moves them, then rooms and bytes count them (the bytes are the
objects' sizes), the errors none, the pass's rooms/s is positive and the lag is gone; and when the archive store
cannot be written, the pass counts one error per room, archives nothing, and the lag shows the rooms still waiting
and for how long; once the store works again the next pass moves them and the errors stay counted."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import redis
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url
from fastapi.testclient import TestClient
from forensics_support import RealmTable
from suite_settings import suite_settings

from almanac.projections.projector import Projector
from almanac.services.archiver import Archiver
from almanac.services.gateway import create_app
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR

ROOMS = ("metrics-a", "metrics-b")


async def ended_rooms(redis_url: str, url: str) -> dict[str, int]:
    """Two ended realm rooms, projected (on the archiver's list): room -> the time it ended (its list score)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        store = archiving_store(client, url)
        for room in ROOMS:
            table = RealmTable(store, room)
            await table.create("realm@1")
            await table.play_mining(2)
            assert (await table.send("alice", {"kind": "end_room"})).accepted
        await Projector(client, store.shard_count, store=store).drain()
        return {room: int(await client.zscore(store.keys.ended_rooms(store.keys.shard(room)), room)) for room in ROOMS}
    finally:
        await client.aclose()


class Pass:
    """One archiver (its totals live as long as it does) on a store of the archive at ``url``."""

    def __init__(self, redis_url: str, url: str) -> None:
        self.redis_url, self.url, self.archiver = redis_url, url, None

    async def run(self) -> list:
        client = aioredis.Redis.from_url(self.redis_url)
        try:
            if self.archiver is None:
                self.archiver = Archiver(archiving_store(client, self.url), retain_s=0, name="metered")
            self.archiver.store = archiving_store(client, self.url)  # this loop's client; the totals stay
            return await self.archiver.run_once()
        finally:
            await client.aclose()


def archiver_metrics(redis_url: str, tmp_path: Path, auditor: bool = True) -> dict[str, float]:
    """The almanac_archiver_* samples of the gateway's /metrics for the archiver "metered", as an auditor reads them
    (or the public)."""
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path / "gateway")).model_copy(
        update={"engine_shards": "none"})
    with TestClient(create_app(settings)) as api:
        token = api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        text = api.get("/metrics", headers={"Authorization": f"Bearer {token}"} if auditor else {}).text
    return {name: float(value) for name, value in
            re.findall(r'^(almanac_archiver_\w+)\{archiver="metered"\} (\S+)$', text, re.MULTILINE)}


def test_the_archivers_metrics_count_what_a_pass_archived(redis_url: str, tmp_path: Path) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    url = file_archive_url(tmp_path / "archive")
    asyncio.run(ended_rooms(redis_url, url))

    results = asyncio.run(Pass(redis_url, url).run())

    assert sorted((r.room, r.status) for r in results) == [(room, "archived") for room in ROOMS]
    written = sum(path.stat().st_size for path in (tmp_path / "archive").rglob("*.zst"))
    assert written == sum(r.size for r in results) > 0
    metrics = archiver_metrics(redis_url, tmp_path)
    assert metrics["almanac_archiver_rooms_total"] == 2
    assert metrics["almanac_archiver_bytes_total"] == written  # the objects' compressed sizes, as stored
    assert metrics["almanac_archiver_commands_total"] == sum(r.commands for r in results) > 0
    # refused commands among them, and their records in the objects' bytes: the public reads every figure but those
    # two (tests/gateway/test_refusal_silence.py)
    public = archiver_metrics(redis_url, tmp_path, auditor=False)
    assert "almanac_archiver_commands_total" not in public and "almanac_archiver_bytes_total" not in public
    assert public["almanac_archiver_rooms_total"] == 2
    assert metrics["almanac_archiver_errors_total"] == 0
    assert metrics["almanac_archiver_rooms_per_s"] > 0
    assert metrics["almanac_archiver_lag_rooms"] == 0 and metrics["almanac_archiver_lag_s"] == 0


def test_a_failing_archive_store_shows_as_errors_and_lag_until_it_works_again(redis_url: str, tmp_path: Path) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    # the archive's directory cannot be made: a file stands where its parent should be
    blocker = tmp_path / "blocked"
    blocker.write_text("not a directory")
    url = file_archive_url(blocker / "archive")
    ended = asyncio.run(ended_rooms(redis_url, url))
    archiver = Pass(redis_url, url)

    before = time.time()
    results = asyncio.run(archiver.run())
    after = time.time()

    assert results == []  # nothing moved: both rooms still in Redis, still on the list
    metrics = archiver_metrics(redis_url, tmp_path)
    assert metrics["almanac_archiver_errors_total"] == 2  # one per room whose move failed
    assert metrics["almanac_archiver_rooms_total"] == 0 and metrics["almanac_archiver_bytes_total"] == 0
    assert metrics["almanac_archiver_rooms_per_s"] == 0
    assert metrics["almanac_archiver_lag_rooms"] == 2
    # how long the oldest has waited past its window (0 s here): from its end to the pass' report
    oldest = min(ended.values()) / 1000
    assert before - oldest - 1 <= metrics["almanac_archiver_lag_s"] <= after - oldest + 1

    blocker.unlink()  # the store works again
    results = asyncio.run(archiver.run())

    assert sorted((r.room, r.status) for r in results) == [(room, "archived") for room in ROOMS]
    metrics = archiver_metrics(redis_url, tmp_path)
    assert metrics["almanac_archiver_errors_total"] == 2  # a counter: the failed pass stays counted
    assert metrics["almanac_archiver_rooms_total"] == 2
    assert metrics["almanac_archiver_bytes_total"] == sum(r.size for r in results)
    assert metrics["almanac_archiver_lag_rooms"] == 0 and metrics["almanac_archiver_lag_s"] == 0
