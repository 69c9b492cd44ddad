"""How much of each published version's code the golden logs run: line and branch coverage, per version.

    .venv/bin/python -m tests.golden.coverage            # the one-game logs (make.py) and the corpus
    .venv/bin/python -m tests.golden.coverage --missing  # and the lines and branches nobody runs

For each version, coverage.py (branch mode) measures a replay of that version's golden logs alone,
restricted to the version's package (the one its fingerprint covers, found through the registry), and
prints two rows: the one-game log of ``make.py`` ("before": what the golden test covered alone until
the corpus) and that log with the corpus ("after"). What holds no rules is left out of the figures
(``corpus.NOT_RULES``: the bot, audit stories, wiring; and each Decider's ``summary``). The replay is
the golden test's own (``corpus.check``), so the figures say what the test exercises.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import coverage

from almanac.events import registry
from almanac.services.forensics.verify import verify_room
from almanac.storage.export_store import ExportFileStore

from .corpus import NOT_RULES, PRESENTATION_FUNCTIONS, check, games_for, rules_package
from .make import HERE, path_for as single_path_for, published


def games_of(manifest: Any, with_corpus: bool) -> list[dict[str, Any]]:
    single = json.loads(single_path_for(manifest).read_text())
    games: list[dict[str, Any]] = [{"export": single, "expected": {}}]
    if with_corpus:
        games += games_for(manifest)
    return games


def measure(manifest: Any, with_corpus: bool) -> dict[str, Any]:
    """Coverage of one version's replay, measured in a fresh interpreter so that its modules' own lines
    (imports, tables, definitions) count as run when they are imported."""
    package = rules_package(manifest)
    command = [sys.executable, "-m", "tests.golden.coverage", "--measure", manifest.ref, package,
               "corpus" if with_corpus else "single"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent.parent, check=False)
    if done.returncode:
        raise SystemExit(f"{manifest.ref}: measuring failed:\n{done.stderr}")
    return json.loads(done.stdout)


def _measure_here(ref: str, package: str, with_corpus: bool) -> dict[str, Any]:
    cov = coverage.Coverage(branch=True, source_pkgs=[package], omit=[f"*/{name}" for name in NOT_RULES],
                            data_file=None)
    for name in PRESENTATION_FUNCTIONS:
        cov.exclude(rf"def {name}\(")  # the whole function: coverage.py excludes a def's block with it
    cov.start()
    try:
        manifest = registry.manifest(ref)
        problems = [check(game) for game in games_of(manifest, with_corpus) if game["expected"]]
        problems += [single_problem(manifest)]
    finally:
        cov.stop()
    if any(problems):
        raise SystemExit(f"{ref}: a golden log does not replay: {[p for p in problems if p]}")
    lines = statements = branches = taken = 0
    missing: dict[str, Any] = {}
    for path in cov.get_data().measured_files():
        analysis = cov._analyze(path)  # noqa: SLF001 - coverage.py's per-file numbers and missed arcs
        numbers = analysis.numbers
        statements += numbers.n_statements
        lines += numbers.n_statements - numbers.n_missing
        branches += numbers.n_branches
        taken += numbers.n_branches - numbers.n_missing_branches
        gaps = {"lines": sorted(analysis.missing), "branches": sorted(
            f"{a}->{b}" for a, targets in analysis.missing_branch_arcs().items() for b in targets)}
        if gaps["lines"] or gaps["branches"]:
            missing[str(Path(path).relative_to(Path(path).parents[1]))] = gaps
    games = len(games_of(manifest, with_corpus))
    return {"games": games, "lines": (lines, statements), "branches": (taken, branches), "missing": missing}


def single_problem(manifest: Any) -> str | None:
    """The one-game log of make.py, verified as the golden test does (it has no recorded digests)."""
    path = single_path_for(manifest)
    report = asyncio.run(verify_room(ExportFileStore.open(path), json.loads(path.read_text())["room"]))
    return None if report.ok else f"{path.name}: {report.divergence.message}"


def _share(pair: tuple[int, int]) -> str:
    done, total = pair
    return f"{done}/{total} ({100 * done / total:.1f}%)" if total else "-"


def main(argv: list[str]) -> None:
    if argv[:1] == ["--measure"]:
        print(json.dumps(_measure_here(argv[1], argv[2], argv[3] == "corpus")))
        return
    show_missing = "--missing" in argv
    refs = [a for a in argv if not a.startswith("--")]
    registry.all_manifests()
    print(f"{'version':<12} {'logs':<22} {'games':>5}  {'lines':<22} {'branches':<22}")
    for manifest in published():
        if refs and manifest.ref not in refs:
            continue
        for label, with_corpus in (("make.py (before)", False), ("+ corpus (after)", True)):
            found = measure(manifest, with_corpus)
            print(f"{manifest.ref:<12} {label:<22} {found['games']:>5}  {_share(found['lines']):<22} "
                  f"{_share(found['branches']):<22}")
        if show_missing:
            for name, gaps in found["missing"].items():
                print(f"    {name}: lines {gaps['lines']} branches {gaps['branches']}")


if __name__ == "__main__":
    main(sys.argv[1:])
