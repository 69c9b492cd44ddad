"""What the room decides with is inside the fingerprint: a published version's code cannot change its decisions unseen.

The room decides with more of a manifest than its Decider: its ``deadlines`` (which seats missed one, which
are handed to a bot) and its ``seat_bot`` (a create asking for seat bots is refused without one). Each is
attacked here by construction, on a copy of every published version's package: edit the definition the
manifest names and the fingerprint must change. Which fields those are is read from the room's own code
(every attribute ``events/`` reads off a manifest), so a field the room starts deciding with is attacked too.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import shutil
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from game_modules import importable_copies

from almanac.events import fingerprint, registry

EVENTS = Path(fingerprint.__file__).parent
# What names a version rather than deciding with it: its Decider (hashed: it is the rules), its identity, its hash.
IDENTITY = {"decider", "name", "version", "ref", "fingerprint", "revisions", "source"}
# The kernel modules that find and describe manifests (the registry chooses a bare name's version and lists
# read models; the rule-set module declares the fields): they read manifests without deciding a room's events.
# The room decides and folds in ``events/*.py``; ``events/forensics/`` re-decides through it and retells
# auditors' stories (``audit_view``: presentation), so it is not read here.
NOT_DECIDING = {"registry.py", "ruleset.py", "manifest.py"}
MANIFEST_CALLS = {"manifest", "at", "manifest_of"}  # registry.manifest(ref), registry.at(name, n), manifest_of(state)
PUBLISHED = [manifest for manifest in registry.all_manifests() if manifest.revisions]
# The edit that attacks each field: its function decides nothing any more (no deadline; a bot that never moves).
DECIDES_NOTHING = {"deadlines": "return ()"}


def _is_manifest_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id in MANIFEST_CALLS) or (
        isinstance(func, ast.Attribute) and func.attr in MANIFEST_CALLS and getattr(func.value, "id", "") == "registry")


def fields_the_room_reads() -> set[str]:
    """Every attribute the deciding kernel (``events/``) reads off a manifest, but those that name the version."""
    read: set[str] = set()
    for path in sorted(EVENTS.glob("*.py")):
        if path.name in NOT_DECIDING:
            continue
        tree = ast.parse(path.read_text())
        for function in [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]:
            bound = {target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
                     and _is_manifest_call(node.value) for target in node.targets if isinstance(target, ast.Name)}
            for node in ast.walk(function):
                if isinstance(node, ast.Attribute) and (_is_manifest_call(node.value) or (
                        isinstance(node.value, ast.Name) and node.value.id in bound)):
                    read.add(node.attr)
    return read - IDENTITY


DECIDED_WITH = sorted(fields_the_room_reads())


def hashed_package(manifest: Any) -> str:
    """The package the version's fingerprint hashes (``events.fingerprint.package_fingerprint``)."""
    module_name = manifest.source or type(manifest.decider).__module__
    module = import_module(module_name)
    return module_name if hasattr(module, "__path__") else module.__package__


@pytest.fixture
def package_copy(tmp_path: Path) -> Iterator[Any]:
    """``copy(manifest)``: the folder of a copy of the package the version's fingerprint hashes, importable as
    ``copied`` (its fingerprint is read from there; nothing of it is imported but its ``__init__``)."""

    def copy(manifest: Any) -> Path:
        source = Path(import_module(hashed_package(manifest)).__file__).parent
        shutil.copytree(source, tmp_path / "copied", ignore=shutil.ignore_patterns("__pycache__"))
        return tmp_path / "copied"

    with importable_copies(tmp_path):
        yield copy


def decides_nothing(text: str, function_name: str, first_line: int, field: str) -> str:
    """``text`` with the function defined at ``first_line`` returning at once, before anything it decides."""
    tree = ast.parse(text)
    (function,) = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                   and node.name == function_name and first_line <= node.lineno <= first_line + len(node.decorator_list)]
    body = function.body[1:] if ast.get_docstring(function) is not None and len(function.body) > 1 else function.body
    lines = text.splitlines(keepends=True)
    at = body[0].lineno - 1
    lines.insert(at, " " * body[0].col_offset + DECIDES_NOTHING.get(field, "return None") + "\n")
    return "".join(lines)


def test_the_room_decides_with_deadlines_and_the_seat_bot_and_the_kernel_names_exactly_those():
    # The fields read here are the ones the kernel holds to the fingerprint (a manifest naming one from an
    # unhashed module is refused); a new one read by the room must join them.
    from almanac.events.ruleset import DECIDED_WITH as KERNELS  # noqa: PLC0415 - the kernel's own list

    assert DECIDED_WITH == ["deadlines", "seat_bot"]
    assert sorted(KERNELS) == DECIDED_WITH


