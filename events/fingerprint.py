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
is refused (``PresentationUsed``; so is one using the manifest or the bots, but for the seat bot's rule
(``seat_bot``), which names the bot that plays; and one reaching presentation by a string, ``getattr(self,
"summary")``),
when the manifest is built), so a decision cannot move out of the fingerprint by being written in
presentation. Importing is not using: realm's game.py imports ``summarize`` for its ``summary`` alone. What
the fold needs lives in a hashed module (realm's ledger rows: ``trades.py``, not ``audit.py``).

What is left out may present, never act: its code runs (``game.py`` imports ``summaries.py``; the entry point
imports ``manifest.py``, which imports the bots; a package's parents' ``__init__.py`` run first; the kernel calls
``summary`` while the server decides), so code the fingerprint does not cover could otherwise rewrite the rules
it does (``rules.DECIDE[Mine] = ...`` in ``summaries.py``). It is refused (``UnhashedCodeActs``, when the
manifest is built) where it writes anywhere but its own locals: ``global``/``nonlocal``, an assignment to an
attribute or item of something it did not make (an imported module's table, an argument: the event the kernel
passes, the Decider's ``self``), a mutating method on such (``.update``, ``.append``, ...), or the dynamic
escapes (``setattr``, ``exec``, ``import_module``, ``__dict__``, ...). A presentation function's decorators,
defaults and annotations run when it is defined, so they may not call anything (``staticmethod`` and
``classmethod`` aside). Rule code may not name presentation in a string either (``getattr(self, "summary")``,
``import_module("....audit")``). Python code in other forms (an extension module, a sourceless ``.pyc``, which
``import`` prefers or takes instead of a source) is hashed like a source; a ``__pycache__`` file ``import``
would run unchecked against its source (an unchecked-hash ``.pyc``) is refused.

Whatever the room decides with is rules, wherever the manifest names it: besides the Decider, a version's
``deadlines`` (the room decides ``room.deadline_missed`` and ``room.seat_to_bot`` by them) and its
``seat_bot`` (a create asking for seat bots is refused without one) are defined in a hashed module (the
built-in games: ``seats.py``). ``RuleSet`` refuses one defined anywhere else (``hashes_module``), so a
manifest cannot carry a decision outside the fingerprint.

Stable across machines, operating systems and runs: files are taken in sorted relative-path order,
line endings are normalised to ``\\n`` (a Windows checkout hashes like a Linux one; in a source a lone
``\\r`` too, which Python also reads as a line's end, and only those end a line when presentation is cut, so
a line the rules count is never mistaken for one the AST places in a ``summary``), compiled caches
are skipped, and nothing depends on ``PYTHONHASHSEED``.

Revisions: a published version's code may change only in ways its golden logs prove decide and fold
the same (a speed-up, a moved import). Each fingerprint its code has had is listed, oldest first, in
``fingerprints.toml`` beside its Decider; tests/golden/test_fingerprints.py fails while the running
code's fingerprint is not on the list, and ``verify`` names the revision a room's fingerprint is.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import tomllib
from dataclasses import dataclass
from importlib import import_module, machinery, resources
from importlib.resources.abc import Traversable
from typing import NamedTuple

# Sources and the tables a rule-set may ship beside them; compiled files and caches are not the rules.
# Python code in another form is hashed too: ``import`` prefers an extension module to a source of the same name
# and runs a sourceless ``.pyc`` (one outside ``__pycache__``) where no source is, so leaving them out would let
# one replace a hashed source unseen.
HASHED_SUFFIXES = (".py", ".json", ".csv", ".toml", ".txt", *machinery.EXTENSION_SUFFIXES,
                   *machinery.BYTECODE_SUFFIXES)
SKIPPED_DIRS = ("__pycache__",)
# Files of a rule-set package that present its rules: event texts, auditors' stories and checks (the rules may
# not use them: see the module's docstring).
PRESENTATION_FILES = ("summaries.py", "audit.py")
# Files of a rule-set package that are not its rules, wherever they sit in it (see the module's docstring). A
# seat bot's rule may call its bot: the bot plays as a player, through the rules, so how it plays is not a rule.
NOT_RULES = ("manifest.py", "policy.py", "bot.py", *PRESENTATION_FILES, "fingerprints.toml")
# The bots' modules, and the one function of the rules that may call them (it names the bot that plays a seat).
BOT_MODULES = ("bot", "policy")
SEAT_BOT = "seat_bot"
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


def _files(root: Traversable, prefix: str = "", *, unhashed: list[tuple[str, Traversable]] | None = None
           ) -> list[tuple[str, Traversable]]:
    """The hashed files under ``root``; the Python sources it leaves out (``NOT_RULES``) join ``unhashed``."""
    found: list[tuple[str, Traversable]] = []
    for entry in root.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name not in SKIPPED_DIRS:
                found += _files(entry, path + "/", unhashed=unhashed)
            else:
                _refuse_unchecked_caches(entry, path)
        elif entry.name.endswith(HASHED_SUFFIXES) and entry.name not in NOT_RULES:
            found.append((path, entry))
        elif entry.name.endswith(".py") and unhashed is not None:
            unhashed.append((path, entry))
    return found


def _refuse_unchecked_caches(cache: Traversable, path: str) -> None:
    """A compiled cache is skipped because ``import`` checks it against its source; one it would not check (an
    unchecked hash-based ``.pyc``, PEP 552: flags 0b01) runs whatever it holds whatever the source says."""
    for entry in cache.iterdir():
        if entry.is_file() and entry.name.endswith(tuple(machinery.BYTECODE_SUFFIXES)):
            flags = int.from_bytes(entry.read_bytes()[4:8], "little")
            if flags & 0b01 and not flags & 0b10:
                raise UnhashedCodeActs(f"{path}/{entry.name}: a compiled cache import runs without checking it "
                                       "against its source, so the hashed source need not be what runs; delete it")


class PresentationUsed(ValueError):
    """Rule code uses presentation, which the fingerprint leaves out: the fingerprint would not cover a decision."""


class UnhashedCodeActs(PresentationUsed):
    """Code the fingerprint leaves out does more than present: it could rewrite the rules the fingerprint covers."""


# What code left out of the fingerprint may not call (by name or as a method): the escapes that write anything,
# reach code by a string, or reach a module's or a function's insides; and the methods that change a table.
ESCAPES = frozenset({"setattr", "delattr", "exec", "eval", "compile", "__import__", "globals", "vars", "locals",
                     "import_module", "reload", "force_setattr", "__setattr__", "__delattr__", "__setitem__",
                     "__delitem__", "__dict__", "__globals__", "__code__", "__defaults__", "__kwdefaults__",
                     "__closure__", "__builtins__", "__class__", "__bases__", "__func__", "__wrapped__",
                     "__init__", "__set_name__", "__init_subclass__", "modules", "setitem", "delitem",
                     "iadd", "ior", "iconcat"})
MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
                      "discard", "add", "sort", "reverse", "__iadd__", "__ior__", "difference_update",
                      "intersection_update", "symmetric_difference_update"})
