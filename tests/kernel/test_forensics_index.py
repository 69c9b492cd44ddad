"""Forensics in one place a newcomer finds in one guess: each forensics package's docstring names every module in it.

The two halves (``almanac.events.forensics``, pure; ``almanac.services.forensics``, over a store) each open with
the list of what they hold; a module left off that list is one a newcomer reading it does not find (issue 29,
item 1: the checkpoint, player-bundle and signer modules were missing from theirs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("events/forensics", "services/forensics")


def unlisted(folder: Path) -> list[str]:
    """The modules of the package at ``folder`` its ``__init__`` docstring does not name as ````name````."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    return [path.stem for path in sorted(folder.glob("*.py"))
            if path.stem != "__init__" and f"``{path.stem}``" not in doc]


@pytest.mark.parametrize("package", PACKAGES)
def test_each_forensics_package_lists_every_module_it_holds(package: str):
    assert unlisted(ROOT / package) == []


def test_a_module_left_off_the_list_is_named(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Forensics.\n\n- ``verify`` checks a room.\n"""\n')
    (tmp_path / "verify.py").write_text('"""Verify."""\n')
    (tmp_path / "hidden.py").write_text('"""Not listed."""\n')
    assert unlisted(tmp_path) == ["hidden"]