@pytest.mark.parametrize("manifest", PUBLISHED, ids=[manifest.ref for manifest in PUBLISHED])
def test_editing_what_the_room_decides_with_changes_the_fingerprint_and_editing_the_manifest_does_not(
        manifest: Any, package_copy: Any):
    # Given a copy of the package the version's fingerprint hashes, with the same fingerprint
    folder = package_copy(manifest)
    assert fingerprint.package_fingerprint("copied") == manifest.fingerprint
    root = Path(import_module(hashed_package(manifest)).__file__).parent
    attacked = 0
    for field in DECIDED_WITH:
        value = getattr(manifest, field)
        if value is None:
            continue
        # When the definition the manifest names for that field is edited to decide nothing
        defined_in = Path(inspect.getsourcefile(value)).resolve()
        assert defined_in.is_relative_to(root.resolve()), (
            f"{manifest.ref}'s {field} is defined in {defined_in}, outside the package its fingerprint hashes ({root})")
        edited = folder / defined_in.relative_to(root.resolve())
        before = edited.read_text()
        edited.write_text(decides_nothing(before, value.__name__, inspect.getsourcelines(value)[1], field))

        # Then the fingerprint changes: the room would decide otherwise under this code
        assert fingerprint.package_fingerprint("copied") != manifest.fingerprint, (
            f"{manifest.ref}'s {field} ({edited.name}: {value.__name__}) was edited and its fingerprint stayed "
            f"{manifest.fingerprint}: the room decides with it, yet the fingerprint does not cover it")
        edited.write_text(before)
        attacked += 1

    # And an edit of the manifest module alone (presentation and wiring) leaves the fingerprint as it was
    for manifest_module in folder.rglob("manifest.py"):
        manifest_module.write_text(manifest_module.read_text() + "\n# reworded: presentation\n")
    assert fingerprint.package_fingerprint("copied") == manifest.fingerprint
    assert attacked or manifest.seat_bot is manifest.deadlines is None


def test_realm_deadline_due_at_twice_the_season_timeout_changes_realm_1s_fingerprint(package_copy: Any):
    # Given a copy of realm@1's package (the audit's attack: the season deadline moved, all golden logs passing)
    manifest = registry.manifest("realm@1")
    folder = package_copy(manifest)
    root = Path(import_module(hashed_package(manifest)).__file__).parent.resolve()
    edited = folder / Path(inspect.getsourcefile(manifest.deadlines)).resolve().relative_to(root)
    text = edited.read_text()
    assert "due_ms=state.season_started_ms + state.season_timeout_ms" in text

    # When the season's deadline falls due at twice the season's timeout
    edited.write_text(text.replace("due_ms=state.season_started_ms + state.season_timeout_ms",
                                   "due_ms=state.season_started_ms + 2 * state.season_timeout_ms"))

    # Then realm@1's fingerprint is another: a room played under this code names code on no listed revision
    assert fingerprint.package_fingerprint("copied") != manifest.fingerprint


@pytest.mark.parametrize("manifest", PUBLISHED, ids=[manifest.ref for manifest in PUBLISHED])
def test_the_files_left_out_of_the_fingerprint_define_nothing_the_room_decides_with(manifest: Any):
    # Given the files of the version's package that the fingerprint leaves out (manifest, policy, bot)
    root = Path(import_module(hashed_package(manifest)).__file__).parent
    unhashed = sorted(path for path in root.rglob("*.py")
                      if path.name in fingerprint.NOT_RULES and "__pycache__" not in path.parts)
    assert unhashed, f"{manifest.ref}: no file of its package is left out of the fingerprint"

    # Then none of them defines a name the room decides with
    for path in unhashed:
        defined = {node.name for node in ast.parse(path.read_text()).body
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        defined |= {target.id for node in ast.parse(path.read_text()).body if isinstance(node, ast.Assign | ast.AnnAssign)
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)}
        assert not defined & set(DECIDED_WITH), (
            f"{path.relative_to(root)} defines {sorted(defined & set(DECIDED_WITH))}, which the room decides with, "
            "outside the fingerprint")

    # And what the manifest names for them is defined in a file the fingerprint hashes
    for field in DECIDED_WITH:
        value = getattr(manifest, field)
        if value is not None:
            defined_in = Path(inspect.getsourcefile(value))
            assert defined_in.name not in fingerprint.NOT_RULES, (
                f"{manifest.ref}'s {field} is {value.__module__}.{value.__name__}, in {defined_in.name}: left out "
                "of the fingerprint")


def _deadlines_in_the_manifest(state: Any, seated: tuple[str, ...]) -> tuple[Any, ...]:
    return ()


def test_a_manifest_naming_deadlines_from_outside_its_hashed_code_is_refused_when_it_is_built():
    # Given realm@1's manifest, whose deadlines are defined in its rules (hashed)
    manifest = registry.manifest("realm@1")

    # When a manifest names deadlines (or a seat bot) defined where its fingerprint does not reach
    # Then it is refused when it is built, naming the field and where it is defined
    with pytest.raises(ValueError, match=r"decides with its deadlines, defined in .*test_decisions_in_the_fingerprint"):
        dataclasses.replace(manifest, deadlines=_deadlines_in_the_manifest)
    with pytest.raises(ValueError, match="decides with its seat_bot"):
        dataclasses.replace(manifest, seat_bot=lambda view, player, dice, now_ms: None)
    # nor the bot itself: bot.py is left out of the fingerprint (how a bot plays is a player's business)
    bot = import_module(f"{hashed_package(manifest)}.bot")
    with pytest.raises(ValueError, match=r"decides with its seat_bot, defined in .*\.bot"):
        dataclasses.replace(manifest, seat_bot=bot.play)
