"""Every game of every published version's golden corpus still replays byte for byte, and folds the same.

Given the recorded games of ``name@version`` (tests/golden/corpus/, written once by
``python -m tests.golden.corpus``: bot games, near-miss and random commands, strangers, hidden dice,
many players, seasons run to the end), when each is verified (every command decided again with its
revealed seed and compared byte for byte, every refusal decided again and refused with the same code)
and folded again (the state after every command, and the Decider's scores, resources, views,
redactions, summaries, read models and audit stories at the end, against their recorded digests),
then nothing differs. The corpus runs every reachable branch of each version's rules
(``python -m tests.golden.coverage``), so a changed table value or rule fails here
(``python -m tests.mutation.run`` measures how many).
"""

from __future__ import annotations

import pytest

from golden.corpus import ADOPTED_LATER, CORPUS, adopted_path_for, check, path_for, read, write
from golden.make import published
from golden.test_golden_logs import PUBLISH_A_NEW_VERSION

# The corpus files as written, and the games adopted later (corpus/adopted/: a written file is never changed)
FILES = sorted(CORPUS.glob("*@*.json.gz")) + sorted((CORPUS / "adopted").glob("*@*.json.gz"))


def test_every_published_version_has_a_golden_corpus():
    assert sorted(CORPUS.glob("*@*.json.gz")) == sorted(path_for(manifest) for manifest in published())
    adopted = {manifest.ref: adopted_path_for(manifest) for manifest in published() if manifest.ref in ADOPTED_LATER}
    assert sorted((CORPUS / "adopted").glob("*@*.json.gz")) == sorted(adopted.values())


def test_writing_the_corpus_again_never_rewrites_a_recorded_file():
    # Given every published version's recorded corpus files, when the corpus is written again, then no file is
    # written (a change to a published version's recorded games is what this test module exists to refuse)
    before = {path: path.read_bytes() for path in FILES}
    assert [path for manifest in published() for path in write(manifest)] == []
    assert {path: path.read_bytes() for path in FILES} == before


@pytest.mark.parametrize("path", FILES, ids=[str(path.relative_to(CORPUS)).removesuffix(".json.gz") for path in FILES])
def test_every_game_of_a_golden_corpus_replays_exactly(path):
    corpus = read(path)
    assert corpus["games"], "a golden corpus holds games"
    for index, game in enumerate(corpus["games"]):
        assert game["export"]["seed"], "a golden game ends, so its seed is revealed and every command is decided again"
        problem = check(game)
        if problem is not None:
            pytest.fail(PUBLISH_A_NEW_VERSION.format(ref=corpus["ruleset"], check=f"game {index}",
                                                     version="-", message=problem), pytrace=False)


def test_a_game_that_folds_differently_fails_even_when_its_events_replay():
    # Given a recorded game whose events still replay, when the state recorded after its third command
    # differs from the fold's (as after a change to an evolve that no later decision reads), it fails.
    game = read(FILES[0])["games"][0]
    assert check(game) is None
    states = list(game["expected"]["states"])
    states[2] = "0" * 16
    problem = check({**game, "expected": {**game["expected"], "states": states}})
    assert problem == "the state after command 3 differs (same events, another fold)"


def test_a_game_whose_view_changed_fails():
    game = read(FILES[0])["games"][0]
    problem = check({**game, "expected": {**game["expected"], "views": "0" * 16}})
    assert problem == "the Decider's views differ (same events and states)"
