"""A game imports only the kernel's public API (``almanac.events.manifest``), its own package, msgspec and the stdlib.

Checked by construction over every game there is: each package under games/ (the built-in games) and
each package of a project under examples/ (a game in its own distribution). A game that reached into
the kernel's other modules (the room, the step, the codec) would break when the kernel moves them;
the public module re-exports what a game needs instead.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_API = "almanac.events.manifest"
# Besides the public API and its own package, a game may import these (and the standard library).
THIRD_PARTY_ALLOWED = {"msgspec"}


def game_packages(root: Path = ROOT) -> list[tuple[Path, str]]:
    """(folder, import name) of every game: games/<name>/ as almanac.games.<name>, examples/<p>/<pkg>/ as <pkg>."""
    found = [(folder, f"almanac.games.{folder.name}") for folder in sorted((root / "games").iterdir())
             if (folder / "__init__.py").is_file()]
    found += [(init.parent, init.parent.name) for init in sorted((root / "examples").glob("*/*/__init__.py"))]
    return found


def _imported(node: ast.AST, module_name: str) -> list[str]:
    """The absolute module names an import statement names (``from a import b`` may name the module a.b)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: resolved against the file's own package
        base = module_name.split(".")[: -node.level]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [module] + [f"{module}.{alias.name}" for alias in node.names] if module in ("almanac", "almanac.events") \
        else [module]


def foreign_imports(folder: Path, package: str) -> list[str]:
    """Every import in the game at ``folder`` (imported as ``package``) that is not allowed, as "file:line name"."""
    offenders = []
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder).with_suffix("").parts
        module_name = ".".join((package, *relative[:-1], *([] if relative[-1] == "__init__" else [relative[-1]])))
        if relative[-1] == "__init__":
            module_name += ".__init__"  # so a relative import from a package's __init__ resolves inside it
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for name in _imported(node, module_name):
                allowed = (name == PUBLIC_API or name == package or name.startswith(package + ".")
                           or name.split(".")[0] in THIRD_PARTY_ALLOWED | set(sys.stdlib_module_names) | {"__future__"})
                if not allowed and name not in ("almanac", "almanac.events"):
                    offenders.append(f"{path.relative_to(folder.parent)}:{node.lineno} {name}")
    return offenders


def test_every_game_is_found_the_four_built_in_ones_and_the_example_plugin():
    assert [package for _, package in game_packages()] == [
        "almanac.games.board", "almanac.games.claim", "almanac.games.realm", "almanac.games.sectors", "dice_duel"]


def test_every_game_imports_only_the_public_manifest_api_of_the_kernel():
    offenders = {package: found for folder, package in game_packages() if (found := foreign_imports(folder, package))}
    assert offenders == {}, f"a game imports the kernel only through {PUBLIC_API} (add what it needs there)"


def test_a_game_reaching_into_the_kernel_or_another_game_is_caught(tmp_path):
    # Given a game that imports the room module and another game besides the public API
    game = tmp_path / "games" / "rogue"
    game.mkdir(parents=True)
    (game / "__init__.py").write_text('"""A rogue game."""\n')
    (game / "game.py").write_text(
        '"""Its Decider."""\n\nfrom almanac.events import room\nfrom almanac.events.manifest import RuleSet\n'
        "from almanac.games.board.rules import fits\nfrom almanac.games.rogue import data\n"
        "from . import data as same\n")
    (tmp_path / "examples").mkdir()

    # When the rule checks it, then the room and the other game are named; its own modules are not
    [(folder, package)] = game_packages(tmp_path)
    assert foreign_imports(folder, package) == ["rogue/game.py:3 almanac.events.room",
                                                "rogue/game.py:5 almanac.games.board.rules"]
