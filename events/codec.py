"""The codec: the only place where bytes become Structs and Structs become bytes."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any, Union

import msgspec

from almanac.events import registry
from almanac.events.decider import event_tag
from almanac.events.envelope import Envelope
from almanac.events.errors import (
    CorruptEventError,
    InvalidCommand,
    RuleError,
    RulesNotInstalledError,
    UnusableSnapshotError,
)
from almanac.events.room import (
    ROOM_COMMANDS,
    SEAT_EVENTS,
    CreateRoom,
    NonceRevealed,
    PlayerJoined,
    RoomCreated,
    RoomEnded,
    RoomForked,
    RoomState,
    convert_options,
)
from almanac.events.schema import boundary_error

_ENCODER = msgspec.msgpack.Encoder()
_ENVELOPE_DECODER = msgspec.msgpack.Decoder(Envelope)
_JSON_ENCODER = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """msgpack bytes of any Struct or builtin value."""
    return _ENCODER.encode(value)


def decode(data: bytes, type_: Any = Any) -> Any:
    return msgspec.msgpack.decode(data, type=type_)


def to_builtins(value: Any) -> Any:
    """A Struct (or anything msgspec knows) as JSON-friendly builtins; bytes as hex."""
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def to_json(value: Any) -> bytes:
    return _JSON_ENCODER.encode(to_builtins(value))


def _enc_hook(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


# --- envelopes --------------------------------------------------------------------------------


def encode_envelope(envelope: Envelope) -> bytes:
    return _ENCODER.encode(envelope)


def decode_envelope(data: bytes, room: str, version: int) -> Envelope:
    """An envelope from stored bytes; a CorruptEventError naming room and version if it is not one."""
    try:
        envelope = _ENVELOPE_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptEventError(room, version, f"undecodable envelope: {error}") from None
    if envelope.version != version or envelope.room != room:
        raise CorruptEventError(
            room, version, f"entry claims room {envelope.room!r} version {envelope.version}"
        )
    return envelope


# --- events -----------------------------------------------------------------------------------


# --- upcasting ---------------------------------------------------------------------------------
# Stored events are never rewritten. When an event's stored form changes in a way defaults cannot
# express (a renamed field, a changed type), the event gains a ``schema`` field and an upcaster
# turns the older form into the newer one as it is read: (tag, schema) -> payload of schema + 1,
# applied until the current schema, on plain msgpack builtins before the typed decode. Only tags
# listed here take that slower path; every other event decodes straight into its Struct.


def _room_created_1_to_2(payload: dict[str, Any]) -> dict[str, Any]:
    """A room created before rule-set versions existed was played under version 1; its code is unknown."""
    return {**payload, "ruleset_version": 1, "fingerprint": "", "schema": 2}


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("room.created", 1): _room_created_1_to_2,
}
_UPCAST_TAGS = frozenset(tag for tag, _ in UPCASTERS)


def upcast(tag: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A stored payload (as builtins) brought to its event's current schema (no ``schema`` key: 1)."""
    schema = payload.get("schema", 1)
    while (tag, schema) in UPCASTERS:
        payload = UPCASTERS[(tag, schema)](payload)
        schema = payload.get("schema", schema + 1)
    return payload


class _Upcasting:
    """A decoder for a tag with upcasters: bytes -> builtins -> upcast -> the Struct."""

    def __init__(self, tag: str, event_type: Any) -> None:
        self.tag = tag
        self.event_type = event_type

    def decode(self, payload: bytes) -> Any:
        raw = msgspec.msgpack.decode(payload)
        if not isinstance(raw, dict):
            raise msgspec.ValidationError(f"expected a map, got {type(raw).__name__}")
        return msgspec.convert(upcast(self.tag, raw), self.event_type)


def _decoder(tag: str, event_type: Any) -> Any:
    return _Upcasting(tag, event_type) if tag in _UPCAST_TAGS else msgspec.msgpack.Decoder(event_type)


