"""The mutation test: how many single-point changes to a version's rules its golden logs catch.

    nice -n 10 .venv/bin/python -m tests.mutation.run                    # every published version
    nice -n 10 .venv/bin/python -m tests.mutation.run board@1 --jobs 2   # one version, two at a time
    nice -n 10 .venv/bin/python -m tests.mutation.run realm@2 --sample 200 --out /tmp/realm2.json

For each published version (found through the registry; its files are those of the package its
fingerprint covers, as ``tests.golden.corpus.rules_package`` finds it), every mutant of ``tests.mutation.
mutants`` over its rule modules (``rule_modules``: the modules its fingerprint hashes, ``events.fingerprint.
hashed_files``, so whatever the fold or a decision calls is mutated, such as realm's ledger rows in
``trades.py``; not the bot, the audit stories, the event texts or the wiring; and in them not the
presentation functions the fingerprint cuts out, ``PRESENTATION_FUNCTIONS``) is tried in a forked
child that imports the version's package with that one module mutated and replays the version's golden
logs exactly as the golden test does (``make.py``'s game, verified; every corpus game, ``corpus.check``),
stopping at the first difference. A mutant is

- **caught** when a golden log no longer replays (a divergence, an exception, or a replay running past
  ``--timeout`` seconds: a mutant that loops);
- else it **survived**, and is tried once more against a wide corpus: many more games of the same
  recipes with other seeds (``corpus.WIDE_REPEAT`` times each recipe's games, with the salt
  ``--wide-salt``), recorded under the unmutated rules in a temporary directory. A survivor the wide
  corpus catches is **missed**: it changes behaviour and the golden logs did not see it; the first wide
  game that catches it is named. A survivor nothing catches is counted **equivalent**: it changes no
  outcome on any game we could play (an estimate: a mutant whose difference needs a game none of these
  reach is counted here too); equivalent survivors on lines no golden game runs are reported apart, as
  **unreached** (``tests.golden.coverage``): nothing shows them equivalent, only that no game reaches them.

Games are adopted from the salt "wide" (``--wide-salt wide``): the run names, for each missed mutant, the first
wide game that catches it (``caught_by_wide_game``), and a batch of the grown corpus records it exactly
(``tests.corpus.grown.Adopted(index, "wide")``: tests/golden is frozen, so the golden corpus' ``ADOPTED`` takes no
more). The figures are measured against the salt "check" (the default), games the corpus never chose from,
so that adopting does not flatter them.

The figure per version is caught / (caught + missed). ``--sample N`` tries N mutants spread evenly over
the list instead of all (the figure is then an estimate). Exit status 1 when a version's figure is below
``--goal`` (default 0.95).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.abc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from almanac.events.fingerprint import PRESENTATION_FUNCTIONS, hashed_files
from tests.corpus import grown
from tests.golden.corpus import check, games_for
from tests.golden.coverage import single_problem
from tests.golden.make import path_for as single_path_for
from tests.mutation.mutants import Mutant, mutants_of, mutated_code

ROOT = Path(__file__).resolve().parents[2]
# A child's exit status: SURVIVED, NOT_LOADED, CAUGHT (by a crash, a timeout or a game past BY_GAME's range),
# or BY_GAME + 1 + k when game k failed first (BY_GAME for make.py's game).
CAUGHT, SURVIVED, NOT_LOADED, BY_GAME = 1, 0, 3, 10


def rule_modules(package: str) -> list[tuple[str, str]]:
    """(module name, file) of every Python module of ``package`` its fingerprint hashes: the code that decides and
    folds (``corpus.rule_modules`` names files by a list of its own, which left out realm's ledger rows in audit.py
    while the fold used them; the fingerprint refuses rule code that uses what it leaves out)."""
    root = Path(importlib.util.find_spec(package).origin).parent
    found = []
    for relative in hashed_files(package):
        if relative.endswith(".py"):
            parts = (package, *Path(relative).with_suffix("").parts)
            found.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), str(root / relative)))
    return found


def plan() -> dict[str, Any]:
    """Per published version: its package and modules (read in a fresh interpreter, so this one never
    imports a rule-set: each mutant's child imports it, mutated, for the first time)."""
    code = ("import json; from tests.golden.make import published; from tests.golden.corpus import rules_package\n"
            "from tests.mutation.run import rule_modules\n"
            "print(json.dumps({m.ref: {'package': rules_package(m), 'modules': rule_modules(rules_package(m))} "
            "for m in published()}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout)


class _MutatedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one module from a mutated AST; every other import is left to the normal finders."""

    def __init__(self, mutant: Mutant, source: str) -> None:
        self.mutant, self.source = mutant, source

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.mutant.module:
            return None
        is_package = self.mutant.path.endswith("__init__.py")
        spec = importlib.util.spec_from_file_location(fullname, self.mutant.path, loader=self,
                                                      submodule_search_locations=[str(Path(self.mutant.path).parent)]
                                                      if is_package else None)
        return spec

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(mutated_code(self.mutant, self.source), module.__dict__)  # noqa: S102 - the mutant under test


def first_failing(ref: str, games: list[dict[str, Any]]) -> int | None:
    """The first golden log of ``ref`` that does not replay exactly (the golden test's own checks): -1 for
    make.py's game, else the index of the corpus game; None when every one replays."""
    from almanac.events import registry  # noqa: PLC0415 - imported in the child, after the mutant's finder

    manifest = registry.manifest(ref)
    if single_path_for(manifest).exists() and single_problem(manifest) is not None:
        return -1
    return next((index for index, game in enumerate(games) if check(game) is not None), None)


def _child(mutant: Mutant | None, source: str, ref: str, games: list[dict[str, Any]], timeout: float) -> None:
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    code = CAUGHT
    finder = _MutatedModule(mutant, source) if mutant is not None else None
    try:
        if finder is not None:
            sys.meta_path.insert(0, finder)
        failing = first_failing(ref, games)
        code = SURVIVED if failing is None else BY_GAME + 1 + failing if failing < 240 else CAUGHT
    except BaseException:  # noqa: BLE001 - a mutant that crashes a replay is caught by the golden test
        code = CAUGHT
    if finder is not None and code == SURVIVED:
        loaded = sys.modules.get(finder.mutant.module)
        if loaded is None or loaded.__spec__.loader is not finder:
            code = NOT_LOADED  # a module no replay imports (a test helper): its mutants say nothing
    os._exit(code)


def run_many(mutants: list[Mutant], sources: dict[str, str], ref: str, games: list[dict[str, Any]], jobs: int,
             timeout: float, progress: str = "") -> list[int]:
    """Each mutant's result (a child's exit status), ``jobs`` forked children at a time."""
    results: list[int] = [CAUGHT] * len(mutants)
    running: dict[int, int] = {}
    queue = list(range(len(mutants)))
    done = 0
    started = time.monotonic()
    while queue or running:
        while queue and len(running) < jobs:
            index = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(mutants[index], sources[mutants[index].path], ref, games, timeout)
            running[pid] = index
        pid, status = os.wait()
        index = running.pop(pid)
        # Killed (the timer: a loop) or any exit but SURVIVED: the golden test would fail.
        results[index] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else CAUGHT
        done += 1
        if progress and done % 50 == 0:
            print(f"  {progress}: {done}/{len(mutants)} tried, {time.monotonic() - started:.0f} s", file=sys.stderr)
    return results


def wide_corpus(ref: str, salt: str, directory: Path) -> list[dict[str, Any]]:
    """The wide corpus of ``ref`` (``corpus.wide_recipes``: the recipes' games WIDE_REPEAT times over, other
    seeds), recorded under the unmutated rules (in a fresh interpreter: this one must not import the rule-set)."""
    target = directory / f"{ref}.json.gz"
    code = ("import sys, json, gzip; from almanac.events import registry; "
            "from tests.golden.corpus import build, wide_recipes\n"
            "from tests.corpus.grown import wide_recipes as grown_wide\n"
            "m = registry.manifest(sys.argv[1])\n"
            "corpus = build(m, wide_recipes(m) + grown_wide(m), salt=sys.argv[3])\n"
            "open(sys.argv[2], 'wb').write(gzip.compress(json.dumps(corpus).encode()))\n")
    subprocess.run([sys.executable, "-c", code, ref, str(target), salt], cwd=ROOT, check=True)
    return json.loads(gzip.decompress(target.read_bytes()))["games"]


def unreached_lines(ref: str, package: str) -> dict[str, set[int]]:
    """Lines of ``ref``'s rule modules no golden log nor grown game runs (``tests.corpus.coverage``), by short path
    (``v1/rules.py``)."""
    done = subprocess.run([sys.executable, "-m", "tests.corpus.coverage", "--measure", ref, package, "grown"],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    return {name: set(gaps["lines"]) for name, gaps in json.loads(done.stdout)["missing"].items()}


def short_path(path: str) -> str:
    return str(Path(path).relative_to(Path(path).parents[1]))


def evenly(items: list[Any], count: int | None) -> list[Any]:
    if count is None or count >= len(items):
        return items
    return [items[i * len(items) // count] for i in range(count)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation.run", description=__doc__.split("\n")[0])
    parser.add_argument("versions", nargs="*", help="name@version (default: every published version)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a mutant's replay may take")
    parser.add_argument("--sample", type=int, default=None, help="try this many mutants per version, spread evenly")
    parser.add_argument("--goal", type=float, default=0.95)
    parser.add_argument("--wide-salt", default="check",
                        help="the wide corpus' salt: 'check' (default) for the figures, 'wide' to find games to adopt")
    parser.add_argument("--match", action="append", default=[],
                        help="try only mutants whose name contains this (repeatable; e.g. missions.py or rules.py:97:)")
    parser.add_argument("--out", type=Path, default=None, help="write every mutant's result here (JSON)")
    args = parser.parse_args(argv)

    versions = plan()
    chosen = args.versions or list(versions)
    report: dict[str, Any] = {}
    below = False
    with tempfile.TemporaryDirectory(prefix="almanac-mutation-") as scratch:
        for ref in chosen:
            package = versions[ref]
            sources: dict[str, str] = {}
            mutants: list[Mutant] = []
            for module, path in package["modules"]:
                sources[path] = Path(path).read_text()
                mutants += mutants_of(module, path, sources[path], skip=PRESENTATION_FUNCTIONS)
            generated = len(mutants)
            if args.match:
                mutants = [m for m in mutants if any(text in m.name for text in args.match)]
            mutants = evenly(mutants, args.sample)
            # the golden corpus, then the grown one beside it (tests/corpus: tests/golden is frozen)
            golden_games = games_for(_Ref(ref))
            games = golden_games + grown.games_for(_Ref(ref))
            started = time.monotonic()
            if not _unmutated_replays(ref, games, args.timeout):
                raise SystemExit(f"{ref}: the golden logs do not replay under the unmutated rules")
            results = run_many(mutants, sources, ref, games, args.jobs, args.timeout, progress=ref)
            unloaded = [m for m, r in zip(mutants, results, strict=True) if r == NOT_LOADED]
            mutants = [m for m, r in zip(mutants, results, strict=True) if r != NOT_LOADED]
            results = [r for r in results if r != NOT_LOADED]
            survivors = [m for m, r in zip(mutants, results, strict=True) if r == SURVIVED]
            wide = wide_corpus(ref, args.wide_salt, Path(scratch)) if survivors else []
            second = run_many(survivors, sources, ref, wide, args.jobs, args.timeout, progress=f"{ref} wide")
            missed = [(m, r) for m, r in zip(survivors, second, strict=True) if r != SURVIVED]
            equivalent = [m for m, r in zip(survivors, second, strict=True) if r == SURVIVED]
            # Equivalent survivors on lines no golden game runs: unreached code, not shown to be equivalent.
            gaps = unreached_lines(ref, package["package"]) if equivalent else {}
            unreached = [m for m in equivalent if m.line in gaps.get(short_path(m.path), ())]
            equivalent = [m for m in equivalent if m not in unreached]
            caught = len(mutants) - len(survivors)
            share = caught / (caught + len(missed)) if caught + len(missed) else 1.0
            below |= share < args.goal
            # caught by a grown game while every golden log (make.py's game, the golden corpus) replays
            by_grown = [m.name for m, r in zip(mutants, results, strict=True)
                        if r > BY_GAME and r - BY_GAME - 1 >= len(golden_games)]
            report[ref] = {"generated": generated, "tried": len(mutants), "not_loaded": len(unloaded), "caught": caught,
                           "caught_only_by_grown": by_grown,
                           "survived": len(survivors), "missed": [m.name for m, _ in missed],
                           # the wide game that caught each missed mutant first: a game to adopt (grown.Adopted)
                           "caught_by_wide_game": {m.name: r - BY_GAME - 1 for m, r in missed if r > BY_GAME},
                           "equivalent": [m.name for m in equivalent],
                           "unreached": [m.name for m in unreached], "share_caught": round(share, 4),
                           "wide_games": len(wide), "seconds": round(time.monotonic() - started, 1)}
            print(f"{ref}: {generated} mutants, {len(mutants)} tried ({len(unloaded)} more in modules no replay "
                  f"imports): {caught} caught ({len(by_grown)} of them only by the grown corpus), "
                  f"{len(survivors)} survived ({len(missed)} missed, {len(equivalent)} equivalent and {len(unreached)} on unreached lines, "
                  f"on {len(wide)} wide games); "
                  f"caught {100 * share:.1f}% of the behaviour-changing ({report[ref]['seconds']} s)", flush=True)
            for name in report[ref]["missed"]:
                game = report[ref]["caught_by_wide_game"].get(name)
                print(f"    missed: {name}" + (f" (caught by wide game {game})" if game is not None else ""))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if below else 0


class _Ref:
    """Enough of a manifest for the corpus' file name (this interpreter loads no rule-set)."""

    def __init__(self, ref: str) -> None:
        self.ref = ref


def _unmutated_replays(ref: str, games: list[dict[str, Any]], timeout: float) -> bool:
    pid = os.fork()
    if pid == 0:
        _child(None, "", ref, games, timeout)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == SURVIVED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
