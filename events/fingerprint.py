"""The fingerprint of a rule-set's rules (its decide/fold code and tables), and the revisions its code has had.

Why this module reads files although ``events/`` does no I/O: it reads the rule-set's *own source*,
once, when the manifest is built at import time, through ``importlib.resources`` (the same loader
``import`` uses, so it works from a wheel, a zip or a checkout alike). That is code loading, like the
registry reading entry points, not game I/O: no decision or fold reads it. ``room.created`` records
the result so an audit can tell which code a room was played under.

What is hashed: the package's Python sources and tables, but not what presents or surrounds the rules
(``NOT_RULES``): the manifest module (wiring, and presentation: the console picture's name, descriptions,
read models, the bench game), the bots that play as players do (``policy.py``, ``bot.py``), the list of
fingerprints itself, and pictures and text (``.js``, ``.md``: not in ``HASHED_SUFFIXES``). Rewording a
description or redrawing a picture leaves the fingerprint as it was.

Whatever the room decides with is rules, wherever the manifest names it: besides the Decider, a version's
``deadlines`` (the room decides ``room.deadline_missed`` and ``room.seat_to_bot`` by them) and its
``seat_bot`` (a create asking for seat bots is refused without one) are defined in a hashed module (the
built-in games: ``seats.py``). ``RuleSet`` refuses one defined anywhere else (``hashes_module``), so a
manifest cannot carry a decision outside the fingerprint.

Stable across machines, operating systems and runs: files are taken in sorted relative-path order,
line endings are normalised to ``\\n`` (a Windows checkout hashes like a Linux one), compiled caches
are skipped, and nothing depends on ``PYTHONHASHSEED``.

Revisions: a published version's code may change only in ways its golden logs prove decide and fold
the same (a speed-up, a moved import). Each fingerprint its code has had is listed, oldest first, in
``fingerprints.toml`` beside its Decider; tests/golden/test_fingerprints.py fails while the running
code's fingerprint is not on the list, and ``verify`` names the revision a room's fingerprint is.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from importlib import import_module, resources
from importlib.resources.abc import Traversable

# Sources and the tables a rule-set may ship beside them; compiled files and caches are not the rules.
HASHED_SUFFIXES = (".py", ".json", ".csv", ".toml", ".txt")
SKIPPED_DIRS = ("__pycache__",)
# Files of a rule-set package that are not its rules, wherever they sit in it (see the module's docstring).
NOT_RULES = ("manifest.py", "policy.py", "bot.py", "fingerprints.toml")
# The list of a version's fingerprints, in the package of its Decider.
REVISIONS_FILE = "fingerprints.toml"


@dataclass(frozen=True, kw_only=True)
class Revision:
    """One fingerprint a published version's code has had: its number (1 = first published), when and why."""

    number: int
    fingerprint: str
    date: str
    commit: str
    why: str


def _files(root: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found: list[tuple[str, Traversable]] = []
    for entry in root.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name not in SKIPPED_DIRS:
                found += _files(entry, path + "/")
        elif entry.name.endswith(HASHED_SUFFIXES) and entry.name not in NOT_RULES:
            found.append((path, entry))
    return found


def _package_of(module_name: str) -> str | None:
    module = import_module(module_name)
    return module_name if hasattr(module, "__path__") else module.__package__ or None


def package_fingerprint(module_name: str) -> str:
    """``sha256:<hex>`` over the rules of the package holding ``module_name`` (its subpackages included).

    A module that is itself a package is hashed whole; a plain module is hashed with the package it
    sits in (a rule-set's modules live in one package); a top-level module alone is hashed by itself.
    """
    package = _package_of(module_name)
    if package:
        sources = [(path, entry.read_bytes()) for path, entry in sorted(_files(resources.files(package)),
                                                                          key=lambda item: item[0])]
    else:
        module = import_module(module_name)
        source = module.__spec__.loader.get_source(module_name) if module.__spec__ else None
        sources = [(module_name + ".py", (source or "").encode())]
    digest = hashlib.sha256()
    for path, content in sources:
        content = content.replace(b"\r\n", b"\n")
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return "sha256:" + digest.hexdigest()


def hashes_module(source: str, module_name: str) -> bool:
    """Whether the fingerprint ``package_fingerprint(source)`` hashes the file of module ``module_name``."""
    package = _package_of(source)
    if not package:
        return module_name == source
    if module_name == package:
        path = "__init__.py"
    elif module_name.startswith(package + "."):
        inner = module_name[len(package) + 1:].replace(".", "/")
        path = f"{inner}/__init__.py" if hasattr(import_module(module_name), "__path__") else f"{inner}.py"
    else:
        return False
    return any(found == path for found, _ in _files(resources.files(package)))


def parse_revisions(text: str, where: str) -> tuple[Revision, ...]:
    """The ``[[revision]]`` entries of a fingerprints.toml, numbered 1, 2, ... in order, each fingerprint once."""
    entries = tomllib.loads(text).get("revision", [])
    revisions = []
    for index, entry in enumerate(entries, start=1):
        try:
            revision = Revision(number=entry["number"], fingerprint=entry["fingerprint"], date=str(entry["date"]),
                                commit=entry["commit"], why=entry["why"])
        except KeyError as missing:
            raise ValueError(f"{where}: revision {index} has no {missing.args[0]}") from None
        if revision.number != index:
            raise ValueError(f"{where}: revision {index} is numbered {revision.number}; number them 1, 2, ... in order")
        revisions.append(revision)
    prints = [revision.fingerprint for revision in revisions]
    if len(set(prints)) != len(prints):
        raise ValueError(f"{where}: a fingerprint is listed twice")
    return tuple(revisions)


def revisions_beside(module_name: str) -> tuple[Revision, ...]:
    """The revisions listed in ``fingerprints.toml`` in the package of ``module_name`` (none: no list)."""
    package = _package_of(module_name)
    if not package:
        return ()
    listed = resources.files(package) / REVISIONS_FILE
    return parse_revisions(listed.read_text(), f"{package}:{REVISIONS_FILE}") if listed.is_file() else ()


def revision_note(ref: str, fingerprint: str, revisions: tuple[Revision, ...]) -> str:
    """One sentence naming the code a room that recorded ``fingerprint`` under ``ref`` was played under."""
    if not fingerprint:
        return f"played under {ref} before rooms recorded fingerprints: the code revision cannot be named"
    found = next((revision for revision in revisions if revision.fingerprint == fingerprint), None)
    if found is not None:
        return f"played under {ref} code revision {found.number} ({found.date}: {found.why})"
    if not revisions:
        return f"played under {ref} code with fingerprint {fingerprint}; {ref} keeps no list of its code's revisions"
    return (f"played under {ref} code with fingerprint {fingerprint}, which matches NO known revision of {ref} "
            f"(the {len(revisions)} listed: revision 1 to {len(revisions)}): code changed without a golden-log "
            "proof, or not this project's code")
