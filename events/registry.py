"""The rule-set registry: the one place that finds rule-sets (their manifests) and maps a name to its Decider.

Rule-sets are found through the ``almanac.rulesets`` entry-point group, the four built-in games
included (pyproject.toml registers them like any plugin). Reading entry points is reading installed
package metadata, the same kind of reading as ``import``: it loads code, never game data, and no
state, event or decision depends on it (a room names its rule-set; an unknown name is refused). So it
stays here, beside the import it replaces, rather than in services/ where events/ could not call it;
nothing here touches the clock, randomness, the network or a store. Discovery is sorted by name and a
name claimed twice is an error, so no outcome depends on the order packages were installed in.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from almanac.events.decider import Decider
from almanac.events.errors import RuleError

ENTRY_POINT_GROUP = "almanac.rulesets"

# name -> manifest: loaded from an entry point on first use, or registered by a test.
_manifests: dict[str, Any] = {}
# name -> Decider: the hot path (every fold step asks for the room's Decider).
_deciders: dict[str, Decider] = {}
# name -> entry point, read once per process (refresh() reads again, e.g. after installing a plugin).
_entry_points: dict[str, Any] | None = None


class RegistryError(Exception):
    """Installed rule-sets that contradict each other (one name twice, a manifest under the wrong name)."""


def _installed() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        found: dict[str, Any] = {}
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (p.name, p.value)):
            other = found.get(point.name)
            if other is not None and other.value != point.value:
                raise RegistryError(
                    f"two installed packages publish the rule-set {point.name!r}: {other.value} and {point.value}"
                )
            found[point.name] = point
        _entry_points = found
    return _entry_points


def refresh() -> None:
    """Read the installed entry points again (already loaded manifests stay)."""
    global _entry_points
    _entry_points = None


def register(item: Any) -> Decider:
    """Add a manifest, or a bare Decider wrapped in a default manifest (tests' tiny rule-sets); its Decider."""
    from almanac.events.manifest import RuleSet  # noqa: PLC0415 - the manifest module imports the room rules

    manifest = item if isinstance(item, RuleSet) else RuleSet(decider=item)
    _manifests[manifest.name] = manifest
    _deciders[manifest.name] = manifest.decider
    return manifest.decider


def unregister(name: str) -> None:
    """Forget a registered or loaded rule-set (tests that install and remove a plugin)."""
    _manifests.pop(name, None)
    _deciders.pop(name, None)


def manifest(name: str) -> Any:
    """The manifest of a rule-set name; a RuleError naming the known rule-sets otherwise."""
    found = _manifests.get(name)
    if found is not None:
        return found
    point = _installed().get(name)
    if point is None:
        raise RuleError(
            "unknown_ruleset",
            f"there is no rule-set named {name!r}; known rule-sets: {', '.join(names())}",
            field="ruleset",
            allowed=names(),
        )
    from almanac.events.manifest import RuleSet  # noqa: PLC0415

    loaded = point.load()
    if not isinstance(loaded, RuleSet) or loaded.name != name:
        raise RegistryError(f"entry point {name} = {point.value} is not the manifest (RuleSet) of {name!r}")
    _manifests[name] = loaded
    _deciders[name] = loaded.decider
    return loaded


def get(name: str) -> Decider:
    """The Decider for a rule-set name; a RuleError naming the known rule-sets otherwise."""
    decider = _deciders.get(name)
    return decider if decider is not None else manifest(name).decider


def installed() -> list[str]:
    """The rule-sets installed as packages (what a server hosts), by name."""
    return sorted(_installed())


def names() -> list[str]:
    """Every rule-set name known: installed, or registered in this process."""
    return sorted(set(_installed()) | set(_manifests))


def manifests() -> list[Any]:
    """Every known rule-set's manifest, by name (installed ones are loaded)."""
    return [manifest(name) for name in names()]


def read_models() -> dict[str, tuple[str, Any]]:
    """Read-model name -> (rule-set, ReadModel) over every known manifest; a name may belong to one rule-set."""
    found: dict[str, tuple[str, Any]] = {}
    for ruleset in manifests():
        for model in ruleset.read_models:
            owner = found.get(model.name)
            if owner is not None and owner[0] != ruleset.name:
                raise RegistryError(f"rule-sets {owner[0]!r} and {ruleset.name!r} both declare read model {model.name!r}")
            found[model.name] = (ruleset.name, model)
    return found
