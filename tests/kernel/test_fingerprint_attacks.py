"""An operator who would change a published version's behaviour and keep its fingerprint: each attack is refused.

The fingerprint leaves presentation out (``summaries.py``, ``audit.py``, every ``summary``/``summarize``) and
wiring (``manifest.py``, the bots). That code still runs: at import, and when the kernel asks for a summary
while the server decides. So each story here writes, where the fingerprint does not look, code that would
change what the hashed rules decide, and the fingerprint must refuse it (or differ). Each edits a copy of a
published version's package, or a small package of its own, importable as ``copied``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from game_modules import game_folder, importable_copies

from almanac.events import fingerprint, registry

RULES = '''"""Rules."""

GAME_LENGTH = 10
# a note{separator}{separator}{separator}


def decide(state, command):
    return [command] if state.time < GAME_LENGTH else []


def summary(event):
    return "an event"
'''


@pytest.fixture
def copied(tmp_path: Path) -> Iterator[Any]:
    """``copy(ref)``: a copy of ``ref``'s package (the one its Decider lives in), importable as ``copied``;
    ``copy(None, files)``: a package of those files, as ``copied``."""

    def copy(ref: str | None, files: dict[str, str | bytes] | None = None) -> Path:
        folder = tmp_path / "copied"
        if ref is not None:
            shutil.copytree(game_folder(ref), folder, ignore=shutil.ignore_patterns("__pycache__"))
        for name, content in {"__init__.py": '"""A copy."""\n', **(files or {})}.items() if ref is None else ():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        return folder

    with importable_copies(tmp_path):
        yield copy


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n" + code + "\n")


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer says {old!r}"
    path.write_text(text.replace(old, new, 1))


# Ways to rewrite realm's rules from code the fingerprint does not hash, each harmless if it were imported here.
REWRITES = {
    "an item of a rules table": "from almanac.games.realm.v1 import rules as _rules\n"
                                "_rules.DECIDE[object] = _rules.DECIDE.get(object)",
    "a table's update": "from almanac.games.realm.v1 import rules as _rules\n_rules.EVOLVE.update({})",
    "a table under another name": "from almanac.games.realm.v1.rules import DECIDE\n_table = DECIDE\n"
                                  "_table[object] = None",
    "an attribute of a rules module": "from almanac.games.realm.v1 import data as _data\n_data.ORES = _data.ORES",
    "setattr": "from almanac.games.realm.v1 import data as _data\nsetattr(_data, 'ORES', _data.ORES)",
    "a function's insides": "from almanac.games.realm.v1 import rules as _rules\n_x = _rules.__dict__",
    "a global rebound when called": "def _later():\n    global ORES\n    ORES = ()",
    "an argument written into": "def _later(event):\n    event.city = 'elsewhere'",
    "the kernel through sys.modules": "import sys\n_m = sys.modules",
    "a table changed in place": "from almanac.games.realm.v1.rules import DECIDE\nDECIDE |= {}",
    "operator.setitem": "import operator\nfrom almanac.games.realm.v1.rules import DECIDE\n"
                        "operator.setitem(DECIDE, object, None)",
}


def test_what_a_process_keeps_of_its_checks_never_lets_a_refused_or_changed_source_through(copied):
    # Given a copy of realm@1 fingerprinted once (its sources parsed, cut and checked, and what passed kept by its bytes)
    folder = copied("realm@1")
    first = fingerprint.package_fingerprint("copied")
    # When an unhashed module is made to act, then it is refused, and refused again: a refusal is never kept
    _append(folder / "summaries.py", REWRITES["setattr"])
    for _ in range(2):
        with pytest.raises(fingerprint.UnhashedCodeActs):
            fingerprint.package_fingerprint("copied")
    # and a hashed rule changed by one byte is hashed (and checked) anew, not taken from what was kept
    _edit(folder / "summaries.py", "\n" + REWRITES["setattr"] + "\n", "")
    assert fingerprint.package_fingerprint("copied") == first
    _edit(folder / "data.py", "=", "= ")
    assert fingerprint.package_fingerprint("copied") != first


@pytest.mark.parametrize("unhashed", ["summaries.py", "audit.py", "manifest.py", "bot.py", "policy.py"])
@pytest.mark.parametrize("how", sorted(REWRITES))
def test_code_left_out_of_the_fingerprint_that_would_rewrite_the_rules_is_refused(copied, unhashed: str, how: str):
    # Given a copy of realm@1, whose unhashed modules run at import (game.py imports summaries.py; the entry
    # point imports manifest.py, which imports the bots and the audit)
    folder = copied("realm@1")
    assert fingerprint.package_fingerprint("copied") == registry.manifest("realm@1").fingerprint

    # When one of them rewrites what the hashed rules decide with
    _append(folder / unhashed, REWRITES[how])

    # Then the fingerprint is refused: the room would be decided by rules its fingerprint does not name
    with pytest.raises(fingerprint.UnhashedCodeActs, match=rf"^{unhashed}, line \d+: code the fingerprint leaves out"):
        fingerprint.package_fingerprint("copied")


def test_a_parent_packages_init_that_would_rewrite_the_rules_is_refused(copied, tmp_path: Path):
    # Given a copy of the whole realm (realm@1's package is its v1/; importing it runs realm's __init__.py first)
    shutil.copytree(game_folder("realm@1").parent, tmp_path / "copied", ignore=shutil.ignore_patterns("__pycache__"))
    assert fingerprint.package_fingerprint("copied.v1") == registry.manifest("realm@1").fingerprint

    # When realm's __init__.py, outside v1's fingerprint, rewrites v1's rules table
    _append(tmp_path / "copied" / "__init__.py", REWRITES["a table's update"])

    # Then realm@1's fingerprint is refused
    with pytest.raises(fingerprint.UnhashedCodeActs, match=r"^copied/__init__.py, line \d+: "):
        fingerprint.package_fingerprint("copied.v1")


@pytest.mark.parametrize(("old", "new"), [
    ("    def summary(self, event: Any) -> str:", "    @_rules_patched\n    def summary(self, event: Any) -> str:"),
    ("    def summary(self, event: Any) -> str:", "    def summary(self, event: Any, _=GAME_LENGTH.bit_length()) -> str:"),
    ("    def summary(self, event: Any) -> str:", "    def summary(self, event: Any) -> _patch(GAME_LENGTH):"),
    ("    def summary(self, event: Any) -> str:", "    def summary(self, event: Any) -> str:\n        event.time = 0"),
    ("    def summary(self, event: Any) -> str:", "    def summary(self, event: Any) -> str:\n        self.length = 0"),
    ("    def summary(self, event: Any) -> str:",
     "    def summary(self, event: Any) -> str:\n        global GAME_LENGTH\n        GAME_LENGTH = 1"),
])
def test_a_summary_method_that_would_act_when_defined_or_called_is_refused(copied, old: str, new: str):
    # Given a copy of board@1, whose Decider's ``summary`` is cut out of the fingerprint (the kernel calls it with
    # each event it tells, in the process that decides)
    folder = copied("board@1")

    # When its decorator, a default, an annotation or its body would change something outside itself
    _edit(folder / "game.py", old, new)

    # Then the fingerprint is refused
    with pytest.raises(fingerprint.UnhashedCodeActs, match=r"^game.py, line \d+: "):
        fingerprint.package_fingerprint("copied")


@pytest.mark.parametrize("reach", ['getattr(self, "summary")(command)', '__import__("copied.audit")',
                                   'getattr(summaries_module, "summarize")(command)',
                                   'type(self).__dict__["summary"](self, command)'])
def test_rule_code_reaching_presentation_by_a_string_is_refused(copied, reach: str):
    # Given a copy of board@1
    folder = copied("board@1")

    # When its rules reach a presentation function or module by its name in a string (given to a call or looked up)
    _edit(folder / "game.py", "    def summary(self, event: Any) -> str:",
          f"    def probe(self, command: Any) -> Any:\n        return {reach}\n\n"
          "    def summary(self, event: Any) -> str:")

    # Then it is refused: a name reached by a string is used all the same
    with pytest.raises(fingerprint.PresentationUsed, match=r"named in a string"):
        fingerprint.package_fingerprint("copied")


def test_a_row_with_a_summary_column_is_not_reaching_presentation():
    # Given rule code that names a row's "summary" column (a key, as a read model's rows do), then it is hashed
    assert '"summary"' in fingerprint.presentation_cut("rules.py", 'ROW = {"summary": ""}\n', "copied")


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x1c"], ids=["U+2028", "form feed", "FS"])
def test_a_line_separator_in_a_comment_does_not_move_the_cut_onto_the_rules(copied, separator: str):
    # Given rules with a summary below them and a comment holding a character str.splitlines ends a line at
    copied(None, {"rules.py": RULES.replace("{separator}", separator)})
    before = fingerprint.package_fingerprint("copied")

    # When the rule just above the summary changes
    rules = Path(sys.modules["copied"].__file__).parent / "rules.py"
    rules.write_bytes(rules.read_bytes().replace(b"return [command] if", b"return [command, command] if"))

    # Then the fingerprint changes: the cut took the summary's lines, not the rules'
    assert fingerprint.package_fingerprint("copied") != before


def test_python_code_in_another_form_beside_the_rules_changes_the_fingerprint_or_is_refused(copied):
    # Given a small rule-set package
    folder = copied(None, {"rules.py": RULES.replace("{separator}", "")})
    before = fingerprint.package_fingerprint("copied")

    # When an extension module that import prefers to rules.py is put beside it, the fingerprint changes
    extension = folder / f"rules{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    extension.write_bytes(b"\x7fELF compiled rules")
    assert fingerprint.package_fingerprint("copied") != before
    extension.unlink()

    # And a sourceless .pyc (import runs it where no source is) changes it too
    (folder / "tables.pyc").write_bytes(b"compiled tables")
    assert fingerprint.package_fingerprint("copied") != before
    (folder / "tables.pyc").unlink()

    # And a cached .pyc that import would run without checking it against rules.py (PEP 552 unchecked hash) is
    # refused; one import checks against its source is skipped, like every cache
    cache = folder / "__pycache__"
    cache.mkdir()
    checked = importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + bytes(8) + b"code"
    (cache / "rules.cpython-311.pyc").write_bytes(checked)
    assert fingerprint.package_fingerprint("copied") == before
    (cache / "rules.cpython-311.pyc").write_bytes(importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little")
                                                  + bytes(8) + b"code")
    with pytest.raises(fingerprint.UnhashedCodeActs, match="without checking it against its source"):
        fingerprint.package_fingerprint("copied")


@pytest.mark.parametrize(("made", "named"), [
    ("from almanac.games.board.v1.game import BoardDecider\n\n\nclass _Kinder(BoardDecider):\n"
     "    def is_over(self, state):\n        return False\n\n\nDECIDER = _Kinder()\n",
     r"its Decider's class _Kinder is defined in copied.manifest, which its fingerprint \(over almanac.games"),
    ("from almanac.games.board.v1.game import BoardDecider\n\nDECIDER = BoardDecider()\nDECIDER.secrets = {}\n",
     r"its Decider holds state of its own \(\['secrets'\]\)"),
])
def test_a_decider_subclassed_or_configured_in_the_manifest_module_is_refused(copied, made: str, named: str):
    # Given a copy of board@1, whose manifest module (outside the fingerprint) names game.py's DECIDER
    folder = copied("board@1")

    # When the manifest module makes its own Decider (a subclass deciding otherwise, or one with other secrets)
    # and names board@1's package as what its fingerprint hashes (so it would carry board@1's fingerprint)
    _edit(folder / "manifest.py", "from almanac.games.board.v1.game import DECIDER\n", made)
    _edit(folder / "manifest.py", "MANIFEST = RuleSet(\n", 'MANIFEST = RuleSet(\n    source="almanac.games.board.v1",\n')

    # Then the manifest is refused when it is built: its rules would not be the code its fingerprint hashes
    with pytest.raises(ValueError, match=named):
        importlib.import_module("copied.manifest")


@pytest.mark.parametrize(("unhashed", "where"), [("policy", "decide"), ("bot", "decide"), ("manifest", "decide"),
                                                   ("summaries", "seat_bot")])
def test_rules_deciding_with_the_bots_or_the_manifest_are_refused_and_only_the_seat_bot_may_call_a_bot(
        copied, unhashed: str, where: str):
    # Given a copy of board@1, whose seats.py (hashed) names its seat bot by calling bot.py (left out: how a bot
    # plays is a player's business)
    folder = copied("board@1")
    assert fingerprint.package_fingerprint("copied") == registry.manifest("board@1").fingerprint

    # When another rule uses a module the fingerprint leaves out (the bots' choice, the manifest's tables), or the
    # seat bot uses presentation
    _append(folder / "seats.py", f"from copied import {unhashed} as left_out\n\n\n"
                                 f"def {where}(state, command, ctx):\n    return left_out.choose(state)")

    # Then the fingerprint is refused: that decision would be made by code it does not hash
    with pytest.raises(fingerprint.PresentationUsed, match=r"seats.py, line \d+: rule code uses left_out \(copied"):
        fingerprint.package_fingerprint("copied")
