"""The rule-set registry: the one place that finds rule-sets (their manifests) and maps a name to its Decider.

Rule-sets are found through the ``almanac.rulesets`` entry-point group, the four built-in games
included (pyproject.toml registers them like any plugin). Reading entry points is reading installed
package metadata, the same kind of reading as ``import``: it loads code, never game data, and no
state, event or decision depends on it (a room names its rule-set; an unknown name is refused). So it
stays here, beside the import it replaces, rather than in services/ where events/ could not call it;
nothing here touches the clock, randomness, the network or a store. Discovery is sorted by name and a
name claimed twice is an error, so no outcome depends on the order packages were installed in.

Versions: a rule-set may be installed in several versions at once (pyproject.toml: ``realm`` and
``realm@2``; an entry point's name is only where it is found). Which one a bare name means is the
manifests' explicit choice (``RuleSet.default``), never "the newest": a new version is opt-in until
its manifest is made the default. Two ways to name a version, kept apart on purpose:

- a *request* (``create_room``'s ``ruleset``, the CLI, the bench): ``realm`` is the default version
  (realm@1, the seed as written), ``realm@2`` that exact version (``manifest``/``get``);
- a *stored reference* (an envelope's ``ruleset``): ``realm@2`` that version, and a bare ``realm`` is
  version 1, because every room stored before versions existed wrote the bare name, and version-1
  rooms keep writing it so their logs stay byte-identical (``stored``/``stored_ref``).

A room's own lookups go by (name, version) from its state (``decider_at``): one dict lookup.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from almanac.events.decider import Decider
from almanac.events.errors import RuleError, RulesNotInstalledError
from almanac.events.ruleset import ReadModel, RuleSet

ENTRY_POINT_GROUP = "almanac.rulesets"

# (name, version) -> manifest: loaded from an entry point on first use, or registered by a test.
_manifests: dict[tuple[str, int], RuleSet] = {}
# (name, version) -> Decider: the hot path (every fold step asks for the room's Decider).
_deciders: dict[tuple[str, int], Decider] = {}
# entry-point name (``realm``, ``realm@1``) -> entry point, read once per process (refresh() reads again).
_entry_points: dict[str, EntryPoint] | None = None
# name -> True once every entry point of that name has been loaded (its versions are all known).
_complete: dict[str, bool] = {}


class RegistryError(Exception):
    """Installed rule-sets that contradict each other (one name twice, a manifest under the wrong name)."""


def parse(ref: str) -> tuple[str, int | None]:
    """``realm@2`` -> ("realm", 2); ``realm`` -> ("realm", None); a malformed version is an unknown rule-set."""
    name, at, version = ref.partition("@")
    if not at:
        return name, None
    if not version.isdigit() or int(version) < 1 or len(version) > 6:
        raise RuleError("unknown_ruleset", f"{ref!r}: a version is a whole number from 1, as in {name}@1",
                        field="ruleset")
    return name, int(version)


def stored_ref(name: str, version: int) -> str:
    """How an envelope names a room's rules: the bare name for version 1 (as before versions), else name@N."""
    return name if version == 1 else f"{name}@{version}"


def _installed() -> dict[str, EntryPoint]:
    global _entry_points
    if _entry_points is None:
        found: dict[str, EntryPoint] = {}
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
    _complete.clear()


def _add(manifest: RuleSet) -> None:
    key = (manifest.name, manifest.version)
    _manifests[key] = manifest
    _deciders[key] = manifest.decider


def register(item: RuleSet | Decider) -> Decider:
    """Add a manifest, or a bare Decider wrapped in a default manifest (tests' tiny rule-sets); its Decider."""
    manifest = item if isinstance(item, RuleSet) else RuleSet(decider=item)
    _add(manifest)
    return manifest.decider


def unregister(name: str, version: int | None = None) -> None:
    """Forget a registered or loaded rule-set, every version or one (tests that install and remove one)."""
    for key in [key for key in _manifests if key[0] == name and version in (None, key[1])]:
        _manifests.pop(key, None)
        _deciders.pop(key, None)
    if version is None:
        _complete.pop(name, None)


def _load_all(name: str) -> None:
    """Load every installed entry point of ``name`` (``name`` and ``name@N``), checking each one."""
    if _complete.get(name):
        return
    for entry_name, point in _installed().items():
        base, version = parse(entry_name)
        if base != name:
            continue
        loaded = point.load()
        if not isinstance(loaded, RuleSet) or loaded.name != name:
            raise RegistryError(f"entry point {entry_name} = {point.value} is not the manifest (RuleSet) of {name!r}")
        if version is not None and loaded.version != version:
            raise RegistryError(f"entry point {entry_name} = {point.value} publishes version {loaded.version}")
        _add(loaded)
    _complete[name] = True


