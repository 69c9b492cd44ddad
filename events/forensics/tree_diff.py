"""The one diff of two JSON-like trees: maps key by key, lists index by index (by content if resized), down to the leaves.

Used wherever two states or two events are compared for a person (``almanac state --diff``, ``almanac
diff`` and its HTTP route, the console's changes from one version to another (``/rooms/{room}/at/{v}?since=``),
``almanac verify`` and the dispute-bundle verifier): a board that differs in one cell is one row
``board[3][7]``, never two whole boards. Paths join keys with ``.`` and indexes as ``[i]``, the form
``events.forensics.state_paths.parse_path`` reads (``explain ROOM state.board[3][7]``). Pure: no I/O.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
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
    of one length index by index, two of different lengths by content (the elements removed and added); anything else is a leaf, different when its type or value differs (``1`` is not
    ``True``). A map or list on one side only (a key or element that came or left) is a row per leaf inside it,
    the other side ABSENT; a side of another shape is one row with its whole value.
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
        if len(before) == len(after):  # a board's rows, a hand's slots: place by place
            for index, (mine, theirs) in enumerate(zip(before, after, strict=True)):
                _walk(mine, theirs, f"{path}[{index}]", changes)
        else:
            _walk_resized(before, after, path, changes)
        return
    if before is ABSENT or after is ABSENT:  # one side lacks it: what the other holds, leaf by leaf
        _walk_one_side(before, after, path, changes)
        return
    if type(before) is not type(after) or before != after:
        changes.append((path, before, after))


def _walk_one_side(before: Any, after: Any, path: str, changes: list[Change]) -> None:
    """A map or a list on one side only (an element that came, a key that appeared) is its leaves, each a row
    against ABSENT, so every printed path is a leaf explain reads; an empty one, or a leaf, is one row."""
    present = after if before is ABSENT else before
    if isinstance(present, Mapping) and present:
        items: list[tuple[str, Any]] = [(_key_path(path, key), value) for key, value in present.items()]
    elif isinstance(present, list | tuple) and present:
        items = [(f"{path}[{index}]", value) for index, value in enumerate(present)]
    else:
        changes.append((path, before, after))
        return
    for inner_path, value in items:
        _walk(ABSENT if before is ABSENT else value, value if before is ABSENT else ABSENT, inner_path, changes)


EXACT_ALIGNMENT = 250_000  # cells of the longest-common-subsequence table; beyond it difflib's faster matcher


def _kept(before: list[str], after: list[str]) -> list[tuple[int, int]]:
    """The (index before, index after) of the elements both lists keep, in order: the common prefix and suffix,
    and between them a longest common subsequence (so a draw or an append is exactly its own elements)."""
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    mid_a, mid_b = before[head:len(before) - tail], after[head:len(after) - tail]
    middle: list[tuple[int, int]] = []
    if len(mid_a) * len(mid_b) <= EXACT_ALIGNMENT:
        longest = [[0] * (len(mid_b) + 1) for _ in range(len(mid_a) + 1)]
        for i in range(len(mid_a) - 1, -1, -1):
            for j in range(len(mid_b) - 1, -1, -1):
                longest[i][j] = (longest[i + 1][j + 1] + 1 if mid_a[i] == mid_b[j]
                                 else max(longest[i + 1][j], longest[i][j + 1]))
        i = j = 0
        while i < len(mid_a) and j < len(mid_b):
            if mid_a[i] == mid_b[j]:
                middle.append((i, j))
                i, j = i + 1, j + 1
            elif longest[i + 1][j] >= longest[i][j + 1]:
                i += 1
            else:
                j += 1
    else:
        blocks = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_matching_blocks()
        middle = [(a + k, b + k) for a, b, size in blocks for k in range(size)]
    return ([(k, k) for k in range(head)] + [(head + a, head + b) for a, b in middle]
            + [(len(before) - tail + k, len(after) - tail + k) for k in range(tail)])


def _walk_resized(before: Sequence[Any], after: Sequence[Any], path: str, changes: list[Change]) -> None:
    """A list that grew or shrank (a deck drawn from, a log appended to), by content as the console shows it:
    only the elements that left (at their index before) and the ones that came (at their index after), not
    every index behind the first difference. Elements are matched by their JSON text (``1`` is not ``true``)."""
    texts = [[json.dumps(item, sort_keys=True, default=str) for item in side] for side in (before, after)]
    low = first = 0
    for high, last in [*_kept(*texts), (len(before), len(after))]:  # each gap between two kept elements
        paired = min(high - low, last - first)
        for offset in range(paired):  # an element replaced in place: what in it changed, at its index after
            _walk(before[low + offset], after[first + offset], f"{path}[{first + offset}]", changes)
        for index in range(low + paired, high):
            _walk(before[index], ABSENT, f"{path}[{index}]", changes)
        for index in range(first + paired, last):
            _walk(ABSENT, after[index], f"{path}[{index}]", changes)
        low, first = high + 1, last + 1


def change_rows(before: Any, after: Any) -> list[dict[str, Any]]:
    """``tree_diff`` as JSON rows ``{"path", "before", "after"}`` (null on a side where the path is absent: a list
    element that left or came): what ``state --diff --json`` prints and the console's diff shows."""
    return [{"path": path, "before": json_value(old), "after": json_value(new)}
            for path, old, new in tree_diff(before, after)]


def json_value(value: Any) -> Any:
    """A side of a change as JSON: ABSENT is null (the HTTP diff's promise: null where a room lacks the path)."""
    return None if value is ABSENT else value


SHOWN_DIFFERENCES = 20  # a failure's differing fields shown one a line; the rest are counted


def _shown(value: Any) -> str:
    return repr(ABSENT) if value is ABSENT else json.dumps(value, default=str, sort_keys=True)


def difference_lines(recorded: Any, recomputed: Any, sides: tuple[str, str] = ("recorded", "recomputed")) -> list[str]:
    """A verification failure for a person: where the two sides differ, field path by field path, each side
    named by ``sides`` (``event.buyer.dice[1]: recorded "star", re-decided "skull"``); two values that are not
    both documents (two hashes, a side that is missing) are shown whole, one line each."""
    changes = tree_diff(recorded, recomputed) if recorded is not None and recomputed is not None else []
    if not changes or changes[0][0] == "":
        width = max(map(len, sides)) + 2
        return [f"{sides[0] + ':':<{width}}{_shown(recorded)}", f"{sides[1] + ':':<{width}}{_shown(recomputed)}"]
    lines = [f"{path}: {sides[0]} {_shown(mine)}, {sides[1]} {_shown(theirs)}"
             for path, mine, theirs in changes[:SHOWN_DIFFERENCES]]
    if len(changes) > SHOWN_DIFFERENCES:
        lines.append(f"... and {len(changes) - SHOWN_DIFFERENCES} more differing field(s)")
    return lines