# The only decorators a presentation function may have: they run nothing of the game's when it is defined.
INERT_DECORATORS = ("staticmethod", "classmethod")


def _children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` as a list, in its order, without the two generators ast makes for each node: the
    walks below were most of a process's start (every process checks its rule-sets' modules as it builds their
    manifests)."""
    children: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            children.extend(item for item in value if isinstance(item, ast.AST))
    return children


def _walk(node: ast.AST) -> list[ast.AST]:
    """``ast.walk(node)`` as a list, in its order (breadth first)."""
    found = [node]
    for visited in found:  # grows as it is read: each node's children join the end
        found.extend(_children(visited))
    return found


def _chain(node: ast.expr) -> tuple[ast.expr, int]:
    """What an attribute or item chain starts from and how deep it reaches: (``table``, 2) for ``table[k].x``."""
    depth = 0
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Starred):
        node, depth = node.value, depth + 1
    return node, depth


UNBOUNDED = 1 << 30


def _fresh(value: ast.expr | None) -> int:
    """How deep ``value`` is made new (so written into, it writes into nothing that was there before): 0 for another
    name for something already there (``table = rules.DECIDE``), 1 for a call's result (its items may be anyone's),
    one more per display or comprehension around what is new, unbounded for a constant."""
    if isinstance(value, ast.IfExp):
        return min(_fresh(value.body), _fresh(value.orelse))
    if isinstance(value, ast.Constant | ast.JoinedStr | ast.Compare | ast.BoolOp | ast.UnaryOp):
        return UNBOUNDED
    if isinstance(value, ast.Call | ast.BinOp):
        return 1
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        return 1 + min((_fresh(element) for element in value.elts), default=UNBOUNDED - 1)
    if isinstance(value, ast.Dict):
        return 1 + min((_fresh(element) for element in value.values), default=UNBOUNDED - 1)
    if isinstance(value, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return 1 + _fresh(value.elt)
    if isinstance(value, ast.DictComp):
        return 1 + _fresh(value.value)
    return 0


def _made_here(scope: ast.AST) -> dict[str, int]:
    """The names ``scope`` (a module or a function) binds only to what it makes itself, each with how deep it is
    new (``_fresh``): not its parameters, not what it imports, not a loop's items. Nested functions are their own
    scopes."""
    made: dict[str, int] = {}
    stack = _children(scope)

    def bind(name: str, depth: int) -> None:
        made[name] = min(made.get(name, depth), depth)

    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            if not isinstance(node, ast.Lambda):
                bind(node.name, 0)  # a function or class is not written into by its own module's presentation
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets if node.value is not None else ():
                depth = _fresh(node.value) if isinstance(target, ast.Name) else 0
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                        bind(name.id, depth)
            if node.value is not None:
                stack.append(node.value)
            continue
        if isinstance(node, ast.AugAssign):  # ``x += ...`` keeps x what it was (its own or not)
            stack.append(node.value)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bind(node.id, 0)  # a loop's item, a with's value: perhaps someone else's
        stack.extend(_children(node))
    return made


def _header(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    args = function.args
    annotations = [arg.annotation for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                                              args.kwarg) if arg is not None and arg.annotation is not None]
    return [*args.defaults, *[d for d in args.kw_defaults if d is not None], *annotations,
            *([function.returns] if function.returns else [])]


def refuse_acting(tree: ast.AST, path: str, scope: ast.AST | None = None) -> None:
    """Refuse (``UnhashedCodeActs``) code of ``tree``, which the fingerprint leaves out, that writes anywhere but
    its own locals or reaches code by a string: what it could change the hashed rules with (module docstring)."""
    scope = tree if scope is None else scope
    own = _made_here(scope)

    def refuse(node: ast.AST, what: str) -> None:
        raise UnhashedCodeActs(f"{path}, line {getattr(node, 'lineno', '?')}: code the fingerprint leaves out "
                               f"{what}; it may present the rules, never change them (events/fingerprint.py)")

    stack = [tree] if tree is not scope else _children(scope)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and node is not scope:
            for part in ([*node.decorator_list, *_header(node)] if not isinstance(node, ast.Lambda) else
                         [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]):
                refuse_acting(part, path, scope)  # run where it is defined, in the enclosing scope
            refuse_acting(node, path, node)
            continue
        if isinstance(node, ast.Global | ast.Nonlocal):
            refuse(node, f"rebinds {', '.join(node.names)} outside itself")
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        while any(isinstance(target, ast.Tuple | ast.List | ast.Starred) for target in targets):  # a, b.x = ...
            targets = [part for target in targets for part in (
                target.elts if isinstance(target, ast.Tuple | ast.List) else
                [target.value] if isinstance(target, ast.Starred) else [target])]
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id not in own:
            refuse(node, f"changes {node.target.id} in place, which it did not make")  # DECIDE |= {...}
        for target in [target for target in targets if isinstance(target, ast.Attribute | ast.Subscript)]:
            root, depth = _chain(target)
            if not (isinstance(root, ast.Name) and depth <= own.get(root.id, 0)):
                refuse(node, f"writes into {ast.unparse(target)}, which it did not make")
        if isinstance(node, ast.Name) and node.id in ESCAPES:
            refuse(node, f"uses {node.id}")
        if isinstance(node, ast.Attribute) and node.attr in ESCAPES:
            refuse(node, f"uses .{node.attr}")
        if isinstance(node, ast.alias) and node.name.split(".")[0] in ("importlib", "builtins", "ctypes", "gc", "sys"):
            refuse(node, f"imports {node.name}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("importlib", "builtins",
                                                                                       "ctypes", "gc", "sys"):
            refuse(node, f"imports from {node.module}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            root, depth = _chain(node.func.value)
            if not (isinstance(root, ast.Name) and depth + 1 <= own.get(root.id, 0)):
                refuse(node, f"changes {ast.unparse(node.func.value)}, which it did not make")
        stack.extend(_children(node))


def _imported_from_unhashed(imports: tuple[ast.Import | ast.ImportFrom, ...], package: str) -> dict[str, str]:
    """Names a module of ``package`` binds by importing from a module of it the fingerprint leaves out (``NOT_RULES``:
    presentation, the manifest, the bots): bound name -> what it is. Modules outside the package are not its
    rules' business."""
    unhashed = {name.removesuffix(".py") for name in NOT_RULES if name.endswith(".py")}
    bound: dict[str, str] = {}
    for node in imports:
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
    parsed = _parsed(text, path)
    cut = [node for node in parsed.functions if node.name in PRESENTATION_FUNCTIONS]
    for function in cut:
        _refuse_acting_when_defined(function, path)
        refuse_acting(function, path, function)
    unhashed = _imported_from_unhashed(parsed.imports, package)
    stems = {name.removesuffix(".py") for name in NOT_RULES if name.endswith(".py")}
    inside = {id(child) for node in cut for child in _walk(node)}
    # A seat bot's rule may call its bot (how a bot plays is a player's business: its moves are decided like any
    # player's); nothing else of the rules may use the bots, the manifest or presentation.
    players = {name for name, what in unhashed.items() if set(what.rsplit(".", 2)[-2:]) & set(BOT_MODULES)}
    in_seat_bot = {id(child) for node in parsed.functions if node.name == SEAT_BOT for child in _walk(node)}
    # strings a call is given or an item is looked up by: how code reaches a name without naming it
    reaching = parsed.reaching
    for node in parsed.named:
        if id(node) in inside:
            continue
        used = ""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and not (
                node.id in players and id(node) in in_seat_bot):
            used = (f"{node.id} (presentation)" if node.id in PRESENTATION_FUNCTIONS
                    else f"{node.id} ({unhashed[node.id]}, left out)" if node.id in unhashed else "")
        elif isinstance(node, ast.Attribute) and node.attr in PRESENTATION_FUNCTIONS:
            used = f".{node.attr} (presentation)"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) in reaching and (
                node.value in PRESENTATION_FUNCTIONS or node.value.rsplit(".", 1)[-1] in stems):
            # getattr(self, "summary"), import_module("....audit"): a name reached by a string is still used (a
            # "summary" column of a row is not reaching anything)
            used = f"{node.value!r} (presentation, named in a string)"
        if used:
            raise PresentationUsed(
                f"{path}, line {node.lineno}: rule code uses {used}, which the fingerprint leaves out; what the "
                "rules call is rules: move it into a module of the rules under another name (events/fingerprint.py)")
    lines = _lines(text)
    dropped = {line for node in cut
               for line in range(min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno + 1)}
    return "".join(line for number, line in enumerate(lines, start=1) if number not in dropped)


def _lines(text: str) -> list[str]:
    """``text``'s lines as the AST numbers them: ended by ``\\n`` alone (``str.splitlines`` also ends one at a form
    feed or U+2028, which a comment may hold: the cut would then drop the rule line above a ``summary``)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines


def _refuse_acting_when_defined(function: ast.FunctionDef | ast.AsyncFunctionDef, path: str) -> None:
    """A presentation function's decorators, defaults and annotations run when it is defined, at import: cut out
    with it, they may call nothing (but ``INERT_DECORATORS``)."""
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Name) and decorator.id in INERT_DECORATORS):
            raise UnhashedCodeActs(f"{path}, line {decorator.lineno}: {function.name} is cut out of the fingerprint, "
                                   f"yet its decorator {ast.unparse(decorator)} runs at import; present, never act")
    for part in _header(function):
        for node in ast.walk(part):
            if isinstance(node, ast.Call | ast.Lambda | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom):
                raise UnhashedCodeActs(f"{path}, line {node.lineno}: {function.name} is cut out of the fingerprint, "
                                       f"yet its signature runs {ast.unparse(node)} when it is defined")


@functools.cache
def _hashed_content(path: str, content: bytes, package: str) -> bytes:
    """What the fingerprint hashes of one file. Kept by its bytes: a process builds many manifests over the same
    files (each version, ``dataclasses.replace``), and parsing and checking them was most of a process's start.
    (What it depends on besides its arguments is this module's constants: ``PRESENTATION_FUNCTIONS``, ``NOT_RULES``.)"""
    content = content.replace(b"\r\n", b"\n")
    if path.endswith(".py"):
        content = content.replace(b"\r", b"\n")  # Python ends a line at a lone \r too (the AST's numbering)
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
        unhashed: list[tuple[str, Traversable]] = []
        sources = [(path, entry.read_bytes()) for path, entry in sorted(_files(resources.files(package),
                                                                               unhashed=unhashed),
                                                                          key=lambda item: item[0])]
        for path, text in [*[(path, entry.read_bytes()) for path, entry in unhashed], *_parents_inits(package)]:
            _refuse_acting_source(path, text)
    else:
        module = import_module(module_name)
        source = module.__spec__.loader.get_source(module_name) if module.__spec__ else None
        sources = [(module_name + ".py", (source or "").encode())]
    digest = hashlib.sha256()
    for path, raw in sources:
        content = _hashed_content(path, raw, package or module_name)
        digest.update(path.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
    _parse_and_walk.cache_clear()  # the trees were ~30 MB a process kept for nothing; what they gave stays kept
    return "sha256:" + digest.hexdigest()


def _parents_inits(package: str) -> list[tuple[str, str]]:
    """The source of each package above ``package`` that has one (an ``__init__.py``; a namespace package has
    none): importing ``package`` runs them first, unhashed. Read through the loader ``import`` used."""
    found = []
    parts = package.split(".")
    for end in range(1, len(parts)):
        parent = ".".join(parts[:end])
        spec = import_module(parent).__spec__
        source = spec.loader.get_source(parent) if spec and spec.loader and spec.has_location else None
        if source:
            found.append((f"{parent}/__init__.py", source))
    return found


def _refuse_acting_source(path: str, text: str | bytes) -> None:
    """``refuse_acting`` over a source the fingerprint leaves out, once per text a process has seen pass (realm@2's
    fingerprint, over the whole realm package, meets realm@1's modules again under other paths)."""
    if text not in _ACTS_NOTHING:
        refuse_acting(_parsed(text, path).tree, path)
        _ACTS_NOTHING.add(text)


_ACTS_NOTHING: set[str | bytes] = set()  # sources ``refuse_acting`` passed: what passes once passes again


class _Parsed(NamedTuple):
    """A module's tree and the nodes ``presentation_cut`` looks at, each kind in ``ast.walk``'s order."""

    tree: ast.Module
    functions: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]
    imports: tuple[ast.Import | ast.ImportFrom, ...]
    named: tuple[ast.Name | ast.Attribute | ast.Constant, ...]  # names, attributes and strings: what may name presentation
    reaching: frozenset[int]  # ids of a call's arguments and of items looked up: how code reaches a name by a string


def _parsed(text: str | bytes, path: str) -> _Parsed:
    """``text`` parsed and walked once, kept by the text: every process parses its rule-sets' modules as it starts,
    and a module hashed under two packages (realm@1's within realm@2's) is parsed once. Nothing changes a tree."""
    try:
        return _parse_and_walk(text)
    except SyntaxError:
        ast.parse(text, filename=path)  # raised again, naming the file
        raise


@functools.cache
def _parse_and_walk(text: str | bytes) -> _Parsed:
    tree = ast.parse(text)
    functions, imports, named, reaching = [], [], [], set()
    for node in _walk(tree):
        if isinstance(node, ast.Name | ast.Attribute) or (isinstance(node, ast.Constant)
                                                          and isinstance(node.value, str)):
            named.append(node)
        elif isinstance(node, ast.Call):
            reaching.update(id(arg) for arg in [*node.args, *(keyword.value for keyword in node.keywords)])
        elif isinstance(node, ast.Subscript):
            reaching.add(id(node.slice))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            imports.append(node)
    return _Parsed(tree, tuple(functions), tuple(imports), tuple(named), frozenset(reaching))


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
