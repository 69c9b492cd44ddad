"""The mutation test replays the grown corpus (tests/corpus) after the golden logs, and names what only it catches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_mutant_only_the_grown_corpus_sees_is_caught_and_named(tmp_path):
    # Given sectors' population cap check with its sum turned into a difference (``target.population +
    # command.count > cap`` -> ``-``): no golden log moves people past a cap, so every golden log still replays,
    # but the grown corpus' hungry colony moves one person into a full mountain and was refused.
    out = tmp_path / "mutation.json"
    # When the mutation test tries that one mutant
    done = subprocess.run([sys.executable, "-m", "tests.mutation.run", "sectors@1", "--jobs", "1",
                           "--match", "rules.py:417:7 + -> -", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    # Then it is caught, by the grown corpus alone, and the report says so
    report = json.loads(out.read_text())["sectors@1"]
    assert report["tried"] == 1, done.stdout + done.stderr
    assert report["caught"] == 1 and report["caught_only_by_grown"] == ["rules.py:417:7 + -> -"]
    assert done.returncode == 0
