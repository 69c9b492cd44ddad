"""The Cluster client of this folder's tests, on the session's three-node Cluster (tests/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from almanac.services.redis_client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "projections"))


@pytest.fixture
async def cluster(cluster_url: str) -> AsyncIterator[Any]:
    """A Cluster client on an empty Cluster (every node flushed)."""
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    yield client
    await client.aclose()
