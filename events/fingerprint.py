"""The fingerprint of a rule-set's code and data: one hash over its package's source files and tables.

Why this module reads files although ``events/`` does no I/O: it reads the rule-set's *own source*,
once, when the manifest is built at import time, through ``importlib.resources`` (the same loader
``import`` uses, so it works from a wheel, a zip or a checkout alike). That is code loading, like the
registry reading entry points, not game I/O: no decision or fold reads it. ``room.created`` records
the result so an audit can tell which code a room was played under.

Stable across machines, operating systems and runs: files are taken in sorted relative-path order,
line endings are normalised to ``\\n`` (a Windows checkout hashes like a Linux one), compiled caches
are skipped, and nothing depends on ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib
from importlib import import_module, resources
from importlib.resources.abc import Traversable

# Sources and the tables a rule-set may ship beside them; compiled files and caches are not the rules.
HASHED_SUFFIXES = (".py", ".json", ".csv", ".toml", ".txt", ".md")
SKIPPED_DIRS = ("__pycache__",)


def _files(root: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found: list[tuple[str, Traversable]] = []
    for entry in root.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name not in SKIPPED_DIRS:
                found += _files(entry, path + "/")
        elif entry.name.endswith(HASHED_SUFFIXES):
            found.append((path, entry))
    return found


def package_fingerprint(module_name: str) -> str:
    """``sha256:<hex>`` over the package holding ``module_name`` (its subpackages included).

    A module that is itself a package is hashed whole; a plain module is hashed with the package it
    sits in (a rule-set's modules live in one package); a top-level module alone is hashed by itself.
    """
    module = import_module(module_name)
    package = module_name if hasattr(module, "__path__") else module.__package__
    if package:
        sources = [(path, entry.read_bytes()) for path, entry in sorted(_files(resources.files(package)),
                                                                          key=lambda item: item[0])]
    else:
        source = module.__spec__.loader.get_source(module_name) if module.__spec__ else None
        sources = [(module_name + ".py", (source or "").encode())]
    digest = hashlib.sha256()
    for path, content in sources:
        content = content.replace(b"\r\n", b"\n")
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    return "sha256:" + digest.hexdigest()
