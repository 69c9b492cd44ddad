"""The suite's own distribution over xdist workers (tests/conftest.py): grouped files together and first.

Given a folder of five files, two of them (collected last) marked ``xdist_group("g")``, run by pytest with the
suite's conftest as a plugin on two workers (``--dist loadgroup``, as pyproject's addopts), then both grouped
files run on one worker, one after the other, before anything else on it. That is what keeps the Redis
Cluster failover files off each other's workers and starts the longest files at once; on pytest >= 9.2 xdist's
own grouping (a "@group" suffix on node ids) is lost silently, and it was how they ran before the conftest
carried the groups itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

FILE = """\
import os, time
import pytest
{mark}

@pytest.mark.parametrize("i", range(3))
def test_{name}(i):
    with open({record!r}, "a") as record:
        record.write(f"{{time.monotonic()}} {{os.environ['PYTEST_XDIST_WORKER']}} {name}\\n")
    time.sleep(0.1)
"""


def test_grouped_files_run_together_on_one_worker_before_the_rest(tmp_path: Path) -> None:
    # Given five files in collection order a..e, d and e in group "g"
    record = tmp_path / "record.txt"
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in "abcde":
        mark = 'pytestmark = pytest.mark.xdist_group("g")' if name in "de" else ""
        (suite / f"test_{name}.py").write_text(FILE.format(mark=mark, name=name, record=str(record)))
    # When the suite's conftest distributes them over two workers (each starting its own Redis if asked)
    env = {name: value for name, value in os.environ.items() if name not in ("REDIS_URL", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(TESTS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-n", "2", "--dist", "loadgroup",
                          "-p", "no:cacheprovider", "-q", str(suite)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    runs = [line.split() for line in record.read_text().splitlines()]
    assert len(runs) == 15
    # Then d and e ran on one worker, and were the first files it ran
    workers = {name: {worker for _, worker, ran in runs if ran == name} for name in "abcde"}
    assert len(workers["d"] | workers["e"]) == 1, workers
    (grouped_worker,) = workers["d"]
    on_it = [ran for _, worker, ran in sorted(runs, key=lambda run: float(run[0])) if worker == grouped_worker]
    assert on_it[:6] == ["d"] * 3 + ["e"] * 3, on_it
