"""The suite's own distribution over xdist workers (tests/conftest.py): grouped files together and first.

Given a folder of five files, two of them (collected last) marked ``xdist_group("g")``, run by pytest with the
suite's conftest as a plugin on two workers (``--dist loadgroup``, as pyproject's addopts), then both grouped
files run on one worker, one after the other, before anything else on it. That is what keeps the Redis
Cluster failover files off each other's workers and starts the longest files at once; on pytest >= 9.2 xdist's
own grouping (a "@group" suffix on node ids) is lost silently, and it was how they ran before the conftest
carried the groups itself. And the files marked ``lasts(seconds)`` (a long file's time on one worker) are sent
next, longest first, before the files collected ahead of them: a long file sent last would be the run's tail.
"""

from __future__ import annotations

import json
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
    busy_until = time.process_time() + 0.05  # CPU the timeline must count
    while time.process_time() < busy_until:
        pass
    time.sleep(0.1)
"""


def distributed(tmp_path: Path, marks: dict[str, str]) -> list[list[str]]:
    """Five files a..e (each file's ``marks``) run by the suite's conftest over two workers (each starting its own
    Redis if asked): (when, worker, file) of each test, in the order the tests wrote them."""
    record = tmp_path / "record.txt"
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in "abcde":
        (suite / f"test_{name}.py").write_text(FILE.format(mark=marks.get(name, ""), name=name, record=str(record)))
    env = {name: value for name, value in os.environ.items() if name not in ("REDIS_URL", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(TESTS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-n", "2", "--dist", "loadgroup",
                          "-p", "no:cacheprovider", "-q", "--suite-timeline", str(tmp_path / "timeline.json"),
                          str(suite)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    runs = [line.split() for line in record.read_text().splitlines()]
    assert len(runs) == 15
    return runs


def test_grouped_files_run_together_on_one_worker_before_the_rest(tmp_path: Path) -> None:
    # Given five files in collection order a..e, d and e in group "g"
    # When the suite's conftest distributes them over two workers
    runs = distributed(tmp_path, {name: 'pytestmark = pytest.mark.xdist_group("g")' for name in "de"})
    # Then d and e ran on one worker, and were the first files it ran
    workers = {name: {worker for _, worker, ran in runs if ran == name} for name in "abcde"}
    assert len(workers["d"] | workers["e"]) == 1, workers
    (grouped_worker,) = workers["d"]
    on_it = [ran for _, worker, ran in sorted(runs, key=lambda run: float(run[0])) if worker == grouped_worker]
    assert on_it[:6] == ["d"] * 3 + ["e"] * 3, on_it
    # and --suite-timeline wrote each file's worker as the tests saw it, the time its tests took and their CPU
    timeline = json.loads((tmp_path / "timeline.json").read_text())
    assert {Path(path).stem[len("test_"):]: row["worker"] for path, row in timeline.items()} == {
        name: worker for name, (worker,) in workers.items()}, timeline
    assert all(row["start"] < row["stop"] and row["seconds"] >= 0.45 and row["cpu_s"] >= 0.15
               for row in timeline.values()), timeline


def test_files_marked_lasts_are_sent_after_the_grouped_ones_longest_first(tmp_path: Path) -> None:
    # Given five files in collection order a..e, d and e in group "g", b marked as lasting 5 s and c 9 s
    marks = {name: 'pytestmark = pytest.mark.xdist_group("g")' for name in "de"}
    marks |= {"b": "pytestmark = pytest.mark.lasts(5)", "c": "pytestmark = pytest.mark.lasts(9)"}
    # When the suite's conftest distributes them over two workers
    runs = distributed(tmp_path, marks)
    # Then they were sent c, b, a: the other worker began with c, and each worker ran them in that order (a worker
    # runs what it is sent in turn; which worker took b and a depends on which ran short first)
    order = sorted(runs, key=lambda run: float(run[0]))
    on_worker = {worker: list(dict.fromkeys(ran for _, at, ran in order if at == worker)) for _, worker, _ in runs}
    assert sorted(files[0] for files in on_worker.values()) == ["c", "d"], on_worker
    for files in on_worker.values():
        outside = [ran for ran in files if ran in "abc"]
        assert outside == sorted(outside, key="cba".index), on_worker
