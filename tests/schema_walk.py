"""Walking the API documents' schemas by their references: the one walk the typed-document stories share.

    for schema, where in walked(document, ["RealmEvent"]):   # every schema RealmEvent reaches, each component once
        ...

``where`` names the spot as a person reads it: a component's name, then ``.field`` for a property (or a
``$defs`` entry), ``[index]`` for a union's member or a tuple's item, ``.items``, ``.additionalProperties``
and ``.propertyNames`` for what an array or a map holds. The stories assert on these names (the list of
spots still open, the checks of the checks), so they are this module's promise.

Built on the walk: ``open_spots``, where a document accepts any object or any value (three stories ask). Besides
it: the OpenAPI document as the gateway builds it without Redis, a component's validator that resolves the
document's own references, and a value as a client receives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

REF = "#/components/schemas/"


def offline_openapi(data_dir: Path) -> dict[str, Any]:
    """The OpenAPI document, built from the routes and the registry alone: no Redis is reached."""
    from almanac.services.gateway import create_app  # noqa: PLC0415
    from almanac.services.settings import load_settings  # noqa: PLC0415

    return create_app(load_settings({}, redis_url="redis://127.0.0.1:1", data_dir=str(data_dir))).openapi()


def walked(document: dict[str, Any], roots: Iterable[str]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema reachable from the components ``roots``, with where it is; a component is entered once (the
    first time a reference reaches it), so a recursive or shared component is neither looped nor walked twice."""
    for schema, where, _ in _walk(document, roots):
        yield schema, where


def reached(document: dict[str, Any], roots: Iterable[str]) -> set[str]:
    """The components ``roots`` reach by references, themselves included."""
    return {component for _, _, component in _walk(document, roots)}


def _walk(document: dict[str, Any], roots: Iterable[str]) -> Iterator[tuple[dict[str, Any], str, str]]:
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    # (schema, where, the component it is in); depth first, in the document's order
    stack: list[tuple[Any, str, str]] = [({"$ref": REF + root}, root, root) for root in reversed(list(roots))]
    while stack:
        schema, where, component = stack.pop()
        if not isinstance(schema, dict):
            continue
        if "$ref" in schema:
            name = schema["$ref"][len(REF):]
            if name not in seen:
                seen.add(name)
                stack.append((schemas[name], name, name))
            continue
        yield schema, where, component
        inner: list[tuple[Any, str, str]] = []
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                inner += [(each, f"{where}.{name}", component) for name, each in value.items()]
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                inner += [(each, f"{where}[{index}]", component) for index, each in enumerate(value)]
            elif key in ("items", "additionalProperties", "propertyNames") and isinstance(value, dict):
                inner.append((value, f"{where}.{key}", component))
        stack += reversed(inner)


def open_spots(document: dict[str, Any], roots: list[str]) -> list[str]:
    """Where a schema reachable from ``roots`` accepts any object or any value: an object with no properties and
    no typed values, or a schema with no type, no reference, no union, no enum and no const."""
    found: list[str] = []
    for schema, where in walked(document, roots):
        if not {"type", "anyOf", "oneOf", "allOf", "enum", "const"} & schema.keys():
            found.append(f"{where}: any value")
        if schema.get("type") == "object" and not schema.get("properties") and not isinstance(
                schema.get("additionalProperties"), dict) and schema.get("additionalProperties") is not False:
            found.append(f"{where}: open object")
    return found


def resolved(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a reference (or a chain of them, a union's titled alias included) stands for."""
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"][len(REF):]]
    return schema


def validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    """A validator of the component ``name`` that resolves the document's own references."""
    resource = Resource.from_contents({"$schema": "https://json-schema.org/draft/2020-12/schema", **document})
    return Draft202012Validator({"$ref": f"urn:almanac{REF}{name}"},
                                registry=Registry().with_resource("urn:almanac", resource))


def as_json(value: Any) -> Any:
    """What a client receives: the value through JSON (tuples become arrays)."""
    from almanac.events import codec  # noqa: PLC0415

    return msgspec.json.decode(msgspec.json.encode(codec.to_builtins(value)))
