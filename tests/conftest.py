"""Shared fixtures: the kernel's tiny rule-set is registered for every test."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from counter_ruleset import COUNTER  # noqa: E402

from events import registry  # noqa: E402

registry.register(COUNTER)
