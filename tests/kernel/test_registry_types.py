"""The registry hands out ``RuleSet``s, typed as such: no kernel function passes a manifest on as ``Any``.

The circle ``manifest -> room -> registry -> manifest`` was once broken only by function-level imports, so the
registry answered ``Any`` and a caller's typo in a manifest's field went unseen (issue 29, item 5). The registry
now imports ``RuleSet`` from ``events.ruleset``, which imports neither; this holds every kernel function that
returns what the registry answers to the same type.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

from almanac.events import registry, room
from almanac.events.ruleset import RuleSet

ROOT = Path(__file__).resolve().parents[2]
# A call that answers one manifest: the registry's look-ups, or a kernel helper that wraps them.
MANIFEST_CALL = re.compile(r"^(registry\.)?(at|default|manifest|stored)$|^(room_rules\.|room\.)?manifest_of$")


def manifest_returners(folder: Path) -> list[tuple[str, str]]:
    """(file:function, its return annotation) of each function under ``folder`` that returns a manifest look-up."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.FunctionDef):
                continue
            returns = [sub.value for sub in ast.walk(node) if isinstance(sub, ast.Return) and sub.value is not None]
            if any(isinstance(value, ast.Call) and MANIFEST_CALL.match(ast.unparse(value.func)) for value in returns):
                annotation = ast.unparse(node.returns) if node.returns is not None else ""
                found.append((f"{path.relative_to(folder.parent)}:{node.name}", annotation))
    return found


def test_the_registry_answers_rulesets():
    for lookup in (registry.at, registry.default, registry.manifest, registry.stored, room.manifest_of):
        assert typing.get_type_hints(lookup)["return"] is RuleSet, lookup.__qualname__
    for listing in (registry.manifests, registry.all_manifests):
        assert typing.get_type_hints(listing)["return"] == list[RuleSet], listing.__qualname__


def test_every_kernel_function_that_returns_a_manifest_is_typed_ruleset():
    found = manifest_returners(ROOT / "events")
    assert found, "the scan finds the registry's own look-ups"
    assert [(where, annotation) for where, annotation in found if annotation != "RuleSet"] == []


def test_the_scan_sees_a_manifest_passed_on_as_any(tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "probe.py").write_text(
        "from typing import Any\n\ndef rules_of(state) -> Any:\n    return registry.at(state.ruleset, 1)\n\n"
        "def name_of(state) -> str:\n    return state.ruleset\n")
    assert manifest_returners(tmp_path / "events") == [("events/probe.py:rules_of", "Any")]
