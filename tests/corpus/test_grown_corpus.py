"""Every game of every published version's grown corpus still replays byte for byte, and folds the same.

Given the recorded games of ``name@version`` in tests/corpus/games/<ref>/ (written once per batch by
``python -m tests.corpus.grown``: games chosen for the branches the frozen golden corpus does not run), when
each is verified (every command decided again with its revealed seed and compared byte for byte, every
refusal decided again and refused with the same code) and folded again (the state after every command, the
Decider's scores, resources, views and redactions against their recorded digests), then nothing differs:
the golden corpus' own check (``golden.corpus.check``), run over the grown games.
"""

from __future__ import annotations

import pytest
from golden.corpus import check, read
from golden.make import published
from golden.test_golden_logs import PUBLISH_A_NEW_VERSION

from corpus import grown
from corpus.grown import FORMAT, GAMES, batches_for, files_for, folder_for, write

FILES = sorted(GAMES.glob("*@*/*.json.gz"))


def test_every_batch_of_every_published_version_is_recorded_and_nothing_else():
    expected = sorted(folder_for(m.ref) / f"{name}.json.gz" for m in published() for name in batches_for(m))
    assert FILES == expected
    assert all(files_for(m.ref) for m in published()), "every published version has grown games"


def test_writing_the_grown_corpus_again_never_rewrites_a_recorded_batch():
    # Given every recorded batch, when the grown corpus is written again, then no file is written
    before = {path: path.read_bytes() for path in FILES}
    assert [path for manifest in published() for path in write(manifest)] == []
    assert {path: path.read_bytes() for path in FILES} == before


@pytest.mark.parametrize("path", FILES, ids=[f"{path.parent.name}/{path.name.removesuffix('.json.gz')}"
                                             for path in FILES])
def test_every_game_of_the_grown_corpus_replays_exactly(path):
    batch = read(path)
    assert batch["format"] == FORMAT and batch["ruleset"] == path.parent.name
    assert batch["games"], "a batch holds games"
    for index, game in enumerate(batch["games"]):
        assert game["export"]["seed"], "a grown game ends, so its seed is revealed and every command is decided again"
        problem = check(game)
        if problem is not None:
            pytest.fail(PUBLISH_A_NEW_VERSION.format(ref=batch["ruleset"], check=f"{path.name} game {index}",
                                                     version="-", message=problem), pytrace=False)


def test_a_grown_game_whose_redacted_events_changed_fails():
    # Given a recorded grown game, when its recorded redactions digest differs from what the rules redact,
    # then the replay names it (the check compares more than the events)
    game = read(FILES[0])["games"][0]
    assert check(game) is None
    problem = check({**game, "expected": {**game["expected"], "redactions": "0" * 16}})
    assert problem == "the Decider's redactions differ (same events and states)"


def test_recording_a_batch_again_gives_the_same_bytes(tmp_path, monkeypatch):
    # Given board@2's recorded deadline batch, when it is recorded again from its scripts into another folder,
    # then the file is byte for byte the one in the repository (seeds, dice, clocks and ids derive from names)

    manifest = next(m for m in published() if m.ref == "board@2")
    recorded = (folder_for("board@2") / "1-deadlines.json.gz").read_bytes()
    monkeypatch.setattr(grown, "GAMES", tmp_path)
    monkeypatch.setattr(grown, "batches_for", lambda m: {"1-deadlines": batches_for(m)["1-deadlines"]})
    assert [path.name for path in write(manifest)] == ["1-deadlines.json.gz"]
    assert (tmp_path / "board@2" / "1-deadlines.json.gz").read_bytes() == recorded
