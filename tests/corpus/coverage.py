"""Branch coverage of each published version's rules by its golden logs with the grown corpus: tests.golden.coverage, reused.

    .venv/bin/python -m tests.corpus.coverage                 # per version: golden logs, then + the grown corpus
    .venv/bin/python -m tests.corpus.coverage --missing       # and the lines and branches nobody runs
    .venv/bin/python -m tests.corpus.coverage --grown realm@1 # the last row only (faster)

``tests/golden/coverage.py`` measures the frozen golden logs (make.py's game and the golden corpus) and
cannot be told of another corpus (it is frozen too). This runs its own measurement (``_measure_here``: a
fresh interpreter, branch mode, the version's rule modules only) with its list of games widened by the grown
corpus' (``tests.corpus.grown.games_for``), so the figures are the same measure over both corpora.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.corpus import grown
from tests.golden import coverage as golden_coverage
from tests.golden.corpus import rules_package
from tests.golden.make import HERE, published

ROOT = HERE.parent.parent


def _with_grown(measure_games: Any) -> Any:
    def games_of(manifest: Any, with_corpus: bool) -> list[dict[str, Any]]:
        return measure_games(manifest, with_corpus) + (grown.games_for(manifest) if with_corpus else [])
    return games_of


def measure(manifest: Any, with_grown: bool) -> dict[str, Any]:
    """Coverage of one version's replay (golden logs, and the grown corpus when ``with_grown``), in a fresh
    interpreter as ``tests.golden.coverage.measure`` does."""
    command = [sys.executable, "-m", "tests.corpus.coverage", "--measure", manifest.ref, rules_package(manifest),
               "grown" if with_grown else "golden"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"{manifest.ref}: measuring failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--measure"]:
        if argv[3] == "grown":  # the golden tool's own list of games, widened by the grown corpus
            golden_coverage.games_of = _with_grown(golden_coverage.games_of)
        print(json.dumps(golden_coverage._measure_here(argv[1], argv[2], True)))  # noqa: SLF001 - reused as is
        return
    show_missing = "--missing" in argv
    rows = (("+ grown corpus", True),) if "--grown" in argv else (("golden logs", False), ("+ grown corpus", True))
    refs = [a for a in argv if not a.startswith("--")]
    print(f"{'version':<12} {'logs':<16} {'games':>5}  {'lines':<22} {'branches':<22}", flush=True)
    for manifest in published():
        if refs and manifest.ref not in refs:
            continue
        for label, with_grown in rows:
            found = measure(manifest, with_grown)
            print(f"{manifest.ref:<12} {label:<16} {found['games']:>5}  {golden_coverage._share(found['lines']):<22} "  # noqa: SLF001
                  f"{golden_coverage._share(found['branches']):<22}", flush=True)  # noqa: SLF001
        if show_missing:
            for name, gaps in found["missing"].items():
                print(f"    {name}: lines {gaps['lines']} branches {gaps['branches']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
