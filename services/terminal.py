"""How wide printed output wraps: the CLI's and the benchmarks' consoles ask here."""

from __future__ import annotations

import os
import sys

# Output to a terminal wraps at its width; output to a pipe or a file (grep, a script, a log) is not wrapped
# at all: rich's default of 80 columns there would cut tables and values mid-word. COLUMNS still wins.
UNWRAPPED = 1_000_000


def output_width() -> int | None:
    """The width output wraps at now: COLUMNS, else the terminal's (None: rich asks it), else unwrapped."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else UNWRAPPED
