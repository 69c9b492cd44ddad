"""The fingerprint of a rule-set's rules (its decide/fold code and tables), and the revisions its code has had.

Why this module reads files although ``events/`` does no I/O: it reads the rule-set's *own source*,
once, when the manifest is built at import time, through ``importlib.resources`` (the same loader
``import`` uses, so it works from a wheel, a zip or a checkout alike). That is code loading, like the
registry reading entry points, not game I/O: no decision or fold reads it. ``room.created`` records
the result so an audit can tell which code a room was played under.

What is hashed: exactly what decides and folds. The package's Python sources and tables, less what
presents or surrounds the rules, named once here:

- files (``NOT_RULES``), wherever they sit in the package: the manifest module (wiring, and presentation:
  the console picture's name, descriptions, read models, the bench game), the bots that play as players do
  (``policy.py``, ``bot.py``), the event texts (``summaries.py``), the auditors' stories and checks
  (``audit.py``: they retell a log, nothing decides or folds with them), the list of fingerprints itself,
  and pictures and text (``.js``, ``.md``: not in ``HASHED_SUFFIXES``);
- functions and methods named in ``PRESENTATION_FUNCTIONS`` (the Decider's ``summary`` and the ``summarize``
  it calls: a sentence per event), cut out of a hashed module's source before it is hashed (their lines,
  decorators and all, found through the AST; the rest of the text is hashed as written).

Rewording a summary or a description, redrawing a picture, retelling an audit leaves the fingerprint as it
was. The same names tell the mutation test what to leave alone (tests/mutation/run.py mutates what is hashed).

Presentation must stay presentation: what the rules call is rules. A hashed module whose code outside the
cut-out functions uses a presentation function (``summary``, ``summarize``) or a name imported from a
presentation module (``PRESENTATION_FILES``: ``from .summaries import faces_text``, ``from . import audit``)
is refused (``PresentationUsed``,
when the manifest is built), so a decision cannot move out of the fingerprint by being written in
presentation. Importing is not using: realm's game.py imports ``summarize`` for its ``summary`` alone. What
the fold needs lives in a hashed module (realm's ledger rows: ``trades.py``, not ``audit.py``).

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

import ast
import hashlib
import tomllib
from dataclasses import dataclass
from importlib import import_module, resources
from importlib.resources.abc import Traversable

# Sources and the tables a rule-set may ship beside them; compiled files and caches are not the rules.
HASHED_SUFFIXES = (".py", ".json", ".csv", ".toml", ".txt")
SKIPPED_DIRS = ("__pycache__",)
# Files of a rule-set package that present its rules: event texts, auditors' stories and checks (the rules may
# not use them: see the module's docstring).
PRESENTATION_FILES = ("summaries.py", "audit.py")
# Files of a rule-set package that are not its rules, wherever they sit in it (see the module's docstring). A
# seat bot's rule may call its bot: the bot plays as a player, through the rules, so how it plays is not a rule.
NOT_RULES = ("manifest.py", "policy.py", "bot.py", *PRESENTATION_FILES, "fingerprints.toml")
# Functions and methods that present the rules (a sentence per event), cut out of the hashed source.
PRESENTATION_FUNCTIONS = ("summary", "summarize")
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


class PresentationUsed(ValueError):
    """Rule code uses presentation, which the fingerprint leaves out: the fingerprint would not cover a decision."""


def _imported_from_unhashed(tree: ast.Module, package: str) -> dict[str, str]:
    """Names a module of ``package`` binds by importing from a presentation module of it (``PRESENTATION_FILES``):
    bound name -> what it is. Modules outside the package are not its rules' business."""
    unhashed = {name.removesuffix(".py") for name in PRESENTATION_FILES}
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not (node.level or _within(node.module or "", package)):
            continue
        if isinstance(node, ast.Import):
            node = ast.Import(names=[alias for alias in node.names if _within(alias.name, package)])
        if isinstance(node, ast.ImportFrom) and node.module and node.module.rsplit(".", 1)[-1] in unhashed:
            # from .summaries import faces_text; from almanac.games.realm.v1.audit import describe as d
            bound |= {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            # from almanac.games.realm.v1 import audit; from . import summaries as texts
            bound |= {alias.asname or alias.name: f"{node.module or '.'}.{alias.name}" for alias in node.names
                      if alias.name in unhashed}
        elif isinstance(node, ast.Import):
            # import almanac.games.realm.v1.audit (as a): the name it binds leads to the module
            bound |= {alias.asname or alias.name.split(".")[0]: alias.name for alias in node.names
                      if set(alias.name.split(".")[1:]) & unhashed}
    return bound


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def presentation_cut(path: str, text: str, package: str) -> str:
    """``text`` (the module ``path`` of ``package``) without its presentation functions (``PRESENTATION_FUNCTIONS``):
    the source the fingerprint hashes. Refused (``PresentationUsed``) if the rest uses presentation."""
    tree = ast.parse(text, filename=path)
    cut = [node for node in ast.walk(tree)
           if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in PRESENTATION_FUNCTIONS]
    unhashed = _imported_from_unhashed(tree, package)
    inside = {id(child) for node in cut for child in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        used = ""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            used = (f"{node.id} (presentation)" if node.id in PRESENTATION_FUNCTIONS
                    else f"{node.id} ({unhashed[node.id]}, left out)" if node.id in unhashed else "")
        elif isinstance(node, ast.Attribute) and node.attr in PRESENTATION_FUNCTIONS:
            used = f".{node.attr} (presentation)"
        if used:
            raise PresentationUsed(
                f"{path}, line {node.lineno}: rule code uses {used}, which the fingerprint leaves out; what the "
                "rules call is rules: move it into a module of the rules under another name (events/fingerprint.py)")
    lines = text.splitlines(keepends=True)
    dropped = {line for node in cut
               for line in range(min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno + 1)}
    return "".join(line for number, line in enumerate(lines, start=1) if number not in dropped)


def _hashed_content(path: str, content: bytes, package: str) -> bytes:
    content = content.replace(b"\r\n", b"\n")
    if path.endswith(".py"):
        content = presentation_cut(path, content.decode(), package).encode()
    return content


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
    for path, raw in sources:
        content = _hashed_content(path, raw, package or module_name)
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return "sha256:" + digest.hexdigest()


def hashed_files(package: str) -> list[str]:
    """The files of ``package`` its fingerprint hashes, as paths relative to it, sorted (the mutation test's modules)."""
    return sorted(path for path, _ in _files(resources.files(package)))


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
