"""Paths into a room's state and a small safe predicate language: generic forensics over any rule-set's fold.

A path is dot-separated (``cities.bob.stock.gold``, ``sectors.3.4.people``; ``a[0]`` is ``a.0``). Its
first segment picks a root: ``scores.`` the rule-set's scores, ``view.PLAYER.`` what that player sees,
``room.`` the room's own fields (players, ended, ...), ``state.`` (or no root) the game state. Values
are read on the folded Structs (getattr, dict key, tuple index), never through ``eval``: a predicate is
``PATH OP LITERAL`` clauses (OP one of == != < <= > >=; LITERAL an integer, a quoted string, true,
false or null) joined by ``and`` / ``or`` (``and`` binds tighter), parsed by the tokenizer below.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from almanac.events import codec, room as room_rules
from almanac.events.room import RoomState

MAX_PATH = 300
MAX_EXPRESSION = 500
MAX_CLAUSES = 16
ROOTS = ("state", "scores", "view", "room")
ROOM_FIELDS = tuple(f for f in RoomState.__struct_fields__ if f != "game")


class PathError(ValueError):
    """A path or an expression that cannot be used; ``code`` and ``field`` for a 4xx answer."""

    def __init__(self, code: str, message: str, field: str = "path", allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.allowed = allowed


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()
_SEGMENT = re.compile(r"^[A-Za-z0-9_@\-]{1,64}$")


@dataclass(frozen=True)
class Path:
    """A parsed path: its root, the player of a ``view.`` root, and the segments below it."""

    text: str
    root: str
    player: str | None
    segments: tuple[str, ...]


def parse_path(text: str) -> Path:
    """A path as written by an operator; PathError naming what is wrong."""
    if not text or len(text) > MAX_PATH:
        raise PathError("invalid_path", f"a path is 1 to {MAX_PATH} characters")
    parts = re.sub(r"\[(\d+)\]", r".\1", text).split(".")
    for part in parts:
        if not _SEGMENT.match(part):
            raise PathError("invalid_path", f"path {text!r}: segment {part!r} is not a name or an index "
                            "(letters, digits, _ @ -)")
    root, player = "state", None
    if parts[0] in ROOTS:
        root, parts = parts[0], parts[1:]
        if root == "view":
            if not parts:
                raise PathError("invalid_path", f"path {text!r}: view.PLAYER... names the player whose view")
            player, parts = parts[0], parts[1:]
    return Path(text=text, root=root, player=player, segments=tuple(parts))


def _root_value(state: RoomState, path: Path) -> Any:
    if path.root == "state":
        return state.game
    decider = room_rules.decider_of(state)
    if path.root == "scores":
        return decider.scores(state.game)
    if path.root == "view":
        if path.player not in decider.seats(state.game) and path.player not in state.players:
            return MISSING  # a view is a seat's: nobody else has one to read
        return room_rules.manifest_of(state).shown_view(state.game, path.player)  # as the API shows it
    return {name: getattr(state, name) for name in ROOM_FIELDS}


def _child(value: Any, segment: str) -> Any:
    if isinstance(value, msgspec.Struct):
        return getattr(value, segment, MISSING) if segment in value.__struct_fields__ else MISSING
    if isinstance(value, dict):
        if segment in value:
            return value[segment]
        if segment.lstrip("-").isdigit() and int(segment) in value:
            return value[int(segment)]
        return MISSING
    if isinstance(value, list | tuple) and segment.isdigit():
        index = int(segment)
        return value[index] if index < len(value) else MISSING
    return MISSING


def value_at(state: RoomState | None, path: Path) -> Any:
    """The value at ``path`` in ``state`` (a Struct, dict, tuple or scalar), or MISSING."""
    if state is None:
        return MISSING
    value = _root_value(state, path)
    if value is MISSING:
        return MISSING
    for segment in path.segments:
        value = _child(value, segment)
        if value is MISSING:
            return MISSING
    return value


def children_at(state: RoomState | None, path: Path) -> list[str]:
    """The names below the deepest part of ``path`` that exists (to say what an unknown path could be)."""
    if state is None:
        return []
    value = _root_value(state, path)
    if value is MISSING:  # a view of someone without a seat: the seats are what there is
        return list(room_rules.decider_of(state).seats(state.game))
    depth = 0
    for segment in path.segments:
        child = _child(value, segment)
        if child is MISSING:
            break
        value, depth = child, depth + 1
    names: list[str] = []
    if isinstance(value, msgspec.Struct):
        names = list(value.__struct_fields__)
    elif isinstance(value, dict):
        names = [str(k) for k in list(value)[:50]]
    elif isinstance(value, list | tuple):
        names = [str(i) for i in range(min(len(value), 50))]
    if path.root == "state" and depth == 0:  # a first segment that is no game key may have meant another root
        names += [root for root in ROOTS if root not in names]
    return names


def shown(value: Any) -> Any:
    """A value as JSON-able builtins (MISSING as None)."""
    return None if value is MISSING else codec.to_builtins(value)


def state_tree(state: RoomState, room_fields: tuple[str, ...] = ("players", "ended")) -> dict[str, Any]:
    """What is compared (with ``events.forensics.tree_diff``) as builtins, under the path roots so that every changed
    path is one ``explain`` reads: ``room.`` (by default seats and end: what two rooms can share; ``state
    --diff`` of one room at two versions passes every room field), ``scores.`` and ``state.`` (the game)."""
    decider = room_rules.decider_of(state)
    return {
        "room": codec.to_builtins({name: getattr(state, name) for name in room_fields}),
        "scores": codec.to_builtins(decider.scores(state.game)),
        "state": codec.to_builtins(state.game),
    }


# --- predicates ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:(?P<op>==|!=|<=|>=|<|>)|(?P<str>"[^"\\]{0,200}"|'[^'\\]{0,200}')"""
                    r"""|(?P<word>[A-Za-z0-9_@.\[\]\-]+))""")
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Clause:
    path: Path
    op: str
    literal: Any

    def holds(self, state: RoomState | None) -> bool:
        value = value_at(state, self.path)
        if value is MISSING:
            return False
        if isinstance(value, msgspec.Struct | dict | list | tuple):
            value = codec.to_builtins(value)
        try:
            return bool(_OPS[self.op](value, self.literal))
        except TypeError:  # e.g. a string compared with < to a number: it does not hold
            return False


