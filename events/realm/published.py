"""realm's published versions as the registry finds them, with how the console draws them.

The rules of each version live in its own module (``v1/`` frozen, ``v2.py``); what is added here is
presentation only (the console's picture module), so the frozen packages are never edited for it.
"""

from __future__ import annotations

import dataclasses

from almanac.events.realm.v1.manifest import MANIFEST as RULES_V1
from almanac.events.realm.v2 import MANIFEST as RULES_V2

# One picture draws every version: the cities and holdings are the same shape in both.
CONSOLE_PICTURE = "almanac.events.realm:picture.js"

REALM_1 = dataclasses.replace(RULES_V1, console_picture=CONSOLE_PICTURE)
REALM_2 = dataclasses.replace(RULES_V2, console_picture=CONSOLE_PICTURE)
