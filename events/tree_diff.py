"""The one diff of two JSON-like trees: maps key by key, lists and tuples index by index, down to the leaves that differ.

Used wherever two states or two events are compared for a person (``almanac state --diff``, ``almanac
diff`` and its HTTP route, ``almanac verify`` and the dispute-bundle verifier): a board that differs in one cell is one row
``board[3][7]``, never two whole boards. Paths join keys with ``.`` and indexes as ``[i]``, the form
``projections.state_paths.parse_path`` reads (``explain ROOM state.board[3][7]``). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class _Absent:
    """Where one side has no such key or index (a list that grew, a key that appeared)."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()
Change = tuple[str, Any, Any]


def _key_path(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def tree_diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """(path, value before, value after) for every leaf that differs; ABSENT for a side that lacks the path.

    Two maps are compared key by key (``before``'s order, then keys only ``after`` has), two sequences
    index by index; anything else is a leaf, different when its type or value differs (``1`` is not
    ``True``). A side that is absent, or of another shape, is one row with its whole value.
    """
    changes: list[Change] = []
    _walk(before, after, path, changes)
    return changes


def _walk(before: Any, after: Any, path: str, changes: list[Change]) -> None:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in [*before, *(k for k in after if k not in before)]:
            _walk(before.get(key, ABSENT), after.get(key, ABSENT), _key_path(path, key), changes)
        return
    if isinstance(before, list | tuple) and isinstance(after, list | tuple):
        for index in range(max(len(before), len(after))):
            _walk(before[index] if index < len(before) else ABSENT,
                  after[index] if index < len(after) else ABSENT, f"{path}[{index}]", changes)
        return
    if type(before) is not type(after) or before != after:
        changes.append((path, before, after))


def json_value(value: Any) -> Any:
    """A side of a change as JSON: ABSENT is null (the HTTP diff's promise: null where a room lacks the path)."""
    return None if value is ABSENT else value


SHOWN_DIFFERENCES = 20  # a failure's differing fields shown one a line; the rest are counted


def _shown(value: Any) -> str:
    return repr(ABSENT) if value is ABSENT else json.dumps(value, default=str, sort_keys=True)


def difference_lines(recorded: Any, recomputed: Any) -> list[str]:
    """A verification failure for a person: where the recorded and the recomputed sides differ, field path by
    field path (``event.buyer.dice[1]: recorded "star", recomputed "skull"``); two values that are not both
    documents (two hashes, a side that is missing) are shown whole, one line each."""
    changes = tree_diff(recorded, recomputed) if recorded is not None and recomputed is not None else []
    if not changes or changes[0][0] == "":
        return [f"recorded:   {_shown(recorded)}", f"recomputed: {_shown(recomputed)}"]
    lines = [f"{path}: recorded {_shown(mine)}, recomputed {_shown(theirs)}"
             for path, mine, theirs in changes[:SHOWN_DIFFERENCES]]
    if len(changes) > SHOWN_DIFFERENCES:
        lines.append(f"... and {len(changes) - SHOWN_DIFFERENCES} more differing field(s)")
    return lines
