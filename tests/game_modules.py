"""A game's own modules, reached by its rule-set's name through the registry: tests never name a game's package.

    PlaceElement = game_module("board@1", "commands").PlaceElement

The module is looked up in the package that holds the version's Decider (``games/board/`` for
board@1, ``games/realm/v2/`` for realm@2), so a game can move without a test changing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from almanac.events import registry


def game_package(ref: str) -> str:
    """The import name of the package holding ``ref``'s Decider (``ref``: a full name such as board@1)."""
    return type(registry.manifest(ref).decider).__module__.rpartition(".")[0]


def game_module(ref: str, module: str) -> ModuleType:
    """``module`` (``rules``, ``commands``, ``game`` ...) of the package holding ``ref``'s Decider."""
    return import_module(f"{game_package(ref)}.{module}")


def game_folder(ref: str) -> Path:
    """The folder of the package holding ``ref``'s Decider (tests that read a game's source text)."""
    return Path(import_module(game_package(ref)).__file__ or "").parent


def game_names(ref: str, module: str, *names: str) -> tuple[Any, ...]:
    """Several names of one of ``ref``'s modules, in order: ``Cut, Haul = game_names("claim@1", "commands", "Cut", "Haul")``."""
    found = game_module(ref, module)
    return tuple(getattr(found, name) for name in names)


COPY = "copied"  # the package name a test's edited copy of a game is imported as


@contextlib.contextmanager
def importable_copies(folder: Path) -> Iterator[None]:
    """Packages written under ``folder`` (a game's copy, as ``COPY``) importable while inside, and every module
    imported from the copy forgotten after, so that the next story's copy is imported afresh."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name == COPY or name.startswith(f"{COPY}.")]:
            del sys.modules[name]
