"""How wide printed output wraps: the CLI's and the benchmarks' consoles, and the CLI's help, ask here."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding

# Output to a terminal wraps at its width; output to a pipe or a file (grep, a script, a log) is not wrapped
# at all: rich's default of 80 columns there would cut tables and values mid-word. COLUMNS still wins.
UNWRAPPED = 1_000_000


def output_width() -> int | None:
    """The width output wraps at now: COLUMNS, else the terminal's (None: rich asks it), else unwrapped."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else UNWRAPPED


def fit_help_to_output() -> None:
    """Print ``--help`` (typer's rich help) as wide as the commands' own output: at a terminal's width on a
    terminal, or COLUMNS; off a terminal, each part of the help (usage, text, each panel) as wide as its longest
    line, so nothing wraps, as nothing the commands print does (``output_width``). Left alone, typer's help
    consoles wrap at rich's default of 80 columns off a terminal, and a command's description or an option's help
    was cut mid-sentence in ``almanac --help | grep``. Typer makes its consoles in ``rich_utils._get_rich_console``
    (typer is pinned, and tests/services/test_cli_help_width.py pipes the real help): its consoles are kept, with
    their theme and colours, and only their width is fitted."""
    from typer import rich_utils  # noqa: PLC0415 - only the CLI prints help

    made = rich_utils._get_rich_console  # noqa: SLF001
    if getattr(made, "fitted", False):
        return

    def console(stderr: bool = False) -> Console:
        help_console = made(stderr)
        if not stderr and output_width() == UNWRAPPED:
            fit_each_print(help_console)
        return help_console

    console.fitted = True  # type: ignore[attr-defined]
    rich_utils._get_rich_console = console  # noqa: SLF001


# The widest a help line may be printed unwrapped: far past any description or option help (they run to ~350).
HELP_WIDTH_LIMIT = 4_096
# A rendered line's right edge: trailing spaces and a panel's right border (box-drawing characters).
_RIGHT_EDGE = re.compile(r"[\s\u2500-\u257f]+$")


def fit_each_print(console: Console) -> None:
    """Make ``console`` print each renderable as wide as its longest line. A typer help panel stretches to the
    console's width (its table expands, and its options' help has no measurement rich could ask), so each is
    rendered once at ``HELP_WIDTH_LIMIT`` and its lines are read back: the widest content, plus a panel's border
    (or a padded block's right padding)."""
    console.width = HELP_WIDTH_LIMIT
    plain = console.print

    def fitted(*objects: Any, **options: Any) -> None:
        if options.get("width") is None and len(objects) == 1:
            options["width"] = natural_width(console, objects[0])
        plain(*objects, **options)

    console.print = fitted  # type: ignore[method-assign]


def natural_width(console: Console, renderable: Any) -> int:  # noqa: ANN401 - any rich renderable
    """The columns ``renderable`` needs to print without wrapping (up to ``HELP_WIDTH_LIMIT``)."""
    if isinstance(renderable, str):
        renderable = console.render_str(renderable)
    widest = 1
    for line in console.render_lines(renderable, console.options.update_width(HELP_WIDTH_LIMIT), pad=False):
        text = "".join(segment.text for segment in line).rstrip()
        content = _RIGHT_EDGE.sub("", text)
        bordered = content != text  # a panel's row: its content, a space and the border
        widest = max(widest, cell_len(content) + (2 if bordered else 0))
    # A padded block's right padding was read as trailing spaces: it is the block's own.
    return widest + (renderable.right if isinstance(renderable, Padding) else 0)
