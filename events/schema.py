"""Bounded field types for every command and creation option: the strict input boundary's vocabulary.

Every command Struct and every options Struct declares ``forbid_unknown_fields=True`` and builds its
fields from these types, so each integer has a range and each name a length and a pattern, and all
of it appears in the JSON schema (``msgspec.json.schema``). Decoding is the only check that applies
them: a Struct built in Python (tests, policies) is not checked, the rules still are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from almanac.events.errors import InvalidCommand

# Stored integers are 64-bit; no real amount comes near a quadrillion (the sectors ledger saturates there).
AMOUNT_CEILING = 10**15
# A server time or timeout in milliseconds: up to the year 2500 or so.
TIME_CEILING_MS = 17_000_000_000_000

# ``(?!\n)$``: Python's ``$`` also matches before a final newline, which would let "alice\n" through.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}(?!\n)$"
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}(?!\n)$"

# A player, owner, city or room id: letters, digits, _ . - ; starts with a letter or digit; at most 64.
Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, max_length=64,
                                   description="letters, digits, _ . -; at most 64")]
# A rule-set as a client names it: its name, or name@version (``realm``, ``realm@1``).
RulesetRef = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}(@[0-9]{1,6})?(?!\n)$",
                                         max_length=71, description="a rule-set name, or name@version")]
# A word of a rule-set's vocabulary (an ore, a species, a parcel, a trade id); the rules say which.
Key = Annotated[str, msgspec.Meta(pattern=KEY_PATTERN, max_length=64,
                                  description="letters, digits, _ . : -; at most 64")]
# The same, where "" means "not given" (the field's default).
OptionalKey = Annotated[str, msgspec.Meta(pattern=r"^(?:[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63})?(?!\n)$", max_length=64,
                                          description="empty, or letters, digits, _ . : -; at most 64")]
# Free text a person reads (a reason): bounded, never parsed.
Text = Annotated[str, msgspec.Meta(max_length=200, description="free text, at most 200 characters")]

Amount = Annotated[int, msgspec.Meta(ge=0, le=AMOUNT_CEILING, description="0 .. 10^15")]
PositiveAmount = Annotated[int, msgspec.Meta(ge=1, le=AMOUNT_CEILING, description="1 .. 10^15")]
SignedAmount = Annotated[int, msgspec.Meta(ge=-AMOUNT_CEILING, le=AMOUNT_CEILING, description="-10^15 .. 10^15")]
Milliseconds = Annotated[int, msgspec.Meta(ge=0, le=TIME_CEILING_MS, description="milliseconds")]


# --- the words of what the server answers (states and views) ---------------------------------------

# The mark of a string no list bounds (a player's name, a trade id, text a person reads): the documents' walk
# (tests/gateway/test_typed_schemas.py) takes a string or a map key as typed when it has an enum or this mark.
FREE = "x-free"


def one_of(values: Iterable[str], description: str | None = None) -> msgspec.Meta:
    """A word the rule data lists (``Annotated[str, one_of(data.RESOURCES)]``): its values are the enum the
    documents publish, read from the data itself, so a value added there is in the schema the same day.

    Only the documents read it: decoding checks nothing more (a state or view is the server's own answer, and
    the published rules' logs decode as they always did); tests hold real games' answers to it."""
    return msgspec.Meta(description=description, extra_json_schema={"enum": list(dict.fromkeys(values))})


def free(what: str, pattern: str | None = None) -> msgspec.Meta:
    """A string no list bounds, said so on purpose (``Annotated[str, free("a player's name")]``): ``what`` it is
    becomes its description, and the ``x-free`` mark tells the documents' walk it was not forgotten."""
    return msgspec.Meta(pattern=pattern, description=what, extra_json_schema={FREE: True})


# The free words every rule-set's answers share, defined once (the room's events and the games' states, events
# and views name them so, and a game imports them from events.manifest): schema-only, decoding unchanged.
# A command's or an option's field that is checked as a Name keeps these words with
# ``Annotated[Name, *PlayerName.__metadata__]``: Name's pattern and length, PlayerName's description and mark.
PlayerName = Annotated[str, free("a player's name")]
RoomId = Annotated[str, free("a room's id")]
Reason = Annotated[str, free("why, in words a person reads")]



# --- the boundary's error ----------------------------------------------------------------------

_SEGMENT_LIMIT = 64  # an unknown field's name is echoed at most this long
_MESSAGE_LIMIT = 300
_PATH_TOKEN = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def boundary_error(code: str, error: msgspec.ValidationError, root: Any, prefix: str = "") -> InvalidCommand:
    """An InvalidCommand naming the field a msgspec validation error points at, and what it allows.

    ``allowed`` is the known field names for an unknown field and ``{"min", "max"}`` for an integer
    out of range; names the client made up are cut to 64 characters, so an error never echoes a
    large input back.
    """
    text = str(error)
    path = ""
    if " - at `" in text:
        text, _, where = text.partition(" - at `")
        if where.startswith("key` in `"):  # a dict key is at fault: name the dict
            where = where[len("key` in `"):]
            text = f"{text} (a key)"
        path = where.rstrip("`").removeprefix("$")
        if path.endswith("[...]"):  # msgspec names no key for a dict's value: name the dict
            path = path.removesuffix("[...]")
            text = f"{text} (a value)"
    allowed: Any = None
    named = re.match(r"Object (contains unknown|missing required) field `(.*)`$", text, re.DOTALL)
    if named:
        name = _cut(named.group(2))
        path = f"{path}.{name}"
        unknown = named.group(1) == "contains unknown"
        text = f"unknown field {name!r}" if unknown else f"the field {name!r} is required"
        if unknown:
            parent = _type_at(root, path.rsplit(".", 1)[0])
            if isinstance(parent, msgspec.inspect.StructType):
                allowed = [f.encode_name for f in parent.fields]
    else:
        target = _type_at(root, path)
        if isinstance(target, msgspec.inspect.IntType) and (target.ge is not None or target.le is not None):
            allowed = {"min": target.ge, "max": target.le}
    field = ".".join(part for part in (prefix, path.lstrip(".")) if part) or None
    message = text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."
    if field:
        message = f"{message} (field {field})"
    return InvalidCommand(code, message, field=field, allowed=allowed)


def _cut(name: str) -> str:
    return name if len(name) <= _SEGMENT_LIMIT else name[:_SEGMENT_LIMIT] + "..."


def _type_at(root: Any, path: str) -> Any:
    """The msgspec.inspect type at a dotted path (``.a.b[0].c``) below ``root``; None if it is not found."""
    try:
        node = msgspec.inspect.type_info(root)
        for match in _PATH_TOKEN.finditer(path):
            node = _unwrap(node)
            if match.group(1) is not None:
                if isinstance(node, msgspec.inspect.StructType):
                    node = next(f.type for f in node.fields if f.encode_name == match.group(1))
                elif isinstance(node, msgspec.inspect.DictType):
                    node = node.value_type
                else:
                    return None
            elif isinstance(node, msgspec.inspect.DictType):
                node = node.value_type
            else:
                node = getattr(node, "item_type", None)
        return _unwrap(node)
    except (StopIteration, TypeError, ValueError):
        return None


def _unwrap(node: Any) -> Any:
    """``X | None`` as X (the only unions options and commands use); descriptions stripped."""
    while isinstance(node, msgspec.inspect.Metadata):
        node = node.type
    if isinstance(node, msgspec.inspect.UnionType):
        rest = [t for t in node.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(rest) == 1:
            return _unwrap(rest[0])
    return node
