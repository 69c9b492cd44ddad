"""The codec: the only place where bytes become Structs and Structs become bytes."""

from __future__ import annotations

from functools import cache
from typing import Any, Union

import msgspec

from almanac.events import registry
from almanac.events.decider import event_tag
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError, RuleError, UnusableSnapshotError
from almanac.events.room import (
    ROOM_COMMANDS,
    PlayerJoined,
    RoomCreated,
    RoomEnded,
    RoomState,
    validation_rule_error,
)

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


@cache
def _event_decoders(ruleset: str) -> dict[str, msgspec.msgpack.Decoder]:
    decider = registry.get(ruleset)
    decoders: dict[str, msgspec.msgpack.Decoder] = {
        "room.created": msgspec.msgpack.Decoder(RoomCreated[decider.setup_type]),  # type: ignore[name-defined]
        "room.player_joined": msgspec.msgpack.Decoder(PlayerJoined),
        "room.ended": msgspec.msgpack.Decoder(RoomEnded),
    }
    for event_type in decider.event_types:
        decoders[event_tag(event_type)] = msgspec.msgpack.Decoder(event_type)
    return decoders


def event_types(ruleset: str) -> list[str]:
    return sorted(_event_decoders(ruleset))


def encode_event(event: msgspec.Struct) -> tuple[str, bytes]:
    """The (type tag, payload bytes) an event is stored as."""
    return event_tag(event), _ENCODER.encode(event)


def decode_event(envelope: Envelope) -> Any:
    """The event Struct an envelope carries; a CorruptEventError naming room and version otherwise."""
    try:
        decoder = _event_decoders(envelope.ruleset)[envelope.type]
    except KeyError:
        raise CorruptEventError(
            envelope.room, envelope.version, f"unknown event type {envelope.type!r} for {envelope.ruleset}"
        ) from None
    except RuleError as error:
        raise CorruptEventError(envelope.room, envelope.version, error.message) from None
    try:
        return decoder.decode(envelope.payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise CorruptEventError(envelope.room, envelope.version, f"undecodable {envelope.type}: {error}") from None


# --- commands ---------------------------------------------------------------------------------


@cache
def _command_type(ruleset: str | None) -> Any:
    kinds: tuple[type, ...] = ROOM_COMMANDS
    if ruleset is not None:
        kinds = kinds + tuple(registry.get(ruleset).command_types)
    return Union[kinds]  # noqa: UP007 - a runtime union of a dynamic tuple


def command_kinds(ruleset: str | None) -> list[str]:
    kinds = list(ROOM_COMMANDS)
    if ruleset is not None:
        kinds += list(registry.get(ruleset).command_types)
    return [k.__struct_config__.tag for k in kinds]


def decode_command(ruleset: str | None, body: Any) -> Any:
    """A command Struct from builtins (a JSON object) or msgpack bytes, for a room of ``ruleset``.

    Raises a RuleError naming the field and what is allowed; ``ruleset`` is None for a room that
    does not exist yet (only ``create_room`` is known then).
    """
    command_type = _command_type(ruleset)
    try:
        if isinstance(body, bytes | bytearray | memoryview):
            return msgspec.msgpack.decode(body, type=command_type)
        return msgspec.convert(body, command_type)
    except msgspec.ValidationError as error:
        text = str(error)
        if "Invalid value" in text and "`$.kind`" in text or "Object missing required field `kind`" in text:
            kinds = command_kinds(ruleset)
            raise RuleError(
                "unknown_command",
                f"unknown command kind; allowed kinds: {', '.join(kinds)}",
                field="kind",
                allowed=kinds,
            ) from None
        raise validation_rule_error("invalid_command", error) from None
    except msgspec.DecodeError as error:
        raise RuleError("invalid_command", f"the command is not valid msgpack: {error}") from None


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
        state_type = registry.get(partial.ruleset).state_type
        game = msgspec.msgpack.decode(partial.game, type=state_type)
    except (msgspec.DecodeError, msgspec.ValidationError, RuleError) as error:
        raise UnusableSnapshotError(str(error)) from None
    fields = {f: getattr(partial, f) for f in RoomState.__struct_fields__}
    fields["game"] = game
    return RoomState(**fields), frame.hash
