"""The one tree diff: change one leaf anywhere in a tree of maps, lists and tuples, and the diff is that leaf alone;
take elements out of a list or put some in, and the diff is those elements alone."""

from __future__ import annotations

import re

from hypothesis import given, strategies as st

from almanac.events.forensics.state_paths import parse_path
from almanac.events.forensics.tree_diff import ABSENT, tree_diff

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


@given(st.lists(leaves, max_size=12), st.data())
def test_a_list_that_grew_or_shrank_is_one_row_per_element_that_came_or_left(items, data) -> None:
    # Given a list (a deck, a log) and the same list with some elements taken out and others put in
    taken = sorted(data.draw(st.sets(st.sampled_from(range(len(items))), max_size=len(items))) if items else set())
    kept = [item for index, item in enumerate(items) if index not in taken]
    put = data.draw(st.lists(st.tuples(st.integers(0, len(kept)), st.integers(100, 200)), max_size=3))
    after = list(kept)
    for place, item in sorted(put, reverse=True):
        after.insert(place, item)
    if len(after) == len(items):
        return  # same length: compared place by place (the first property)
    # When the two are compared
    changes = tree_diff({"deck": items}, {"deck": after})
    # Then each row is an element that left (at its index before) or came (at its index after), no more rows
    # than were taken and put, and every element that stayed is in no row
    assert len(changes) <= len(taken) + len(put)
    for path, before, now in changes:
        index = int(re.fullmatch(r"deck\[(\d+)\]", path).group(1))
        if now is ABSENT:  # one that left, named by its index before
            assert items[index] == before
        else:  # one that came (or took a leaving one's place), named by its index after
            assert after[index] == now and (before is ABSENT or before in items)


def test_drawing_a_card_is_one_row_not_every_card_behind_it() -> None:
    deck = [7, 3, 11, 5, 9, 2, 14, 8, 1, 12, 6, 15, 4, 10, 13, 16]
    assert tree_diff({"deck": deck}, {"deck": deck[1:]}) == [("deck[0]", 7, ABSENT)]  # the top card left
    assert tree_diff({"deck": deck}, {"deck": deck[:5] + deck[6:]}) == [("deck[5]", 2, ABSENT)]
    assert tree_diff({"log": ["a"]}, {"log": ["a", "b"]}) == [("log[1]", ABSENT, "b")]
    assert tree_diff({"deck": [1, 2]}, {"deck": [True, 2, 3]}) == [("deck[0]", 1, True), ("deck[2]", ABSENT, 3)]


def test_a_board_with_one_cell_changed_is_one_row_and_a_list_that_grew_is_one_row_per_new_element() -> None:
    board = tuple(tuple("" for _ in range(11)) for _ in range(11))
    farmed = tuple(tuple("farm" if (r, c) == (3, 7) else cell for c, cell in enumerate(row))
                   for r, row in enumerate(board))
    assert tree_diff({"board": board}, {"board": farmed}) == [("board[3][7]", "", "farm")]
    assert tree_diff({"deck": [1, 2]}, {"deck": [1, 2, 3], "time": 1}) == [("deck[2]", ABSENT, 3), ("time", ABSENT, 1)]
    assert tree_diff({"ended": 1}, {"ended": True}) == [("ended", 1, True)]  # equal in Python, not the same value


def test_an_object_that_came_into_a_list_or_a_map_is_a_row_per_leaf_each_a_path_explain_reads() -> None:
    # Given a room that has scored one season (an object in a list) and one that has not
    season = {"name": "spring", "missions": [{"card": "A", "points": 2}], "scores": {}}
    scored, unscored = {"seasons": [season], "time": 8}, {"seasons": [], "time": 8}
    # When the two are compared, either way round
    # Then the season is its leaves, each against the side that lacks it, never one cell holding it whole
    assert tree_diff(scored, unscored) == [
        ("seasons[0].name", "spring", ABSENT), ("seasons[0].missions[0].card", "A", ABSENT),
        ("seasons[0].missions[0].points", 2, ABSENT), ("seasons[0].scores", {}, ABSENT)]
    assert [(path, after) for path, before, after in tree_diff(unscored, scored)] == [
        ("seasons[0].name", "spring"), ("seasons[0].missions[0].card", "A"),
        ("seasons[0].missions[0].points", 2), ("seasons[0].scores", {})]
    # and a map key that appeared holding an object likewise
    assert tree_diff({}, {"fork": {"parent": "r1", "at": 3}}) == [("fork.parent", ABSENT, "r1"), ("fork.at", ABSENT, 3)]
    for path, *_ in tree_diff(scored, unscored):
        assert parse_path(path).segments == tuple(re.findall(r"[^.\[\]]+", path))
