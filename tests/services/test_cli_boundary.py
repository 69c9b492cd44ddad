"""The CLI's exception boundary: anything unexpected is one line on stderr and exit code 1, no traceback
unless ALMANAC_LOG_LEVEL=debug (then a bounded one)."""

from __future__ import annotations

import os
import subprocess
import sys

# A command that fails unexpectedly, deep in a call stack holding a large local, registered beside the real ones.
FAILING = """
import sys
from almanac.services.cli import app, main

def dig(level):
    ballast = "LOCAL-" + "x" * 5000
    if level == 0:
        raise KeyError("no such thing\\nsecond line")
    dig(level - 1)

@app.command("boom")
def boom():
    dig(200)

sys.argv = ["almanac", "boom"]
main()
"""


def run(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FAILING], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ALMANAC_LOG_LEVEL": "info", **env})


def test_an_unexpected_error_is_one_line_and_a_non_zero_exit() -> None:
    failed = run()
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        "error: unexpected KeyError: 'no such thing\\nsecond line' (ALMANAC_LOG_LEVEL=debug shows the traceback)"
    ]
    assert "Traceback" not in failed.stdout + failed.stderr


def test_debug_adds_a_bounded_traceback_without_locals() -> None:
    failed = run(ALMANAC_LOG_LEVEL="debug")
    assert failed.returncode == 1
    assert "Traceback" in failed.stderr and "LOCAL-" not in failed.stderr
    assert len(failed.stderr) < 10_000 and failed.stderr.splitlines()[-1].startswith("error: unexpected KeyError")


# The CLI in an environment where the almanac-bench distribution is not installed (its modules cannot be found).
WITHOUT_BENCH = """
import sys

class NoBench:
    def find_spec(self, name, path=None, target=None):
        if name == "almanac.bench" or name.startswith("almanac.bench."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoBench())
from almanac.services.cli import main

sys.argv = ["almanac", "bench", "rules", "claim"]
main()
"""


def test_a_benchmark_without_the_bench_distribution_says_in_one_line_how_to_install_it() -> None:
    failed = subprocess.run([sys.executable, "-c", WITHOUT_BENCH], capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        "error: the benchmarks are not installed (they are not part of the almanac wheel): from a checkout of the "
        "repository, pip install -e ./bench"
    ]
