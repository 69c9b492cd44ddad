"""The layers stay apart: events/ and games/ pure, storage/ on events only, projections/ never services; imports one way."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

EVENTS = Path(__file__).resolve().parents[2] / "events"
# The games decide and fold like the kernel's write model: the same purity holds for them.
GAMES = EVENTS.parent / "games"
PURE = (EVENTS, GAMES)
FORBIDDEN = {"redis", "faststream", "structlog", "time", "random", "os", "datetime", "secrets", "uuid",
             "socket", "asyncio", "services", "projections", "storage", "subprocess", "pathlib"}
# storage/ sits below both sides (the store contract, its stores, key names, the loader): besides the
# standard library it may import only the write model and its own drivers.
# storage/ holds the stores: Redis, and the archive tier's object store and its compression (storage/archive.py)
STORAGE_MAY_IMPORT = {"events", "storage", "redis", "hiredis", "msgspec", "obstore", "zstandard"}


def imported_modules(path: Path) -> set[str]:
    """Top-level names a file imports; the project's own packages as their folder (almanac.services -> services)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(_top(node.module))
    return names


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "almanac" and len(parts) > 1 else parts[0]


def test_the_project_is_imported_under_the_one_almanac_name():
    """Bare `events`/`services`/`projections` imports would collide with other distributions."""
    root = EVENTS.parent
    offenders = []
    for folder in ("events", "games", "storage", "projections", "services", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
                offenders += [f"{path.relative_to(root)}:{node.lineno} {m}" for m in modules
                              if m.split(".")[0] in {"events", "games", "storage", "projections", "services"}]
    assert offenders == []


def test_nothing_under_events_or_games_imports_io_clock_randomness_or_the_outer_layers():
    offenders = {
        str(path.relative_to(EVENTS.parent)): sorted(imported_modules(path) & FORBIDDEN)
        for folder in PURE for path in sorted(folder.rglob("*.py"))
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_storage_imports_only_events_its_stores_and_msgspec():
    storage = EVENTS.parent / "storage"
    offenders = {
        str(path.relative_to(EVENTS.parent)): sorted(imported_modules(path) - STORAGE_MAY_IMPORT
                                                     - set(sys.stdlib_module_names) - {"__future__"})
        for path in sorted(storage.rglob("*.py"))
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_projections_never_import_services():
    projections = EVENTS.parent / "projections"
    offenders = [str(p) for p in projections.rglob("*.py") if "services" in imported_modules(p)]
    assert offenders == []


def test_rule_arithmetic_uses_no_binary_floats_outside_the_claim_seeding():
    offenders = []
    for path in sorted(path for folder in PURE for path in folder.rglob("*.py")):
        if "claim" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, float):
                offenders.append(f"{path.relative_to(EVENTS.parent)}:{node.lineno} float literal {node.value}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "float":
                offenders.append(f"{path.relative_to(EVENTS.parent)}:{node.lineno} float()")
    assert offenders == []


def test_the_lint_configuration_bans_clock_randomness_and_io_imports_under_events_and_games(tmp_path):
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    root = EVENTS.parent
    probe = tmp_path / "probe.py"
    probe.write_text('"""Probe."""\n\nimport random\nimport time\n\nprint(random.random(), time.time())\n')
    result = subprocess.run(
        [ruff, "check", "--no-cache", "--config", str(root / "pyproject.toml"), "--select", "TID251", str(probe)],
        capture_output=True, text=True, cwd=root,
    )
    assert result.returncode == 1
    assert "events/ and games must not draw randomness" in result.stdout
    assert "events/ and games must not read the clock" in result.stdout
    clean = subprocess.run([ruff, "check", "--no-cache", "--select", "TID251", "events", "games", "examples"],
                           capture_output=True, text=True, cwd=root)
    assert clean.returncode == 0, clean.stdout


def test_the_whole_tree_passes_its_lint_configuration():
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run([ruff, "check", "--no-cache", "."], capture_output=True, text=True, cwd=EVENTS.parent)
    assert result.returncode == 0, result.stdout[-3000:]


# Code loading, not game I/O: the registry reads entry points (importlib.metadata) and the fingerprint
# reads a rule-set package's own source (importlib.resources), both once at import, never in decide
# or evolve. Nothing else under events/ may use importlib.
IMPORTLIB_ALLOWED = {"events/registry.py", "events/fingerprint.py"}


def test_only_the_registry_and_the_fingerprint_load_code_under_events():
    users = {str(path.relative_to(EVENTS.parent)) for path in sorted(EVENTS.rglob("*.py"))
             if "importlib" in imported_modules(path)}
    assert users <= IMPORTLIB_ALLOWED


def _module_level_imports(path: Path) -> set[str]:
    """The almanac.events modules a file imports when it runs: module level, type-checking blocks left out."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("almanac.events"):
                found.update(f"{node.module}.{alias.name}" if node.module == "almanac.events" else node.module
                             for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("almanac.events"))
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body + node.orelse)

    visit(ast.parse(path.read_text()).body)
    return found


def test_the_kernel_imports_at_module_level_without_a_circle_and_without_function_level_imports():
    # An import inside a function is how a circle gets hidden (the registry once returned Any for it).
    hidden = [f"{path.relative_to(EVENTS.parent)}:{node.lineno}" for path in sorted(EVENTS.rglob("*.py"))
              for function in ast.walk(ast.parse(path.read_text()))
              if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
              for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert hidden == []
    graph = {f"almanac.events.{path.stem}": _module_level_imports(path) for path in EVENTS.glob("*.py")}
    circles = []

    def walk(module: str, trail: tuple[str, ...]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported in trail:
                circles.append(" -> ".join((*trail[trail.index(imported):], imported)))
            elif imported in graph:
                walk(imported, (*trail, imported))

    for module in sorted(graph):
        walk(module, (module,))
    assert circles == []


def test_the_python_client_imports_only_its_http_and_websocket_libraries():
    """almanac.client speaks the public API only: an application installs it without the server's internals. The
    one piece of the project it shares is the rule of which bytes a signed seat signs (``almanac.events.signing``,
    pure): one place, so the client signs exactly what the engine checks."""
    client = EVENTS.parent / "client"
    offenders = {
        str(path.relative_to(EVENTS.parent)): sorted(
            imported_modules(path) - {"httpx", "websockets", "msgspec", "cryptography", "client", "events"}
            - set(sys.stdlib_module_names) - {"__future__"})
        for path in sorted(client.rglob("*.py"))
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}
    of_events = {node.module for path in client.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("almanac.events")}
    assert of_events <= {"almanac.events.signing"}, of_events
