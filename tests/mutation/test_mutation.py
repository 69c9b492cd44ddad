"""The golden logs catch at least 95% of the behaviour-changing single-point mutations of each version's rules.

Deselected by default (minutes of CPU): ``nice -n 10 .venv/bin/pytest -m mutation tests/mutation``. It runs
``python -m tests.mutation.run`` on an even sample of each version's mutants (``ALMANAC_MUTATION_SAMPLE``,
default 120; ``0`` for all of them); the whole run and its figures are in docs/golden-logs.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.mutation
def test_the_golden_logs_catch_the_behaviour_changing_mutants(tmp_path):
    sample = int(os.environ.get("ALMANAC_MUTATION_SAMPLE", "120"))
    out = tmp_path / "mutation.json"
    command = [sys.executable, "-m", "tests.mutation.run", "--out", str(out), "--goal", "0.95"]
    if sample:
        command += ["--sample", str(sample)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    report = json.loads(out.read_text())
    assert report, done.stderr
    for ref, figures in report.items():
        assert figures["caught"] > 0, f"{ref}: no mutant caught; is the harness applying them?"
        assert figures["share_caught"] >= 0.95, f"{ref}: {figures}"
    assert done.returncode == 0, done.stdout + done.stderr
