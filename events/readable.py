"""Stored entries as readable JSON and back, byte for byte: the entries of export files and dispute bundles.

An event entry shows the envelope's fields and its event decoded (``event``, ``summary``, ``time``)
beside ``payload``: the event's stored msgpack bytes in base64. The payload is kept rather than
re-encoded from ``event`` because the decoded form is not always the stored one (an old schema is
shown upcast, bytes are shown as hex): the readable form is for people, the payload for the hash.
The envelope itself is rebuilt from the entry's fields and the payload and encoded canonically; the
writer checks that this gives exactly the stored bytes and, when it does not (an entry written by
other code), adds ``raw``: the stored envelope bytes, which then win. Commands and refusals work
the same way (``command`` readable, ``raw`` only when re-encoding differs). So a reader gets the
stored bytes exactly and can check the readable parts against them (``check_event_entry``).
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from almanac.events import codec, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError, RulesNotInstalledError
from almanac.events.step import CommandRecord, decode_record

# The envelope fields an entry carries as they are (``room`` is the document's, ``payload`` base64).
ENTRY_FIELDS = ("version", "ruleset", "type", "command_id", "player", "server_time_ms", "previous_hash", "hash")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def utc_text(ms: int) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC, by arithmetic (events/ never touches the clock module)."""
    seconds, milli = divmod(ms, 1000)
    days, rest = divmod(seconds, 86400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    # Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days).
    z = days + 719468
    era, doe = divmod(z, 146097)
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day, month = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


def decoded_event(envelope: Envelope) -> dict[str, Any]:
    """The readable part of an event entry: the event decoded and its one-line summary."""
    try:
        event = codec.decode_event(envelope)
    except (CorruptEventError, RulesNotInstalledError) as error:
        return {"event_error": getattr(error, "reason", None) or str(error)}
    try:
        summary = room_rules.summarize_event(envelope.ruleset, event)
    except Exception:  # noqa: BLE001 - a summary is a courtesy; a rule-set's summary bug must not block an export
        summary = envelope.type
    return {"event": codec.to_builtins(event), "summary": summary}


def event_entry(raw: bytes, room: str, version: int) -> dict[str, Any]:
    """A stored envelope's bytes as a readable entry that gives the same bytes back."""
    envelope = codec.decode_envelope(raw, room, version)
    entry: dict[str, Any] = {name: getattr(envelope, name) for name in ENTRY_FIELDS}
    entry["time"] = utc_text(envelope.server_time_ms)
    entry.update(decoded_event(envelope))
    entry["payload"] = b64(envelope.payload)
    if codec.encode_envelope(envelope) != raw:
        entry["raw"] = b64(raw)
    return entry


def entry_envelope(entry: dict[str, Any], room: str) -> Envelope:
    """The envelope an entry stands for (from ``raw`` when present, else its fields and payload)."""
    if "raw" in entry:
        return codec.decode_envelope(unb64(entry["raw"]), room, int(entry["version"]))
    return msgspec.convert({**{name: entry[name] for name in ENTRY_FIELDS}, "room": room,
                            "payload": unb64(entry["payload"])}, Envelope)


def entry_bytes(entry: dict[str, Any], room: str) -> bytes:
    """The stored bytes of an event entry, exactly."""
    if "raw" in entry:
        return unb64(entry["raw"])
    return codec.encode_envelope(entry_envelope(entry, room))


def check_event_entry(entry: dict[str, Any], envelope: Envelope) -> str | None:
    """Why an entry's readable parts do not tell the truth about ``envelope`` (None when they do)."""
    for name in ENTRY_FIELDS:
        if entry.get(name) != getattr(envelope, name):
            return f"its {name} reads {entry.get(name)!r} but the stored entry has {getattr(envelope, name)!r}"
    if entry.get("payload") is not None and entry["payload"] != b64(envelope.payload):
        return "its payload is not the stored payload"
    truth = decoded_event(envelope)
    if _as_json(entry.get("event")) != _as_json(truth.get("event")):
        return "its readable event differs from the event its stored payload decodes to"
    return None


def _as_json(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples become lists), so a parsed file compares equal."""
    return msgspec.json.decode(msgspec.json.encode(value))


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values say the same, type for type: 1, 1.0 and true are three things (Python's == makes them
    one, so a readable copy could show ``true`` or ``5.0`` where the chain holds 1 or 5); key order does not count."""
    return msgspec.json.encode(a, order="sorted") == msgspec.json.encode(b, order="sorted")


def record_entry(raw: bytes) -> dict[str, Any]:
    """A stored command record (accepted or refused) as a readable entry that gives the same bytes back."""
    record = decode_record(raw)
    entry: dict[str, Any] = {"command": codec.to_builtins(record), "time": utc_text(record.server_time_ms)}
    if codec.encode(record) != raw:
        entry["raw"] = b64(raw)
    return entry


def entry_record_bytes(entry: dict[str, Any]) -> bytes:
    """The stored bytes of a command entry, exactly."""
    if "raw" in entry:
        return unb64(entry["raw"])
    return codec.encode(msgspec.convert(entry["command"], CommandRecord))
