"""Small, single-point mutations of a rule-set's source: what the mutation test changes, one at a time.

Why our own and not mutmut: mutmut 3 (on PyPI, installable here) mutates only inside functions, through
trampolines in a copied source tree, so a rule-set's tables (module-level constants in ``data.py``,
the numbers the golden logs most often missed) are out of its reach, and its copy of the tree does not
follow this repository's ``package-dir`` layout. This mutator works on the AST of each module and
changes exactly one thing per mutant:

- a number: an int ``n`` becomes ``n + 1``; a float ``x`` becomes ``2 * x`` (``1.0`` for ``0.0``);
  ``True``/``False`` are booleans, not numbers, and are flipped;
- a comparison: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not in``,
  ``is`` <-> ``is not``;
- an arithmetic operator (in an expression or an augmented assignment): ``+`` <-> ``-``, ``*`` -> ``//``,
  ``/`` -> ``*``, ``//`` -> ``*``, ``%`` -> ``//``, ``**`` -> ``*``;
- a boolean operator: ``and`` <-> ``or``; ``not x`` -> ``x``.

Left alone: functions the caller names (``skip``: the mutation test passes a Decider's ``summary``, a
sentence per event, presentation), docstrings and other strings, type annotations (they describe, the schema's bounds are
the ``Meta`` calls, which are mutated), f-strings (message text; a refusal is re-checked by its code),
and ``__all__``. A mutant is named by its module, line, column and what changed (``rules.py:123:8 < -> <=``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

COMPARE_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
ARITHMETIC_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
}
BOOL_SWAPS: dict[type, type] = {ast.And: ast.Or, ast.Or: ast.And}
SYMBOLS: dict[type, str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
    ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
    ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.And: "and", ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    """One change to one module: ``site`` is the index of the mutable place in ``_places(tree, skip)`` order."""

    module: str
    path: str
    site: int
    line: int
    column: int
    change: str
    skip: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.path.rsplit('/', 1)[-1]}:{self.line}:{self.column} {self.change}"


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value * 2 if value else 1.0


def _places(tree: ast.AST, skip: tuple[str, ...]) -> list[tuple[ast.AST, int, str]]:
    """Every mutable place of ``tree`` in a fixed order: (node, index within the node, what changes)."""
    found: list[tuple[ast.AST, int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr):
            return  # message text
        if isinstance(node, ast.FunctionDef) and node.name in skip:
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, complex):
            found.append((node, 0, f"{node.value!r} -> {_number(node.value)!r}"))
        elif isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                which = f" (comparison {index + 1})" if len(node.ops) > 1 else ""  # 1 <= x <= 9: two places
                found.append((node, index, f"{SYMBOLS[type(op)]} -> {SYMBOLS[COMPARE_SWAPS[type(op)]]}{which}"))
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in ARITHMETIC_SWAPS:
            found.append((node, 0, f"{SYMBOLS[type(node.op)]} -> {SYMBOLS[ARITHMETIC_SWAPS[type(node.op)]]}"))
        elif isinstance(node, ast.BoolOp):
            found.append((node, 0, f"{SYMBOLS[type(node.op)]} -> {SYMBOLS[BOOL_SWAPS[type(node.op)]]}"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            found.append((node, 0, "not x -> x"))
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "type_comment"):
                continue  # type annotations describe; they do not decide
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    visit(child)

    visit(tree)
    return found


def mutants_of(module: str, path: str, source: str, skip: tuple[str, ...] = ()) -> list[Mutant]:
    """Every single-point mutant of one module's source (functions named in ``skip`` left alone)."""
    tree = ast.parse(source)
    return [Mutant(module=module, path=path, site=site, line=getattr(node, "lineno", 0),
                   column=getattr(node, "col_offset", 0), change=change, skip=skip)
            for site, (node, _, change) in enumerate(_places(tree, skip))]


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST, index: int) -> None:
        self.target, self.index = target, index

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if node is not self.target:
            return node
        if isinstance(node, ast.Constant):
            return ast.copy_location(ast.Constant(value=_number(node.value)), node)
        if isinstance(node, ast.Compare):
            ops = list(node.ops)
            ops[self.index] = COMPARE_SWAPS[type(ops[self.index])]()
            node.ops = ops
        elif isinstance(node, ast.BinOp | ast.AugAssign):
            node.op = ARITHMETIC_SWAPS[type(node.op)]()
        elif isinstance(node, ast.BoolOp):
            node.op = BOOL_SWAPS[type(node.op)]()
        elif isinstance(node, ast.UnaryOp):
            return node.operand
        return node


def mutated_code(mutant: Mutant, source: str) -> Any:
    """The compiled module with ``mutant``'s one change (line numbers kept, so tracebacks point at it)."""
    tree = ast.parse(source)
    node, index, _ = _places(tree, mutant.skip)[mutant.site]
    tree = ast.fix_missing_locations(_Apply(node, index).visit(tree))
    return compile(tree, mutant.path, "exec")
