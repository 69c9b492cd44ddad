"""One real three-node Redis Cluster on loopback for every test of this folder."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import local_cluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "projections"))


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_cluster(tmp_path_factory.mktemp("cluster")) as url:
        yield url
