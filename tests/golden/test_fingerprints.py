"""Published code stays identifiable: every fingerprint a published version's code has had is on its list.

Each version lists its code's fingerprints in ``fingerprints.toml`` beside its Decider (its code
revisions). The running code's fingerprint must be on the list, and a revision is appended only when
the golden logs prove the changed code decides and folds the same; every fingerprint a golden log's
room recorded is on its version's list, so ``verify`` can name the code any such room was played under.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from game_modules import game_folder

from almanac.events import codec, fingerprint, registry
from almanac.services.forensics.verify import verify_room
from almanac.storage.export_store import ExportFileStore
from golden.make import HERE, published

GOLDEN = sorted(HERE.glob("*@*.json"))
REFS = [manifest.ref for manifest in published()]

APPEND_A_REVISION = """{ref}'s code has the fingerprint {fingerprint}, which is not on its list of revisions
({path}). A published version's code may change only if it still decides and folds the same:
  1. run the golden logs: pytest tests/golden (never regenerate them to make this pass);
  2. if they pass, append this revision to {path}:

[[revision]]
number = {number}
fingerprint = "{fingerprint}"
date = "{today}"
commit = "<the commit that changes the code>"
why = "<what changed and why>"

If the golden logs fail, the change alters {ref}: publish it as a new version instead."""


def _list_path(ref: str) -> Path:
    return game_folder(ref) / fingerprint.REVISIONS_FILE


def _recorded_fingerprint(path: Path) -> str:
    exported = ExportFileStore.open(path)
    (created,) = asyncio.run(exported.read(exported.room, 1, 1))
    return codec.decode_event(created).fingerprint


@pytest.mark.parametrize("ref", REFS)
def test_the_running_code_of_every_published_version_is_a_listed_revision(ref: str):
    manifest = registry.manifest(ref)
    assert manifest.revisions, f"{ref} keeps no list of its code's fingerprints ({_list_path(ref)})"
    if manifest.revision(manifest.fingerprint) is None:
        pytest.fail(APPEND_A_REVISION.format(ref=ref, fingerprint=manifest.fingerprint, path=_list_path(ref),
                                             number=len(manifest.revisions) + 1,
                                             today=datetime.date.today().isoformat()), pytrace=False)


@pytest.mark.parametrize("path", GOLDEN, ids=[path.stem for path in GOLDEN])
def test_every_fingerprint_a_golden_log_recorded_is_on_its_versions_list(path: Path):
    recorded = _recorded_fingerprint(path)
    manifest = registry.manifest(path.stem)
    assert manifest.revision(recorded) is not None, f"{path.name} recorded {recorded}, not on {_list_path(path.stem)}"


def test_verify_names_the_code_revision_a_golden_room_was_played_under():
    # Given board@1's golden log, written in November under the code of the day (revision 2)
    path = HERE / "board@1.json"
    exported = ExportFileStore.open(path)

    # When it is verified on this node, whose board@1 code has been revised since
    report = asyncio.run(verify_room(exported, json.loads(path.read_text())["room"]))

    # Then verify names that revision, and notes this node's own code revision differs
    current = registry.manifest("board@1")
    assert report.ok
    assert report.code_revision == ("played under board@1 code revision 2 (2026-11-30: one-line summaries for every "
                                    "event (Decider.summary); the golden log was written under this code)")
    assert any(f"(code revision {current.revision(current.fingerprint).number})" in note for note in report.notes)


def test_a_fingerprint_on_no_list_is_said_to_match_no_known_revision():
    manifest = registry.manifest("realm@2")
    stranger = "sha256:" + "0" * 64

    said = manifest.played_under(stranger)

    assert said.startswith(f"played under realm@2 code with fingerprint {stranger}, which matches NO known revision")
    assert manifest.played_under("") == ("played under realm@2 before rooms recorded fingerprints: the code revision "
                                         "cannot be named")


def test_presentation_is_outside_the_fingerprint_and_the_rules_inside_it(tmp_path):
    # Given a copy of a game's package, importable under a name of its own
    copy = tmp_path / "board_copy"
    shutil.copytree(game_folder("board@1"), copy, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(tmp_path))
    try:
        import_module("board_copy")
        before = fingerprint.package_fingerprint("board_copy")

        # When its presentation changes (the picture, a description in the manifest, the bot, a rulebook)
        (copy / "picture.js").write_text("export default () => null;\n")
        manifest = copy / "manifest.py"
        manifest.write_text(manifest.read_text().replace("complete solo games", "whole solo games"))
        (copy / "policy.py").write_text((copy / "policy.py").read_text() + "\n# a better bot some day\n")
        (copy / "RULES.md").write_text("# Board\n")
        (copy / fingerprint.REVISIONS_FILE).write_text("")
        # Then the fingerprint is the same
        assert fingerprint.package_fingerprint("board_copy") == before

        # And when a number of its rules changes, the fingerprint changes
        data = copy / "data.py"
        data.write_text(data.read_text() + "\nGAME_LENGTH_NOTE = 1\n")
        assert fingerprint.package_fingerprint("board_copy") != before
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("board_copy", None)


def test_a_list_must_number_its_revisions_in_order_and_name_each_fingerprint_once():
    entry = 'number = {n}\nfingerprint = "sha256:{fp}"\ndate = "2026-12-04"\ncommit = "abc"\nwhy = "x"\n'
    with pytest.raises(ValueError, match="revision 2 is numbered 3"):
        fingerprint.parse_revisions("[[revision]]\n" + entry.format(n=1, fp="a") + "[[revision]]\n"
                                    + entry.format(n=3, fp="b"), "test")
    with pytest.raises(ValueError, match="listed twice"):
        fingerprint.parse_revisions("[[revision]]\n" + entry.format(n=1, fp="a") + "[[revision]]\n"
                                    + entry.format(n=2, fp="a"), "test")


def test_the_fingerprint_is_the_same_in_a_fresh_process_with_another_hash_seed():
    probe = "from almanac.events import registry\nfor m in registry.all_manifests(): print(m.ref, m.fingerprint)"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345"})
    there = dict(line.split() for line in ran.stdout.splitlines())
    assert {ref: there[ref] for ref in REFS} == {ref: registry.manifest(ref).fingerprint for ref in REFS}
