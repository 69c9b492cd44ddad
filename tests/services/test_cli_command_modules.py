"""The CLI loads only the module of the command it runs: each module registers exactly the names the CLI's table
gives it, and a process started for one command imports no other command's module."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from typer.main import get_command_name

from almanac.services import cli


def registered_names() -> dict[str, str]:
    """Every top-level command and group on the CLI's app, with the module that registered it."""
    names = {(command.name or get_command_name(command.callback.__name__)): command.callback.__module__
             for command in cli.app.registered_commands}
    namespaces = {module: vars(importlib.import_module(module)) for module in cli._COMMAND_MODULES}
    for group in cli.app.registered_groups:
        names[group.name or group.typer_instance.info.name] = next(
            module for module, namespace in namespaces.items()
            if any(value is group.typer_instance for value in namespace.values()))
    return names


def test_each_command_module_registers_exactly_the_names_the_cli_loads_it_for():
    cli._load_commands()
    table = {name: module for module, names in cli._COMMAND_MODULES.items() for name in names}
    assert registered_names() == table


# Command modules that import another's on purpose: the forensics commands reuse the fork's diff and the verifier.
ALSO_IMPORTS = {"almanac.services.cli.explain_bisect_commands": {"almanac.services.cli.fork_diff_commands"},
                "almanac.services.cli.export_import_commands": {"almanac.services.cli.verify_commands"}}


@pytest.mark.parametrize("module", list(cli._COMMAND_MODULES))
def test_a_process_started_for_one_command_imports_no_other_commands_module(module: str):
    # Given a module's first command (the table's other names load the same module: the test above), when the CLI
    # parses it (its --help: the module is loaded, nothing runs), then no other command's module was imported but
    # those its own module imports on purpose.
    command = cli._COMMAND_MODULES[module][0]
    probe = (f"import sys; sys.argv = ['almanac', {command!r}, '--help']\n"
             "from almanac.services import cli\n"
             "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
             "print(' '.join(sorted(m for m in cli._COMMAND_MODULES if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert set(done.stdout.strip().splitlines()[-1].split()) == {module} | ALSO_IMPORTS.get(module, set())


def test_help_lists_every_command_and_a_name_no_module_has_is_refused_among_them():
    every = [name for names in cli._COMMAND_MODULES.values() for name in names]
    shown = subprocess.run([sys.executable, "-c", "from almanac.services.cli import main; main()", "--help"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0 and not [name for name in every if f" {name} " not in shown.stdout], shown.stdout
    refused = subprocess.run([sys.executable, "-c", "from almanac.services.cli import main; main()", "enigne"],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert refused.returncode == 2 and "No such command 'enigne'" in refused.stderr, refused.stderr
