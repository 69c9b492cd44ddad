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


def test_board_mutants_only_the_grown_batches_see_are_caught(tmp_path):
    # Given two mutants of board's rules every golden log of board@2 survives: borderlands' full rows minus its
    # full columns (``missions.py:98`` ``+`` -> ``-``), which the adopted wide game 112 (batch 3-adopted) scores;
    # and in-map placements each one row taller than the element (``rules.py:95`` ``1 + ...`` -> ``2 + ...``),
    # which lists no placement on the map's last row, so a skip is accepted where the element fits only there:
    # batch 4-skips squeezes the map until the next element fits only on the last row and asks for a skip
    # before every placement
    out = tmp_path / "mutation.json"
    mutants = ["missions.py:98:8 + -> -", "rules.py:95:17 1 -> 2"]
    # When the mutation test tries them
    done = subprocess.run([sys.executable, "-m", "tests.mutation.run", "board@2", "--jobs", "1",
                           *(arg for name in mutants for arg in ("--match", name)), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    # Then both are caught, by the grown corpus alone
    report = json.loads(out.read_text())["board@2"]
    assert report["tried"] == 2, done.stdout + done.stderr
    assert report["caught"] == 2 and sorted(report["caught_only_by_grown"]) == sorted(mutants)
