"""The services tests also use the projection test helpers (projection_games: scripted games, model dumps)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "projections"))
