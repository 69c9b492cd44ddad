"""Every game of every published version's grown corpus still replays byte for byte, and folds the same.

Given the recorded games of ``name@version`` in tests/corpus/games/<ref>/ (written once per batch by
``python -m tests.corpus.grown``: games chosen for the branches the frozen golden corpus does not run), when
each is verified (every command decided again with its revealed seed and compared byte for byte, every
refusal decided again and refused with the same code) and folded again (the state after every command, the
Decider's scores, resources, views and redactions against their recorded digests), then nothing differs:
the golden corpus' own check (``golden.corpus.check``), run over the grown games.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from golden import corpus as golden
from golden.corpus import check, read
from golden.make import published
from golden.test_golden_logs import PUBLISH_A_NEW_VERSION

from almanac.events import codec
from almanac.events.hashing import canonical_bytes
from almanac.storage.export_store import ExportFileStore
from corpus import grown
from corpus.grown import FORMAT, GAMES, Adopted, batches_for, files_for, folder_for, write

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


def _recorded(batch: dict) -> list:
    """What a recording decides: each game's commands, refusals, digests and events, but for the code fingerprint
    ``room.created`` carries (and with it every envelope's chain hash): it names the code revision that recorded
    the game, which moves with code moved verbatim (fingerprints.toml), while the decisions stay."""
    games = []
    for game in batch["games"]:
        document = game["export"]
        envelopes = asyncio.run(ExportFileStore.of_document(document).read(document["room"]))
        events = [codec.decode_event(envelope) for envelope in envelopes]
        events = [msgspec.structs.replace(event, fingerprint="") if hasattr(event, "fingerprint") else event
                  for event in events]
        games.append((document["commands"], document["rejections"], game["expected"], canonical_bytes(events)))
    return games


def test_recording_a_batch_again_decides_the_same(tmp_path, monkeypatch):
    # Given board@2's and claim's recorded batches, when they are recorded again from their recipes and scripts
    # into another folder, then every game is the same: commands, refusals, digests and events (seeds, dice,
    # clocks and ids derive from names), but for the fingerprint of the code that recorded them
    for ref, name in (("board@2", "1-deadlines"), ("claim@1", "3-full-deck")):
        manifest = next(m for m in published() if m.ref == ref)
        recorded = read(folder_for(ref) / f"{name}.json.gz")
        monkeypatch.setattr(grown, "GAMES", tmp_path)
        monkeypatch.setattr(grown, "batches_for", lambda m, name=name: {name: batches_for(m)[name]})
        assert [path.name for path in write(manifest)] == [f"{name}.json.gz"]
        assert _recorded(read(tmp_path / ref / f"{name}.json.gz")) == _recorded(recorded)
        monkeypatch.undo()


def _adopted_room(manifest, salt: str, index: int) -> str:
    """The room of wide game ``index`` played with ``salt`` (``golden.play`` names it so)."""
    return f"golden-corpus-{manifest.name}-v{manifest.version}-{salt}{index}"


def test_every_wide_game_the_golden_corpus_adopted_is_replayed_and_no_batch_records_it_again():
    # Given the wide games the golden corpus adopted (golden.ADOPTED: board@1's; golden.ADOPTED_LATER: claim@1's,
    # realm@1's and @2's, sectors@1's, in tests/golden/corpus/adopted/), when the rooms of every written game of their
    # version are read, then each adopted game is among the golden corpus' own games (its file or the adopted file
    # beside it), so the golden test replays it, and no grown batch records it a second time
    adopted = {**golden.ADOPTED}
    for ref, games in golden.ADOPTED_LATER.items():
        adopted[ref] = (*adopted.get(ref, ()), *games)
    for manifest in (m for m in published() if m.ref in adopted):
        golden_rooms = [game["export"]["room"] for game in golden.games_for(manifest)]
        grown_rooms = [game["export"]["room"] for game in grown.games_for(manifest)]
        for salt, index in adopted[manifest.ref]:
            room = _adopted_room(manifest, salt, index)
            assert room in golden_rooms and room not in grown_rooms, (manifest.ref, salt, index)


def test_an_adopted_game_is_the_wide_game_the_golden_corpus_adopted():
    # Given claim@1's wide game 9 (golden.ADOPTED_LATER's), when it is recorded as a grown batch's Adopted game and as the
    # golden corpus adopts a wide game (golden.build's ``adopted``: golden.play with the salt "wide" and the wide
    # recipes' index, as the mutation test's wide corpus plays it), then both are the same game byte for byte: room,
    # seed, clocks, commands, refusals, events and digests; the batch's description says which game it is
    manifest = next(m for m in published() if m.ref == "claim@1")
    game = grown.record(manifest, "adopted", (Adopted(9),))["games"][0]
    adopted = golden.build(manifest, (), adopted=(("wide", 9),))["games"][0]
    assert game["export"]["room"] == _adopted_room(manifest, "wide", 9)
    assert game["export"] == adopted["export"] and game["expected"] == adopted["expected"]
    assert game["recipe"] == {"adopted": {"salt": "wide", "index": 9}, **adopted["recipe"]}
