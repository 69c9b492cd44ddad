"""Hypothesis strategies drawn from msgspec types: JSON builtins that fit a Struct's declared constraints.

``builtins_for(SomeStruct)`` draws objects exactly as a client would send them (tag included), with
integers inside their ``Meta(ge=, le=)`` range and strings matching their pattern and length, so
every draw must decode. Hypothesis' own ``from_type`` ignores msgspec's ``Meta``, hence this module.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

_INT64 = (-(2**63), 2**63 - 1)


def builtins_for(type_: Any) -> st.SearchStrategy[Any]:
    return _strategy(msgspec.inspect.type_info(type_))


def _strategy(node: Any) -> st.SearchStrategy[Any]:  # noqa: PLR0911, PLR0912 - one case per msgspec type
    inspect = msgspec.inspect
    if isinstance(node, inspect.Metadata):
        return _strategy(node.type)
    if isinstance(node, inspect.NoneType):
        return st.none()
    if isinstance(node, inspect.BoolType):
        return st.booleans()
    if isinstance(node, inspect.IntType):
        low = node.ge if node.ge is not None else (node.gt + 1 if node.gt is not None else _INT64[0])
        high = node.le if node.le is not None else (node.lt - 1 if node.lt is not None else _INT64[1])
        return st.integers(min_value=low, max_value=high)
    if isinstance(node, inspect.StrType):
        longest = node.max_length if node.max_length is not None else 30
        shortest = node.min_length or 0
        if node.pattern is not None:
            return st.from_regex(node.pattern, fullmatch=True).filter(lambda s: shortest <= len(s) <= longest)
        return st.text(min_size=shortest, max_size=min(longest, 30))
    if isinstance(node, inspect.LiteralType):
        return st.sampled_from(node.values)
    if isinstance(node, inspect.UnionType):
        return st.one_of([_strategy(t) for t in node.types])
    if isinstance(node, inspect.VarTupleType | inspect.ListType):
        return st.lists(_strategy(node.item_type), min_size=node.min_length or 0,
                        max_size=min(node.max_length if node.max_length is not None else 4, 4))
    if isinstance(node, inspect.TupleType):
        return st.tuples(*[_strategy(t) for t in node.item_types]).map(list)
    if isinstance(node, inspect.DictType):
        return st.dictionaries(_strategy(node.key_type), _strategy(node.value_type), min_size=node.min_length or 0,
                               max_size=min(node.max_length if node.max_length is not None else 4, 4))
    if isinstance(node, inspect.AnyType):
        return st.none() | st.integers(-5, 5) | st.text(max_size=5)
    if isinstance(node, inspect.StructType):
        return _struct(node)
    raise NotImplementedError(f"no strategy for {node!r}")


def _struct(node: Any) -> st.SearchStrategy[dict]:
    required = {f.encode_name: _strategy(f.type) for f in node.fields if f.required}
    optional = {f.encode_name: _strategy(f.type) for f in node.fields if not f.required}
    tag = {node.tag_field: node.tag} if node.tag_field is not None else {}
    return st.fixed_dictionaries(required, optional=optional).map(lambda body: {**tag, **body})
