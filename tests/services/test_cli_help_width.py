"""`almanac --help` piped (grep, a pager, a script) is as wide as the commands' own piped output: never wrapped at
rich's default of 80 columns (issue 28, item 15), never padded out to the unwrapped output's million columns."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import typer

from almanac.services.cli import _load_commands, app
from almanac.services.terminal import HELP_WIDTH_LIMIT

CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


def piped_help(*words: str, columns: str | None = None) -> list[str]:
    """The lines ``almanac WORDS --help`` prints into a pipe (its stdout is not a terminal), with COLUMNS unset
    unless given."""
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "TERMINAL_WIDTH", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run([sys.executable, "-c", CHILD, *words, "--help"], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return done.stdout.splitlines()


def on_one_line(text: str, lines: list[str]) -> bool:
    """Whether ``text`` (its words) is printed whole on one of ``lines``."""
    wanted = " ".join(text.split())
    return any(wanted in " ".join(line.split()) for line in lines)


def first_line(help_text: str | None) -> str:
    return (help_text or "").strip().splitlines()[0] if (help_text or "").strip() else ""


def command(*words: str) -> Any:  # noqa: ANN401 - typer's own click command (it vendors click)
    _load_commands()
    found = typer.main.get_command(app)
    for word in words:
        found = found.commands[word]
    return found


def test_piped_help_names_each_command_and_option_on_one_line() -> None:
    """Given ``almanac --help`` and ``almanac bench e2e --help`` printed into a pipe, when a user greps them, then
    each command's description and each option's help starts whole on one line (cut at 80 columns before), and no
    line is padded out: the widest is the widest text it holds, with the panel's border."""
    top = piped_help()
    described = {name: first_line(sub.help) for name, sub in command().commands.items() if not sub.hidden}
    assert len(described) > 20
    cut = [name for name, text in described.items() if not on_one_line(text, top)]
    assert not cut, f"descriptions cut across lines: {cut}"

    e2e = piped_help("bench", "e2e")
    helped = {param.name: first_line(param.help) for param in command("bench", "e2e").params
              if param.param_type_name == "option" and param.help}
    cut = [name for name, text in helped.items() if not on_one_line(text, e2e)]
    assert not cut, f"option help cut across lines: {cut}"
    assert max(len(line) for line in e2e) > 200  # its longest option help, whole

    for lines, texts in ((top, described.values()), (e2e, helped.values())):
        widest_text = max(len(" ".join(text.split())) for text in texts)
        assert max(len(line) for line in lines) < min(HELP_WIDTH_LIMIT, widest_text + 120), "padded out"


def test_columns_still_sets_the_width_of_piped_help() -> None:
    """Given COLUMNS=60 (the user's choice wins, as for the commands' output), when help is piped, then it wraps
    at 60 columns."""
    lines = piped_help(columns="60")
    assert max(len(line) for line in lines) == 60
