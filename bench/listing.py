"""The listing's cost with many finished archived rooms: GET /rooms and GET /status/rooms timed on a gateway in process.

Builds the store the archive index leaves (``storage.archive_index``: finished rooms' listing rows in zstd msgpack
blocks per shard, a pass's rooms a block) with ``--rows`` archived rooms and ``--live`` rooms whose rows Redis holds,
then asks each route ``--calls`` times as the console does (its first page, no parameters) and prints p50 and p90.
It uses only what every version of the gateway has, so the same script times a version before the pages:
``python -m almanac.bench.listing --redis-url URL [--no-build]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time

import msgspec
import zstandard
from fastapi.testclient import TestClient

from almanac.services import bootstrap
from almanac.services.gateway import create_app

PLAYERS = ["ann", "bo", "cy", "di"]


def row(room: str, created_ms: int, over: bool) -> bytes:
    """A listing row as projections.read_model_rows.room_listing writes it."""
    return msgspec.json.encode({"room": room, "ruleset": "realm", "ruleset_version": 1, "version": 120,
                                "players": PLAYERS, "created_by": "ann", "created_at_ms": created_ms,
                                "challenge": None, "over": over, "ended": over, "updated_at_ms": created_ms + 60_000,
                                "fork": None})


def build(url: str, shard_count: int, rows: int, per_block: int, live: int) -> None:
    """Archived rows in blocks as archive_index.compact writes them, and ``live`` rows in Redis' listing hashes."""
    client, keys = bootstrap.tool_sync_client(url), bootstrap.process_keys(shard_count)
    client.flushdb()
    start = 1_700_000_000_000
    by_shard: dict[int, dict[str, bytes]] = {}
    compressor = zstandard.ZstdCompressor(level=19)
    with client.pipeline(transaction=False) as pipe:
        for index in range(rows):
            room = f"arch-{index:07d}"
            shard = keys.shard(room)
            block = by_shard.setdefault(shard, {})
            block[room] = row(room, start + index * 1000, True)
            if len(block) == per_block or index == rows - 1:
                for full_shard, full in list(by_shard.items()):
                    if len(full) == per_block or index == rows - 1:
                        data = compressor.compress(msgspec.msgpack.encode(dict(sorted(full.items()))))
                        pipe.hset(keys.archived_listings(full_shard), hashlib.sha256(data).hexdigest()[:32], data)
                        del by_shard[full_shard]
        for index in range(live):
            room = f"live-{index:04d}"
            pipe.hset(keys.listings(keys.shard(room)), room, row(room, start + (rows + index) * 1000, False))
        pipe.execute()


def timed(http: TestClient, url: str, calls: int) -> tuple[float, float, int]:
    """p50 and p90 in ms over ``calls`` answers, and the rooms the last answer held."""
    spent, shown = [], 0
    for _ in range(calls):
        started = time.perf_counter()
        answer = http.get(url)
        spent.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text
        shown = len(answer.json()["rooms"])
    spent.sort()
    return statistics.median(spent), spent[int(len(spent) * 0.9)], shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", help="a Redis to build in (flushed!); absent: one started here")
    parser.add_argument("--rows", type=int, default=20_000, help="finished archived rooms (listing rows in blocks)")
    parser.add_argument("--per-block", type=int, default=100, help="rooms an archiver pass puts in a shard's block")
    parser.add_argument("--live", type=int, default=40, help="rooms whose listing rows Redis holds")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--no-build", action="store_true", help="time the store built by an earlier run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="almanac-bench-listing-") as data_dir:
        given = bootstrap.default_settings(redis_url=args.redis_url, data_dir=data_dir)
        with bootstrap.scratch_redis_url(given) as url:  # --redis-url, else a throwaway embedded one
            settings = bootstrap.default_settings(redis_url=url, data_dir=data_dir)
            settings = settings.model_copy(update={"engine_shards": "none"})  # reads only: no shard to hold
            if not args.no_build:
                started = time.perf_counter()
                build(url, settings.shard_count, args.rows, args.per_block, args.live)
                print(f"built {args.rows} archived rows + {args.live} live in {time.perf_counter() - started:.1f} s")
            with TestClient(create_app(settings)) as http:
                for route in ("/rooms", "/status/rooms"):
                    first_ms = timed(http, route, 1)[0]
                    p50, p90, shown = timed(http, route, args.calls)
                    print(f"GET {route}: first call {first_ms:.1f} ms, then p50 {p50:.1f} ms, p90 {p90:.1f} ms over "
                          f"{args.calls} calls ({shown} rooms an answer); load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
