"""The mutator changes exactly one thing per mutant, and leaves docstrings, messages and annotations alone."""

from __future__ import annotations

from mutation.mutants import mutants_of, mutated_code

SOURCE = '''"""A module docstring with 7 in it."""
LIMIT: int = 28
SHARE = 0.5


def score(cells: list[int], bonus: bool = False) -> int:
    """Counts cells over the limit."""
    total = sum(1 for cell in cells if cell > LIMIT and not bonus)
    total += 2 * len(cells)
    message = f"{total} of {LIMIT + 1}"
    return total if message else -1
'''


def _run(source_code) -> dict:
    namespace: dict = {}
    exec(source_code, namespace)  # noqa: S102 - the mutant under test
    return namespace


def test_each_mutant_changes_one_thing_and_names_it():
    names = [m.name for m in mutants_of("example", "/x/example.py", SOURCE)]
    assert names == [
        "example.py:2:13 28 -> 29",
        "example.py:3:8 0.5 -> 1.0",
        "example.py:6:42 False -> True",
        "example.py:8:16 1 -> 2",
        "example.py:8:39 and -> or",
        "example.py:8:39 > -> >=",
        "example.py:8:56 not x -> x",
        "example.py:9:4 + -> -",
        "example.py:9:13 * -> //",
        "example.py:9:13 2 -> 3",
        "example.py:11:34 1 -> 2",
    ]


def test_a_mutant_is_the_original_but_for_its_change():
    original = _run(compile(SOURCE, "example.py", "exec"))
    assert original["score"]([30, 10]) == 5
    by_name = {m.name: m for m in mutants_of("example", "/x/example.py", SOURCE)}
    limit = _run(mutated_code(by_name["example.py:2:13 28 -> 29"], SOURCE))
    assert limit["LIMIT"] == 29 and limit["score"]([29]) == 2
    compared = _run(mutated_code(by_name["example.py:8:39 > -> >="], SOURCE))
    assert compared["score"]([28]) == 3 and original["score"]([28]) == 2
    negated = _run(mutated_code(by_name["example.py:8:56 not x -> x"], SOURCE))
    assert negated["score"]([30]) == 2 and negated["score"]([30], bonus=True) == 3


def test_a_function_named_to_skip_is_left_alone():
    skipped = mutants_of("example", "/x/example.py", SOURCE, skip=("score",))
    assert [m.name for m in skipped] == ["example.py:2:13 28 -> 29", "example.py:3:8 0.5 -> 1.0"]


def test_docstrings_messages_and_annotations_are_left_alone():
    source = SOURCE + 'WIDTH: Annotated[int, Meta(le=10)] = 3\n'
    mutants = mutants_of("example", "/x/example.py", source)
    lines = {m.line for m in mutants}
    assert not lines & {1, 7, 10}  # the docstrings and the f-string's arithmetic
    assert [m.name for m in mutants if m.line == 12] == ["example.py:12:37 3 -> 4"]  # the value, not its annotation
