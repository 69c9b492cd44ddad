"""The fingerprint covers exactly what decides and folds: presentation is left out, and the rules may not use it.

Presentation is named once, in ``events/fingerprint.py``: the files ``summaries.py`` and ``audit.py`` (event
texts, auditors' stories) and, in the hashed modules, every function or method named ``summary`` or
``summarize``. Each story edits a copy of a published version's package, importable as ``copied``.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from game_modules import game_folder, game_module, importable_copies

from almanac.events import fingerprint, registry


@pytest.fixture
def copied(tmp_path: Path) -> Iterator[Any]:
    """``copy(ref)``: the folder of a copy of ``ref``'s package (the one its Decider lives in), as ``copied``."""

    def copy(ref: str) -> Path:
        shutil.copytree(game_folder(ref), tmp_path / "copied", ignore=shutil.ignore_patterns("__pycache__"))
        return tmp_path / "copied"

    with importable_copies(tmp_path):
        yield copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer says {old!r}"
    path.write_text(text.replace(old, new))


def test_rewording_realms_summaries_and_audit_texts_leaves_its_fingerprint_and_its_rules_change_it(copied):
    # Given a copy of realm@1's package, whose fingerprint is realm@1's
    folder = copied("realm@1")
    assert fingerprint.package_fingerprint("copied") == registry.manifest("realm@1").fingerprint
    before = fingerprint.package_fingerprint("copied")

    # When an event's one-line summary and an audit's sentence are reworded
    _edit(folder / "summaries.py", '"hidden dice"', '"dice nobody saw"')
    _edit(folder / "audit.py", "the merchant cannot cover it", "the merchant is short")
    # Then the fingerprint is the same: a room played under either wording names the same code
    assert fingerprint.package_fingerprint("copied") == before

    # And when the fold's ledger rows (trades.py, which rules.record_ledger calls) count another round
    _edit(folder / "trades.py", "round_number = last_round\n", "round_number = last_round + 1\n")
    # Then the fingerprint changes: the state's ledger would differ
    assert fingerprint.package_fingerprint("copied") != before


def test_rewording_a_deciders_summary_method_leaves_the_fingerprint_and_a_rule_number_beside_it_changes_it(copied):
    # Given a copy of board@1's package: its Decider's ``summary`` is a method of game.py, beside the rules
    folder = copied("board@1")
    before = fingerprint.package_fingerprint("copied")
    assert before == registry.manifest("board@1").fingerprint

    # When the summary's words change
    _edit(folder / "game.py", "fits nowhere", "fits no cell")
    # Then the fingerprint is the same
    assert fingerprint.package_fingerprint("copied") == before

    # And when a number of the rules in the same module changes, it is not
    _edit(folder / "game.py", '"time_remaining": max(0, GAME_LENGTH - state.time)',
          '"time_remaining": max(1, GAME_LENGTH - state.time)')
    assert fingerprint.package_fingerprint("copied") != before


@pytest.mark.parametrize(("ref", "old", "new"), [("sectors@1", "no harvest", "nothing harvested"),
                                                 ("claim@1", "proved up the claim", "proved the claim up")])
def test_sectors_and_claim_summaries_are_presentation_too(copied, ref: str, old: str, new: str):
    # Given a copy of the version's package (its summary's sentences in game.py's ``summarize``)
    folder = copied(ref)
    before = fingerprint.package_fingerprint("copied")
    assert before == registry.manifest(ref).fingerprint

    # When a sentence changes, the fingerprint does not
    _edit(folder / "game.py", old, new)
    assert fingerprint.package_fingerprint("copied") == before


RULES = '''"""Rules."""
from copied import summaries
from copied.summaries import faces_text as shown


class Decider:
    def decide(self, state, command, ctx):
        return [command]

    def summary(self, event):
        return summarize(event) + shown(())


def summarize(event):
    return summaries.faces_text(())
'''


@pytest.mark.parametrize(("used", "named"), [
    ("return [command] if summaries.faces_text(()) else []", "summaries (copied.summaries, left out)"),
    ("return [command] if shown(()) else []", "shown (copied.summaries.faces_text, left out)"),
    ("return [command, self.summary(command)]", ".summary (presentation)"),
    ("return [summarize(command)]", "summarize (presentation)"),
])
def test_rule_code_that_uses_presentation_is_refused(used: str, named: str):
    # Given rules whose presentation (summary, summarize, summaries.py) only presentation uses
    assert "def summarize" not in fingerprint.presentation_cut("rules.py", RULES, "copied")

    # When a decision uses presentation: a name imported from summaries.py, or a summary function
    edited = RULES.replace("return [command]", used)

    # Then the fingerprint refuses it, naming the line and what it uses: the decision would be out of the hash
    with pytest.raises(fingerprint.PresentationUsed, match=re.escape(f"rules.py, line 8: rule code uses {named},")):
        fingerprint.presentation_cut("rules.py", edited, "copied")


def test_a_realm_rule_calling_an_audit_text_is_refused_when_the_fingerprint_is_taken(copied):
    # Given a copy of realm@1 whose rules decide with an audit sentence (audit.py is left out of the fingerprint)
    folder = copied("realm@1")
    _edit(folder / "rules.py", "from almanac.games.realm.v1 import commands as realm_commands",
          "from copied import audit\nfrom almanac.games.realm.v1 import commands as realm_commands")
    _edit(folder / "rules.py", "return replace(state, ledger=state.ledger + rows) if rows else state",
          "return replace(state, ledger=state.ledger + rows) if rows and audit.describe(event) else state")

    # When its fingerprint is taken, then it is refused: what the fold calls must be hashed
    with pytest.raises(fingerprint.PresentationUsed, match=r"rules.py, line \d+: rule code uses audit "):
        fingerprint.package_fingerprint("copied")


def test_the_fold_of_every_published_version_uses_no_presentation():
    # Every published version's fingerprint was taken, so none of its rules uses what the fingerprint leaves
    # out; and the modules it hashes are the modules the mutation test mutates (tests/mutation/run.py)
    for manifest in registry.all_manifests():
        assert manifest.fingerprint.startswith("sha256:")
    hashed = fingerprint.hashed_files("almanac.games.realm.v1")
    assert "trades.py" in hashed and not {"audit.py", "summaries.py", "manifest.py", "bot.py"} & set(hashed)


def test_a_manifest_deciding_with_a_function_named_as_presentation_is_refused():
    # Given sectors@1, whose game.py (hashed) defines ``summarize``, cut out of the fingerprint as presentation
    manifest = registry.manifest("sectors@1")
    summarize = game_module("sectors@1", "game").summarize

    # When a manifest names it as what the room decides with, then it is refused: the decision would be unhashed
    with pytest.raises(ValueError, match=r"decides with its deadlines, .*\.game\.summarize, a name the fingerprint cuts out"):
        dataclasses.replace(manifest, deadlines=summarize)
