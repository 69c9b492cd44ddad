"""The rule-set registry: the one place that maps a rule-set name to its Decider."""

from __future__ import annotations

import importlib

from almanac.events.decider import Decider
from almanac.events.errors import RuleError

# name -> module that exports DECIDER; adding a rule-set is one line here and one sub-package.
BUILTIN_RULESETS: dict[str, str] = {
    "sectors": "almanac.events.sectors",
    "claim": "almanac.events.claim",
    "board": "almanac.events.board",
    "realm": "almanac.events.realm",
}

_loaded: dict[str, Decider] = {}


def register(decider: Decider) -> Decider:
    """Add a Decider under its name (used by tests for the kernel's tiny rule-set)."""
    _loaded[decider.name] = decider
    return decider


def get(name: str) -> Decider:
    """The Decider for a rule-set name; a RuleError naming the known rule-sets otherwise."""
    decider = _loaded.get(name)
    if decider is not None:
        return decider
    module_name = BUILTIN_RULESETS.get(name)
    if module_name is None:
        raise RuleError(
            "unknown_ruleset",
            f"there is no rule-set named {name!r}; known rule-sets: {', '.join(names())}",
            field="ruleset",
            allowed=names(),
        )
    decider = importlib.import_module(module_name).DECIDER
    _loaded[name] = decider
    return decider


def names() -> list[str]:
    return sorted(set(BUILTIN_RULESETS) | set(_loaded))