@dataclass(frozen=True)
class Predicate:
    """Clauses in disjunctive normal form: any group whose clauses all hold."""

    text: str
    groups: tuple[tuple[Clause, ...], ...]

    def holds(self, state: RoomState | None) -> bool:
        return any(all(clause.holds(state) for clause in group) for group in self.groups)

    @property
    def paths(self) -> list[Path]:
        return [clause.path for group in self.groups for clause in group]


def _literal(token: str, kind: str, text: str) -> Any:
    if kind == "str":
        return token[1:-1]
    if token in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[token]
    if re.fullmatch(r"-?\d{1,30}", token):
        return int(token)
    raise PathError("invalid_expression", f"{text!r}: {token!r} is not a literal (an integer, a quoted string, "
                    "true, false or null)", "where")


def parse_predicate(text: str) -> Predicate:
    """``PATH OP LITERAL [and|or ...]`` as a Predicate; PathError (field ``where``) when it is not one."""
    if not text.strip() or len(text) > MAX_EXPRESSION:
        raise PathError("invalid_expression", f"an expression is 1 to {MAX_EXPRESSION} characters", "where")
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PathError("invalid_expression", f"{text!r}: cannot read from {text[position:][:20]!r}", "where")
        kind = match.lastgroup or "word"
        tokens.append((kind, match.group(kind)))
        position = match.end()
    groups: list[tuple[Clause, ...]] = []
    current: list[Clause] = []
    index = 0
    expected = "a clause PATH OP LITERAL"
    while True:
        if index + 3 > len(tokens):
            raise PathError("invalid_expression", f"{text!r}: expected {expected}", "where",
                            allowed=list(_OPS))
        (path_kind, path_text), (op_kind, op), (lit_kind, lit) = tokens[index:index + 3]
        if path_kind != "word" or op_kind != "op" or lit_kind == "op":
            raise PathError("invalid_expression", f"{text!r}: expected {expected} with OP one of "
                            f"{' '.join(_OPS)}", "where", allowed=list(_OPS))
        try:
            path = parse_path(path_text)
        except PathError as error:
            raise PathError(error.code, error.message, "where") from None
        current.append(Clause(path=path, op=op, literal=_literal(lit, lit_kind, text)))
        index += 3
        if len([c for g in groups for c in g]) + len(current) > MAX_CLAUSES:
            raise PathError("invalid_expression", f"at most {MAX_CLAUSES} clauses", "where")
        if index == len(tokens):
            groups.append(tuple(current))
            return Predicate(text=text, groups=tuple(groups))
        joiner = tokens[index][1].lower()
        if tokens[index][0] != "word" or joiner not in ("and", "or"):
            raise PathError("invalid_expression", f"{text!r}: expected 'and' or 'or' after a clause, "
                            f"got {tokens[index][1]!r}", "where", allowed=["and", "or"])
        if joiner == "or":
            groups.append(tuple(current))
            current = []
        index += 1
        expected = f"a clause after {joiner!r}"
