"""realm@2's manifest: version 1's (bot, bench, trade ledger, trade audit) around version 2's Decider.

realm@2 departs from the seed (a skull cancels one star), so it is opt-in by its full name, never the
default (docs/design-rulings.md; games/realm/RULES.md, "Version 2"). Its fingerprint covers the whole
realm package: version 2 decides with version 1's code wherever it does not override it.
"""

from __future__ import annotations

import dataclasses

from almanac.games.realm.v1.manifest import MANIFEST as MANIFEST_V1
from almanac.games.realm.v2.game import DECIDER

MANIFEST = dataclasses.replace(MANIFEST_V1, decider=DECIDER, version=2, default=False, source="almanac.games.realm")
