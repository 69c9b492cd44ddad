"""One name per thing: no two modules of the product share a file name, but where the name is a convention.

Two ``worker.py``, a ``console.py`` beside a ``console/`` folder and ``dispute.py`` in three places made a newcomer
guess which file a name meant (issue 29, item 8); so did ``bots.py`` and ``projections.py`` in the CLI beside the
bots service and the projections package. The CLI's modules are named after the commands they hold
(``*_commands.py``, ``*_command.py`` for one), and one that adds no command is one of a short list of helpers,
each with what it is instead. The games (games/, examples/) are left out: each rule-set has the same layout on
purpose (manifest, game, rules, ...), as are the benchmarks (bench/: each named after what it measures).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("events", "services", "projections", "storage", "client")
# A file name several packages use on purpose, and why it names one thing in each.
CONVENTIONS = {
    "__init__.py": "a package",
    "errors.py": "a package's own exception types (events, the gateway's API errors, forensics' answers)",
    "metrics.py": "a process's own figures (the gateway's Prometheus registry, the engine's counters)",
    "signing.py": "the kernel's check of a player's signature and the client's signer of the same bytes",
}

CLI = "services/cli"
# The CLI's modules that add no command, and what each is instead.
CLI_HELPERS = {
    "__init__.py": "the one typer app, and the command modules it loads",
    "common.py": "what every command shares (settings and the Redis store from services/bootstrap.py, errors, output)",
    "demo.py": "the game `almanac demo` plays over the HTTP API (the command itself is gateway_commands.py's)",
}


def shared_names(root: Path = ROOT) -> dict[str, list[str]]:
    """Each file name more than one product module has, with their paths."""
    found: dict[str, list[str]] = defaultdict(list)
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            if not {"build", "dist", "node_modules"} & set(path.parts):
                found[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_product_modules_share_a_name_but_by_convention():
    assert {name: paths for name, paths in shared_names().items() if name not in CONVENTIONS} == {}


def test_each_convention_is_still_used():
    assert sorted(set(CONVENTIONS) - set(shared_names())) == []


def test_two_modules_of_one_name_are_found(tmp_path):
    for folder in ("services/cli", "services/engine"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "worker.py").write_text('"""A worker."""\n')
    assert shared_names(tmp_path) == {"worker.py": ["services/cli/worker.py", "services/engine/worker.py"]}


def adds_commands(path: Path) -> bool:
    """Whether a module adds commands to a typer app: a ``@<app>.command`` decorator, or an ``add_typer`` call (a
    group of commands)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                func = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(func, ast.Attribute) and func.attr == "command":
                    return True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_typer":
            return True
    return False


def misnamed_cli_modules(root: Path = ROOT) -> dict[str, str]:
    """Each module of the CLI whose name does not say what it holds: commands in a module not named ``*_commands.py``
    (or ``*_command.py``), or no command in one that is not a listed helper."""
    found = {}
    for path in sorted((root / CLI).glob("*.py")):
        commands = adds_commands(path)
        if path.name in CLI_HELPERS:
            if commands:
                found[path.name] = "a listed helper that adds commands"
        elif commands and not path.name.endswith(("_commands.py", "_command.py")):
            found[path.name] = "adds commands, not named *_commands.py"
        elif not commands:
            found[path.name] = "adds no command, not a listed helper"
    return found


def test_each_cli_module_is_named_after_its_commands_or_is_a_listed_helper():
    assert misnamed_cli_modules() == {}
    assert sorted(set(CLI_HELPERS) - {path.name for path in (ROOT / CLI).glob("*.py")}) == []


def test_a_cli_module_named_for_its_topic_and_a_stray_helper_are_found(tmp_path):
    (tmp_path / CLI).mkdir(parents=True)
    (tmp_path / CLI / "__init__.py").write_text('"""The app."""\napp = None\n')
    (tmp_path / CLI / "sim.py").write_text('"""`almanac sim`."""\n@app.command("sim")\ndef sim() -> None: ...\n')
    (tmp_path / CLI / "forks.py").write_text('"""Fork commands."""\napp.add_typer(forks_app, name="fork")\n')
    (tmp_path / CLI / "helpers.py").write_text('"""Helpers."""\ndef helper() -> None: ...\n')
    (tmp_path / CLI / "sim_commands.py").write_text('"""`almanac sim`."""\n@app.command()\ndef sim() -> None: ...\n')
    (tmp_path / CLI / "common.py").write_text('"""Shared."""\n@app.command("nonce")\ndef nonce() -> None: ...\n')
    assert misnamed_cli_modules(tmp_path) == {"common.py": "a listed helper that adds commands",
                                              "forks.py": "adds commands, not named *_commands.py",
                                              "helpers.py": "adds no command, not a listed helper",
                                              "sim.py": "adds commands, not named *_commands.py"}
