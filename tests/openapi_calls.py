"""Every operation of an OpenAPI document as calls: each parameter filled by name, so that a story that walks the
gateway's own /openapi.json calls an operation added tomorrow the day it is added (the hidden-routes property,
the heavy reads' hung-client attack)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from urllib.parse import quote


def spread(values: list[str]) -> list[str]:
    """A few representative values of a list: its first, middle and last."""
    return list(dict.fromkeys([values[0], values[len(values) // 2], values[-1]]))


def calls(document: dict, fill: dict[str, list[str]]) -> Iterator[tuple[str, str, str, bool]]:
    """(operation, method, URL, about the game) for every operation of the document and every filling of
    its parameters: every path filling without optional parameters; and with the last one, each optional
    parameter at each of its values, and each two optional parameters together at a few values of each."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            parameters = operation.get("parameters", [])
            unfilled = [p["name"] for p in parameters if p["name"] not in fill or p["in"] not in ("path", "query")]
            assert not unfilled, f"{name}: nothing fills {unfilled}; teach the story's fillers() how"
            in_path = [p["name"] for p in parameters if p["in"] == "path"]
            required = [p["name"] for p in parameters if p["in"] == "query" and p.get("required")]
            optional = [p["name"] for p in parameters if p["in"] == "query" and not p.get("required")]
            fillings = list(itertools.product(*(fill[p] for p in in_path)))
            for index, values in enumerate(fillings):
                url = path
                for parameter, value in zip(in_path, values, strict=True):
                    url = url.replace("{" + parameter + "}", quote(value, safe=""))
                query = [(p, fill[p][-1]) for p in required]
                variants = [query]
                if index == len(fillings) - 1:
                    variants += [[*query, (p, value)] for p in optional for value in fill[p]]
                    variants += [[*query, (p, x), (q, y)] for p, q in itertools.combinations(optional, 2)
                                 for x in spread(fill[p]) for y in spread(fill[q])]
                for variant in variants:
                    full = url + ("?" + "&".join(f"{p}={quote(v, safe='')}" for p, v in variant) if variant else "")
                    yield name, method, full, bool(in_path or variant)
