"""The one tree diff: change one leaf anywhere in a tree of maps, lists and tuples, and the diff is that leaf alone."""

from __future__ import annotations

import re

from hypothesis import given, strategies as st

from almanac.events.tree_diff import ABSENT, tree_diff
from almanac.projections.state_paths import parse_path

leaves = st.one_of(st.integers(-5, 5), st.text("ab", max_size=2), st.booleans(), st.none())
names = st.text("xyz", min_size=1, max_size=3)
trees = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=4),
    st.lists(inner, min_size=1, max_size=4).map(tuple),  # msgspec's to_builtins keeps a Struct's tuples as tuples
    st.dictionaries(names, inner, min_size=1, max_size=3)), max_leaves=30)


def leaf_paths(tree, path=""):
    """(path, container, key) of every leaf, with the path written as tree_diff writes it."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaf_paths(value, f"{path}.{key}" if path else key) if isinstance(value, dict | list | tuple) \
                else [(f"{path}.{key}" if path else key, tree, key)]
    else:
        for index, value in enumerate(tree):
            yield from leaf_paths(value, f"{path}[{index}]") if isinstance(value, dict | list | tuple) \
                else [(f"{path}[{index}]", tree, index)]


def thaw(tree):
    """A copy whose tuples are lists, so that one leaf can be changed in place."""
    if isinstance(tree, dict):
        return {k: thaw(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [thaw(v) for v in tree]
    return tree


@given(st.dictionaries(names, trees, min_size=1, max_size=3), st.data())
def test_one_changed_leaf_is_the_whole_diff_with_its_path_and_both_values(tree, data) -> None:
    # Given any tree and one of its leaves (a board cell, a die, a score)
    changed = thaw(tree)
    paths = list(leaf_paths(changed))
    path, container, key = data.draw(st.sampled_from(paths))
    before = container[key]
    after = data.draw(leaves.filter(lambda v: type(v) is not type(before) or v != before))
    container[key] = after
    # When the tree is compared with itself with that leaf changed
    # Then the diff is that one leaf: its path (one that explain reads) and both values, nothing whole around it
    assert tree_diff(tree, changed) == [(path, before, after)]
    assert tree_diff(tree, thaw(tree)) == []  # a tuple and a list of equal items are the same sequence
    assert parse_path(path).segments == tuple(re.findall(r"[^.\[\]]+", path))  # explain reads the same path


def test_a_board_with_one_cell_changed_is_one_row_and_a_list_that_grew_is_one_row_per_new_element() -> None:
    board = tuple(tuple("" for _ in range(11)) for _ in range(11))
    farmed = tuple(tuple("farm" if (r, c) == (3, 7) else cell for c, cell in enumerate(row))
                   for r, row in enumerate(board))
    assert tree_diff({"board": board}, {"board": farmed}) == [("board[3][7]", "", "farm")]
    assert tree_diff({"deck": [1, 2]}, {"deck": [1, 2, 3], "time": 1}) == [("deck[2]", ABSENT, 3), ("time", ABSENT, 1)]
    assert tree_diff({"ended": 1}, {"ended": True}) == [("ended", 1, True)]  # equal in Python, not the same value