def _unknown(name: str) -> RuleError:
    return RuleError(
        "unknown_ruleset",
        f"there is no rule-set named {name!r}; known rule-sets: {', '.join(names())}",
        field="ruleset",
        allowed=names(),
    )


def versions(name: str) -> list[int]:
    """The versions of a rule-set this node has, oldest first (empty: none)."""
    if any(parse(entry)[0] == name for entry in _installed()):
        _load_all(name)
    return sorted(version for (known, version) in _manifests if known == name)


def at(name: str, version: int) -> RuleSet:
    """The manifest of exactly ``name@version``; RulesNotInstalledError when this node lacks that version."""
    found = _manifests.get((name, version))
    if found is not None:
        return found
    have = versions(name)
    if not have:
        raise _unknown(name)
    found = _manifests.get((name, version))
    if found is None:
        raise RulesNotInstalledError(f"{name}@{version}", [f"{name}@{v}" for v in have])
    return found


def decider_at(name: str, version: int) -> Decider:
    """The Decider of exactly ``name@version`` (a room's own rules): one dict lookup once loaded."""
    decider = _deciders.get((name, version))
    return decider if decider is not None else at(name, version).decider


def default(name: str) -> RuleSet:
    """The manifest of the version a bare ``name`` means: the one marked ``default``, or the only one.

    Several versions with no default, or two defaults, are installed rule-sets that contradict each
    other (RegistryError): a bare name never falls back to the newest.
    """
    have = versions(name)
    if not have:
        raise _unknown(name)
    marked = [version for version in have if _manifests[(name, version)].default]
    if len(marked) == 1 or (not marked and len(have) == 1):
        return _manifests[(name, (marked or have)[0])]
    refs = ", ".join(f"{name}@{version}" for version in marked or have)
    raise RegistryError(f"{refs}: {'each is marked' if marked else 'none is marked'} as the default version of "
                        f"{name!r}; mark exactly one manifest default=True")


def manifest(request: str) -> RuleSet:
    """The manifest a request names: ``realm`` its default version, ``realm@2`` that version."""
    name, version = parse(request)
    return default(name) if version is None else at(name, version)


def get(request: str) -> Decider:
    """The Decider a request names (``realm``: the default version; ``realm@2``: that version)."""
    return manifest(request).decider


def stored(ref: str) -> RuleSet:
    """The manifest a stored reference names (an envelope's ``ruleset``): a bare name is version 1."""
    name, version = parse(ref)
    found = _manifests.get((name, version or 1))  # every event a player receives names its rules: one lookup
    if found is not None:
        return found
    if not versions(name):
        # A room exists under rules this node lacks entirely: the same answer as a missing version.
        raise RulesNotInstalledError(f"{name}@{version or 1}", [])
    return at(name, version or 1)


def installed() -> list[str]:
    """The rule-sets installed as packages (what a server hosts), by name (each once, whatever its versions)."""
    return sorted({parse(entry)[0] for entry in _installed()})


def names() -> list[str]:
    """Every rule-set name known: installed, or registered in this process."""
    return sorted(set(installed()) | {name for name, _ in _manifests})


def hosted() -> list[str]:
    """The known rule-sets whose manifests load: what listings and API documents describe. An installation that
    cannot load (an entry point whose module is gone, half installed or raising) is left out of them, so that one
    broken package does not take the others' documents down; it still fails where it is named."""
    found = []
    for name in names():
        try:
            default(name)
        except Exception:  # noqa: BLE001, S112 - whatever its import raises, it is reported where the name is used
            continue
        found.append(name)
    return found


def manifests() -> list[RuleSet]:
    """Every known rule-set's default manifest, by name (installed ones are loaded)."""
    return [default(name) for name in names()]


def all_manifests() -> list[RuleSet]:
    """Every version of every rule-set that loads (``hosted``), by name then version."""
    return [at(name, version) for name in hosted() for version in versions(name)]


def read_models() -> dict[str, tuple[str, ReadModel]]:
    """Read-model name -> (rule-set, ReadModel) over every known manifest; a name may belong to one rule-set.

    Versions of one rule-set may each declare a model of the same name; the newest version's wins here
    (the projector uses the room's own version's models).
    """
    found: dict[str, tuple[str, ReadModel]] = {}
    for ruleset in all_manifests():
        for model in ruleset.read_models:
            owner = found.get(model.name)
            if owner is not None and owner[0] != ruleset.name:
                raise RegistryError(f"rule-sets {owner[0]!r} and {ruleset.name!r} both declare read model {model.name!r}")
            found[model.name] = (ruleset.name, model)
    return found
