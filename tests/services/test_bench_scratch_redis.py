"""A benchmark never runs on a deployment's Redis unless told to: `almanac bench clock` (which fills and flushes the
Redis it is given) started in the folder of a running `almanac up`, or in a folder below it, leaves its rooms alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from almanac.services.embedded_redis import EmbeddedRedis

CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


@pytest.mark.slow
def test_a_benchmark_run_where_a_stack_runs_leaves_the_stacks_redis_alone(tmp_path: Path) -> None:
    # Given a project whose data directory's embedded Redis is running (as `almanac up` leaves it) with a room in it
    project = tmp_path / "project"
    below = project / "notes"
    below.mkdir(parents=True)
    server = EmbeddedRedis(project / ".almanac", persist=False).start()
    try:
        client = redis.Redis.from_url(server.url)
        client.set("alm:room-of-a-player", "precious")
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS", "ALMANAC"))}
        for where in (project, below):
            # When the operator runs a benchmark there, with no REDIS_URL
            ran = subprocess.run([sys.executable, "-c", CHILD, "bench", "clock", "--pending", "1000", "--due", "100",
                                  "--seconds", "1"], env=bare, cwd=where, capture_output=True, text=True, timeout=180)
            assert ran.returncode == 0, ran.stdout + ran.stderr
            assert "clock" in ran.stdout
            # Then the stack's Redis still holds the room and nothing of the benchmark's; no data directory was made
            assert client.get("alm:room-of-a-player") == b"precious"
            assert client.dbsize() == 1, client.keys("*")[:10]
        assert not (below / ".almanac").exists()
        client.close()
    finally:
        server.stop()