@cache
def _event_decoders(ruleset: str) -> dict[str, Any]:
    """The decoders of one stored reference (an envelope's ``ruleset``: ``realm`` = version 1, ``realm@2``)."""
    decider = registry.stored(ruleset).decider
    decoders: dict[str, Any] = {
        "room.created": _decoder("room.created", RoomCreated[decider.setup_type]),  # type: ignore[name-defined]
        "room.player_joined": _decoder("room.player_joined", PlayerJoined),
        "room.nonce_revealed": _decoder("room.nonce_revealed", NonceRevealed),
        "room.ended": _decoder("room.ended", RoomEnded),
        "room.forked": _decoder("room.forked", RoomForked),
        **{event_tag(t): _decoder(event_tag(t), t) for t in SEAT_EVENTS},
    }
    for event_type in decider.event_types:
        decoders[event_tag(event_type)] = _decoder(event_tag(event_type), event_type)
    return decoders


def event_types(ruleset: str) -> list[str]:
    return sorted(_event_decoders(ruleset))


def encode_event(event: msgspec.Struct) -> tuple[str, bytes]:
    """The (type tag, payload bytes) an event is stored as."""
    return event_tag(event), _ENCODER.encode(event)


def decode_event(envelope: Envelope) -> Any:
    """The event Struct an envelope carries; a CorruptEventError naming room and version otherwise.

    The envelope's ``ruleset`` names the room's rules version (``realm`` for version 1, ``realm@2``),
    so the event decodes with that version's types. A version this node lacks raises
    RulesNotInstalledError (the room is fine; this node cannot read it), never CorruptEventError.
    """
    try:
        decoder = _event_decoders(envelope.ruleset)[envelope.type]
    except KeyError:
        raise CorruptEventError(
            envelope.room, envelope.version, f"unknown event type {envelope.type!r} for {envelope.ruleset}"
        ) from None
    except RulesNotInstalledError:
        raise
    except RuleError as error:
        raise CorruptEventError(envelope.room, envelope.version, error.message) from None
    try:
        return decoder.decode(envelope.payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptEventError(envelope.room, envelope.version, f"undecodable {envelope.type}: {error}") from None


# --- commands ---------------------------------------------------------------------------------
#
# The strict input boundary: every command and creation option passes here before anything acts on
# it. Unknown fields, out-of-range integers (declared with msgspec.Meta on the Structs), overlong or
# malformed names and wrong kinds raise InvalidCommand {code, message, field, allowed}; the gateway
# answers it as a 422 and the engine and `almanac sim` refuse it without recording anything.

# Real commands nest at most five levels (options.setup.sectors[i].buildings); anything deeper is hostile.
MAX_JSON_DEPTH = 32
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON ``data`` nests deeper than ``limit`` (brackets inside strings do not count).

    Checked before parsing: msgspec has no depth limit and hits Python's recursion limit instead.
    Cheap: with fewer brackets than the limit nothing is scanned; otherwise one regex pass.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for token in _JSON_TOKENS.finditer(data):
        char = token.group()[:1]
        if char in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif char in (b"]", b"}"):
            depth -= 1
    return False


def forget_rule_sets() -> None:
    """Drop what this module keeps per rule-set (its decoders and command types), for a process that unregisters a
    rule-set and loads it again from another copy of its code (tests that install and remove a plugin): a cached
    decoder would build the old copy's classes, which the new copy's rules do not recognise."""
    for cached in (_event_decoders, _command_type, _command_types_by_kind):
        cached.cache_clear()


@cache
def _command_type(ruleset: str | None) -> Any:
    kinds: tuple[type, ...] = ROOM_COMMANDS
    if ruleset is not None:
        kinds = kinds + tuple(registry.stored(ruleset).decider.command_types)
    return Union[kinds]  # noqa: UP007 - a runtime union of a dynamic tuple


@cache
def _command_types_by_kind(ruleset: str | None) -> dict[str, type]:
    kinds = list(ROOM_COMMANDS)
    if ruleset is not None:
        kinds += list(registry.stored(ruleset).decider.command_types)
    return {k.__struct_config__.tag: k for k in kinds}


def command_kinds(ruleset: str | None) -> list[str]:
    return list(_command_types_by_kind(ruleset))


def command_schema(ruleset: str | None) -> dict[str, Any]:
    """The JSON schema of every command of a room of ``ruleset`` (bounds and patterns included)."""
    return msgspec.json.schema(_command_type(ruleset))


def decode_command(ruleset: str | None, body: Any) -> Any:
    """A command Struct from builtins (a JSON object) or msgpack bytes, for a room of ``ruleset``.

    ``ruleset`` names the room's rules as its envelopes do (``room.stored_ref``: ``realm`` is version
    1, ``realm@2``), or is None for a room that does not exist yet (only ``create_room`` is known
    then). Raises InvalidCommand naming the field and what is allowed. A ``create_room`` has its
    options checked against the rule-set's options type here too, so bad options never reach the log.
    """
    if isinstance(body, bytes | bytearray | memoryview):
        try:
            body = msgspec.msgpack.decode(body)
        except (msgspec.DecodeError, RecursionError) as error:
            raise InvalidCommand("invalid_command", f"the command is not valid msgpack: {error}") from None
    if not isinstance(body, dict):
        raise InvalidCommand("invalid_command", "a command is an object with a 'kind'", field="command")
    types = _command_types_by_kind(ruleset)
    kind = body.get("kind")
    if not isinstance(kind, str) or kind not in types:
        kinds = list(types)
        raise InvalidCommand(
            "unknown_command", f"unknown command kind; allowed kinds: {', '.join(kinds)}", field="kind", allowed=kinds
        )
    command_type = types[kind]
    try:
        command = msgspec.convert(body, command_type)
    except msgspec.ValidationError as error:
        raise boundary_error("invalid_command", error, command_type) from None
    if isinstance(command, CreateRoom):
        try:
            decider = registry.get(command.ruleset)
        except RuleError:
            return command  # an unknown rule-set is the room's refusal to make (unknown_ruleset)
        convert_options(decider, command.options)
    return command


def recorded_body(body: dict[str, Any], command: msgspec.Struct) -> dict[str, Any]:
    """What is recorded for a body ``decode_command`` accepted: the fields sent, each as decoding wrote it.

    A command may write a field in its canonical form as it is decoded (claim's parcel: " c1 " is "C1"),
    so the log, the rules and every replay see one spelling; fields the client left out stay out.
    """
    decoded = msgspec.to_builtins(command)
    return {key: decoded.get(key, value) for key, value in body.items()}


def encode_command(command: msgspec.Struct) -> dict[str, Any]:
    return msgspec.to_builtins(command)


# --- snapshots --------------------------------------------------------------------------------


class _SnapshotFrame(msgspec.Struct, frozen=True):
    room: RoomState
    hash: str


class _SnapshotFrameRaw(msgspec.Struct, frozen=True):
    room: msgspec.Raw
    hash: str


class _RoomStateRawGame(RoomState, frozen=True, kw_only=True):
    game: msgspec.Raw = msgspec.Raw(b"\xc0")


def encode_snapshot(state: RoomState, last_hash: str) -> bytes:
    """A snapshot: the room state at its version and the chain hash of that version's event."""
    return _ENCODER.encode(_SnapshotFrame(room=state, hash=last_hash))


def decode_snapshot(data: bytes) -> tuple[RoomState, str]:
    """The room state and chain hash a snapshot holds; UnusableSnapshotError when its format is outdated.

    Snapshots are a cache: when a rule-set's state format changes, old ones stop decoding and the
    loaders fold the room from its log instead (the log, not the snapshot, is the truth).
    """
    try:
        frame = msgspec.msgpack.decode(data, type=_SnapshotFrameRaw)
        partial = msgspec.msgpack.decode(frame.room, type=_RoomStateRawGame)
        state_type = registry.decider_at(partial.ruleset, partial.ruleset_version).state_type
        game = msgspec.msgpack.decode(partial.game, type=state_type)
    except RulesNotInstalledError:
        raise  # the room's rules are missing here: folding from the log would fail the same way
    except (msgspec.DecodeError, msgspec.ValidationError, RuleError) as error:
        raise UnusableSnapshotError(str(error)) from None
    fields = {f: getattr(partial, f) for f in RoomState.__struct_fields__}
    fields["game"] = game
    return RoomState(**fields), frame.hash
