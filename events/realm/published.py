"""realm's published versions as the registry finds them: how the console draws them, and which is the default.

The rules of each version live in its own module (``v1/`` frozen, ``v2.py``); what is added here is not
rules (the console's picture module, the default choice), so the frozen packages are never edited for
it. A bare ``realm`` means realm@1: it plays seed 003 as written (a skull in mining finds only stone, at
-50%). realm@2 departs from the seed (a skull cancels one star), so it is opt-in by its full name
(docs/design-rulings.md; docs/rules/realm.md, "Version 2").
"""

from __future__ import annotations

import dataclasses

from almanac.events.realm.v1.manifest import MANIFEST as RULES_V1
from almanac.events.realm.v2 import MANIFEST as RULES_V2

# One picture draws every version: the cities and holdings are the same shape in both.
CONSOLE_PICTURE = "almanac.events.realm:picture.js"

REALM_1 = dataclasses.replace(RULES_V1, console_picture=CONSOLE_PICTURE, default=True)
REALM_2 = dataclasses.replace(RULES_V2, console_picture=CONSOLE_PICTURE, default=False)
