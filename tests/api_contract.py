"""The OpenAPI document as a contract every answer keeps: each JSON answer (a refusal's too) is checked against the
schema its operation declares for its status, so a typed answer cannot drift from what the gateway really sends (an
`allowed: null` in a 422, which the Error schema has no null for, went unseen while only 2xx were checked).

`ContractCheck` is an httpx response hook: the gateway tests' clients carry it, so every answer any test
receives is checked (by construction, not a list of routes), and a mismatch fails the test that got it.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DOCUMENT_URI = "urn:almanac:openapi"


def _said(error: ValidationError) -> str:
    """The error where it is deepest: under an anyOf, the member's own complaint that got furthest into the answer."""
    def leaves(found: ValidationError) -> list[ValidationError]:
        return [leaf for inner in found.context for leaf in leaves(inner)] if found.context else [found]

    error = max(leaves(error), key=lambda leaf: len(leaf.absolute_path))
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"{where}: {error.message[:240]}"


class ContractError(AssertionError):
    """An answer that its operation's declared schema refuses."""


class ContractCheck:
    """Checks answers against one OpenAPI document (the app's own ``app.openapi()``)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self.registry = Registry().with_resource(DOCUMENT_URI, resource)
        # Literal paths first: /rooms/{room}/commands/{command_id} must not take /rooms/{room}/commands's answer.
        self.routes = sorted(((self._pattern(path), path) for path in document["paths"]),
                             key=lambda entry: entry[1].count("{"))
        self.checked = 0
        self._fast: dict[str, jsonschema_rs.Validator] = {}  # by pointer: see problems()

    @staticmethod
    def _pattern(path: str) -> re.Pattern[str]:
        parts = re.split(r"(\{[^}]+\})", path)
        return re.compile("^" + "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")

    def pointer_for(self, method: str, path: str, status: int) -> str | None:
        """Where this answer's declared schema sits in the document, or None when it declares none (not JSON)."""
        template = next((t for pattern, t in self.routes if pattern.match(path)), None)
        if template is None:
            return None
        operation = self.document["paths"][template].get(method.lower())
        response = (operation or {}).get("responses", {}).get(str(status))
        if "schema" not in (response or {}).get("content", {}).get("application/json", {}):
            return None
        escaped = template.replace("~", "~0").replace("/", "~1")
        return f"/paths/{escaped}/{method.lower()}/responses/{status}/content/application~1json/schema"

    def problems(self, method: str, path: str, status: int, body: Any) -> list[str]:
        pointer = self.pointer_for(method, path, status)
        if pointer is None:
            return []
        self.checked += 1
        # Every answer is checked by a compiled validator (jsonschema-rs, the one schemathesis uses): the pure-Python
        # one took 0.5 s per page of typed events, a third of the suite's longest test. Only an answer it refuses
        # is checked again by jsonschema, whose errors say where (``_said``).
        fast = self._fast.get(pointer)
        if fast is None:
            fast = self._fast[pointer] = jsonschema_rs.Draft202012Validator({**self.document, "$ref": "#" + quote(pointer, safe="/~")})
        if fast.is_valid(body):
            return []
        validator = Draft202012Validator({"$ref": f"{DOCUMENT_URI}#{pointer}"}, registry=self.registry)
        found = [_said(error) for error in validator.iter_errors(body)]
        return found or [f"(root): refused by jsonschema-rs: {next(iter(fast.iter_errors(body)))}"]

    def __call__(self, response: httpx.Response) -> None:
        if not response.headers.get("content-type", "").startswith("application/json"):
            return
        response.read()
        found = self.problems(response.request.method, response.request.url.path, response.status_code,
                              json.loads(response.content))
        if found:
            raise ContractError(f"{response.request.method} {response.request.url.path} -> {response.status_code} "
                                "does not match its OpenAPI schema:\n  " + "\n  ".join(found[:10]))

