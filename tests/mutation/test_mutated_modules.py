"""The mutation test mutates what the fingerprint hashes: the code the fold and the decisions call, wherever it sits."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from almanac.events import fingerprint

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def planned() -> dict[str, Any]:
    """The mutation test's own plan, read as it reads it (python -m tests.mutation.run, from the repository's root)."""
    done = subprocess.run([sys.executable, "-c", "import json; from tests.mutation.run import plan; "
                           "print(json.dumps(plan()))"], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _modules_of(package: str) -> set[str]:
    """Every module of ``package`` by name, mutated or not (to tell ``from package import module`` from a name)."""
    root = Path(import_module(package).__file__).parent
    return {".".join((package, *path.relative_to(root).with_suffix("").parts))
            for path in root.rglob("*.py") if "__pycache__" not in path.parts}


def test_realms_ledger_rows_which_the_fold_records_in_the_state_are_mutated(planned):
    # Given realm@1, whose fold records each trade step's ledger rows (rules.record_ledger calls ledger_entries)
    # When the mutation test plans its run
    modules = [Path(path) for _, path in planned["realm@1"]["modules"]]

    # Then the module defining ledger_entries is among the mutated ones (it sat in audit.py, which was not)
    defining = [path.name for path in modules if any(isinstance(node, ast.FunctionDef) and node.name == "ledger_entries"
                                                     for node in ast.walk(ast.parse(path.read_text())))]
    assert defining == ["trades.py"]


def test_every_module_the_rules_import_from_their_own_package_is_mutated_but_the_bots(planned):
    # Given each published version's mutated modules
    for ref, version in planned.items():
        package = version["package"]
        mutated = {name for name, _ in version["modules"]}
        every = _modules_of(package)
        for name, path in version["modules"]:
            # When a mutated module imports a module of its own package
            for node in ast.walk(ast.parse(Path(path).read_text())):
                if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(package):
                    continue
                for alias in node.names:
                    target = f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in every else node.module
                    # Then that module is mutated too, but a bot (it plays through the rules, as players do) and
                    # presentation (the fingerprint refuses rule code that uses it: game.py imports summarize for
                    # its summary alone)
                    left_alone = target.rsplit(".", 1)[-1] + ".py" in ("bot.py", *fingerprint.PRESENTATION_FILES)
                    assert target in mutated or left_alone, (
                        f"{ref}: {name} imports {target}, which the mutation test leaves alone")
