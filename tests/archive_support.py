"""The archive tier in tests: an S3-compatible server process (moto's server mode) and ended realm rooms archived."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from almanac.services.embedded_redis import free_port
from almanac.storage.archive import ArchiveStore, ArchivingStore


@contextlib.contextmanager
def s3_server(bucket: str = "almanac-archive") -> Iterator[str]:
    """moto's S3 server as a real process on a free loopback port, with ``bucket``; yields ``s3://bucket``
    and sets the AWS_* variables obstore reads for the block (skips when moto[server] is not installed)."""
    try:
        import boto3  # noqa: PLC0415 - only to create the bucket
        import moto.server  # noqa: F401, PLC0415
    except ImportError as error:
        pytest.skip(f"moto[server] is not installed ({error.name}): pip install -e '.[test]'")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield f"s3://{bucket}"
    finally:
        server.terminate()
        server.wait(timeout=10)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def file_archive_url(directory: Path) -> str:
    return directory.resolve().as_uri()


def archiving_store(client, url: str, shard_count: int = 16) -> ArchivingStore:
    return ArchivingStore(client, ArchiveStore(url), shard_count)


class Tier:
    """Where a reader test's rooms live: ``live`` (Redis) or ``archived`` (moved to a directory archive by
    ``settle``). The same test runs on both (the ``tier`` fixture): every reader must not tell them apart."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url

    @property
    def archived(self) -> bool:
        return self.name == "archived"

    def store(self, client, shard_count: int = 16) -> ArchivingStore:
        return archiving_store(client, self.url, shard_count)

    async def settle(self, store, *rooms: str) -> None:
        """Archive the (ended) rooms when this tier is ``archived``; nothing for ``live``."""
        if not self.archived:
            return
        from almanac.storage.archive import archive_room  # noqa: PLC0415

        archiver = store if isinstance(store, ArchivingStore) else self.store(store.client, store.shard_count)
        for room in rooms:
            result = await archive_room(archiver, room)
            assert result.status == "archived", result


async def whole_record(store, room: str) -> dict:
    """Everything a reader can read of a room, through the store's reads (live or archived alike)."""
    return {"events": await store.read_raw(room), "commands": await store.commands(room),
            "rejections": await store.rejections(room), "seed": await store.load_seed(room),
            "nonces": await store.load_nonces(room), "version": await store.latest_version(room),
            "commit_scheme": await store.load_commit_scheme(room)}  # its checkpoints' scheme (bundle-format.md 6.1)


async def expired(client, key: str) -> None:
    """Wait (generously: the host is loaded) until Redis has let ``key`` go (a dedupe record's retention)."""
    deadline = time.monotonic() + 30
    while await client.exists(key):
        assert time.monotonic() < deadline, f"{key} never expired"
        await asyncio.sleep(0.05)
