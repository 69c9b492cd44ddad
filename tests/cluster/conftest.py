"""One real three-node Redis Cluster on loopback for every test of this folder."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import local_cluster

from almanac.services.redis_client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "projections"))


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_cluster(tmp_path_factory.mktemp("cluster")) as url:
        yield url


@pytest.fixture
async def cluster(cluster_url: str) -> AsyncIterator[Any]:
    """A Cluster client on an empty Cluster (every node flushed)."""
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    yield client
    await client.aclose()
