"""Every golden log of every published rule-set version still verifies: old rooms replay forever.

Given the exported log of a complete game of ``name@version`` (tests/golden/, written by
``python -m tests.golden.make``), when it is verified (every command decided again, byte for byte,
with its revealed seed), then nothing diverges. A change to what an existing version decides or
folds fails here: such a change must be published as a new version instead.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from almanac.services.forensics.verify import verify_room
from almanac.storage.export_store import ExportFileStore
from golden.make import HERE, published

GOLDEN = sorted(HERE.glob("*@*.json"))

PUBLISH_A_NEW_VERSION = (
    "{ref}'s golden log no longer verifies: {check} check at version {version}: {message}\n"
    "This change alters what the existing version {ref} decides or folds, so every room played under it "
    "would stop replaying. Publish the change as a new version instead (keep {ref} as it is; see "
    "docs/architecture.md, 'Rule-set versions'). Regenerate the golden logs (python -m tests.golden.make) "
    "only if {ref} itself was wrong and the lead agrees."
)


def test_every_published_version_has_a_golden_log():
    assert sorted(path.stem for path in GOLDEN) == sorted(manifest.ref for manifest in published())


@pytest.mark.parametrize("path", GOLDEN, ids=[path.stem for path in GOLDEN])
def test_a_golden_log_verifies_under_its_own_version(path: Path):
    exported = ExportFileStore.open(path)
    document = json.loads(path.read_text())
    assert document["seed"], "a golden game ends, so its seed is revealed and every command is decided again"

    report = asyncio.run(verify_room(exported, document["room"]))

    if not report.ok:
        divergence = report.divergence
        pytest.fail(PUBLISH_A_NEW_VERSION.format(ref=path.stem, check=divergence.check,
                                                 version=divergence.version, message=divergence.message),
                    pytrace=False)
    assert report.ruleset == path.stem
    assert report.commands_redecided == len(document["commands"])
