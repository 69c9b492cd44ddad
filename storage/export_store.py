"""The export file format as an event store: one JSON document per room, read and written through the store contract.

`almanac export` writes a room's document, `verify --file` and `import` read one; the same store
runs the contract suite the Redis and memory stores run. A document keeps the stored envelope
bytes exactly, so verification of a file sees what the server stored.

`almanac export` writes format_version 2, readable (docs/forensics.md, "Export files"): ``events``
decoded with their hashes (each entry rebuilds the stored envelope bytes exactly: ``events.readable``),
``commands`` as [{first_version, command, ...}], ``rejections`` as [{command, error, ...}], ``head``
({version, hash}) and ``origin`` (set on a copy made by ``import --as``: the room, head version and head
hash it was copied from) and ``commit_scheme`` (the room's commitment scheme, docs/bundle-format.md 6.1;
absent from older files and for rooms with none recorded: such a file imports as ``almanac-commit-v1``). Reading converts it to the compact form below, which is also format_version 1
and what this store keeps in memory and in its directory.

Document (format_version 1): ``format``, ``format_version``, ``room``, ``ruleset``,
``exported_at_ms``, ``seed`` (hex; an export carries it only once revealed), ``envelopes`` (base64,
in version order), ``commands`` ([first version, base64 CommandRecord]), ``rejections``
({record, error}); optional ``outcomes`` (command id -> [first, last] of commands appended through
this store) and ``snapshots`` (version -> base64), both absent from files written by `almanac export`;
optional ``commit_scheme`` as in format_version 2.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from almanac.events import codec, commitments, readable
from almanac.events.copies import relabel as relabel_envelopes, relabel_record
from almanac.events.dice import nonce_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.forensics.redecide import room_end
from almanac.events.step import decode_record
from almanac.storage.base import (
    AppendResult,
    StoredOutcome,
    VersionConflict,
    WritesInARow,
    snapshot_then_tail,
)

EXPORT_FORMAT = "almanac-room-export"
FORMAT_VERSION = 1  # the compact form this store keeps
READABLE_FORMAT_VERSION = 2  # what `almanac export` writes


class ExportFormatError(ValueError):
    """A file that is not an exported room, or a damaged one."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def new_document(room: str, ruleset: str = "", exported_at_ms: int = 0) -> dict[str, Any]:
    return {"format": EXPORT_FORMAT, "format_version": FORMAT_VERSION, "room": room, "ruleset": ruleset,
            "exported_at_ms": exported_at_ms, "seed": None, "envelopes": [], "commands": [], "rejections": []}


def check_document(document: Any, where: str = "the document") -> dict[str, Any]:
    """The document when it is an exported room; ExportFormatError naming what is wrong otherwise."""
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(f"{where} is not an exported room (format is not {EXPORT_FORMAT!r})")
    if document.get("format_version") == READABLE_FORMAT_VERSION:
        document = compact_document(document, where)
    elif document.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise ExportFormatError(f"{where} has format_version {document.get('format_version')!r}; "
                                f"this Almanac reads {FORMAT_VERSION} and {READABLE_FORMAT_VERSION}")
    try:
        if not isinstance(document["room"], str):
            raise TypeError("room is not a string")
        for data in document["envelopes"]:
            _unb64(data)
        for version, record in document["commands"]:
            int(version), _unb64(record)
        for rejection in document["rejections"]:
            _unb64(rejection["record"])
        if document.get("seed"):
            bytes.fromhex(document["seed"])
        if document.get("commit_scheme", commitments.SCHEME) not in commitments.SCHEMES:
            raise ValueError(f"commit_scheme {document['commit_scheme']!r} is none of {list(commitments.SCHEMES)}")
    except (KeyError, TypeError, ValueError) as error:
        raise ExportFormatError(f"{where} is a damaged export: {error}") from None
    return document


def compact_document(document: dict[str, Any], where: str = "the document") -> dict[str, Any]:
    """A readable (format_version 2) document in the compact form, the stored bytes exactly.

    Every readable part is checked against the bytes it stands for: a file whose readable event says
    something its stored payload does not is refused, so what a person reads is what is verified.
    """
    try:
        room = document["room"]
        compact = new_document(room, document.get("ruleset", ""), int(document.get("exported_at_ms", 0)))
        compact["seed"] = document.get("seed")
        if document.get("origin") is not None:
            compact["origin"] = dict(document["origin"])
        if document.get("commit_scheme") is not None:
            compact["commit_scheme"] = document["commit_scheme"]
        for entry in document["events"]:
            envelope = readable.entry_envelope(entry, room)
            wrong = readable.check_event_entry(entry, envelope)
            if wrong is not None:
                raise ValueError(f"event entry {entry.get('version')}: {wrong}")
            compact["envelopes"].append(_b64(readable.entry_bytes(entry, room)))
        for entry in document["commands"]:
            compact["commands"].append([int(entry["first_version"]), _b64(readable.entry_record_bytes(entry))])
        for entry in document["rejections"]:
            compact["rejections"].append({"record": _b64(readable.entry_record_bytes(entry)), "error": entry.get("error")})
    except (KeyError, TypeError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ExportFormatError(f"{where} is a damaged export: {error}") from None
    except Exception as error:  # a CorruptEventError from a damaged entry  # noqa: BLE001
        raise ExportFormatError(f"{where} is a damaged export: {error}") from None
    return compact


def readable_document(compact: dict[str, Any]) -> dict[str, Any]:
    """A compact (format_version 1) document as `almanac export` writes it: readable, format_version 2."""
    room = compact["room"]
    raws = [_unb64(data) for data in compact["envelopes"]]
    events = [readable.event_entry(raw, room, version) for version, raw in enumerate(raws, start=1)]
    scheme = {"commit_scheme": compact["commit_scheme"]} if compact.get("commit_scheme") else {}
    return {
        "format": EXPORT_FORMAT, "format_version": READABLE_FORMAT_VERSION, "room": room,
        "ruleset": compact.get("ruleset", ""), "exported_at_ms": compact.get("exported_at_ms", 0),
        "head": {"version": len(events), "hash": events[-1]["hash"] if events else GENESIS_HASH},
        "origin": compact.get("origin"), **scheme, "seed": compact.get("seed"), "events": events,
        "commands": [{"first_version": int(version), **readable.record_entry(_unb64(data))}
                     for version, data in compact["commands"]],
        "rejections": [{**readable.record_entry(_unb64(r["record"])), "error": r.get("error")}
                       for r in compact["rejections"]],
    }


def _command_id(known: str | None, record: str) -> str | None:
    """The command id of a stored record (None for bytes that are not a command record)."""
    if known is not None:
        return known
    try:
        return decode_record(_unb64(record)).command_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class ExportFileStore(WritesInARow):
    """Rooms kept as export documents; with a directory, every write rewrites the room's file.

    ``ExportFileStore.open(path)`` reads one exported file (a store holding that one room).
    """

    def __init__(self, directory: Path | None = None, shard_count: int = 16) -> None:
        self.shard_count = shard_count
        self.directory = directory
        self.documents: dict[str, dict[str, Any]] = {}
        self._paths: dict[str, Path] = {}
        self._lock = asyncio.Lock()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            for path in sorted(directory.glob("*.json")):
                self._add_file(path)

    @classmethod
    def open(cls, path: Path) -> ExportFileStore:
        """A store over one exported file; OSError when unreadable, ExportFormatError when not an export."""
        store = cls()
        store._add_file(path)
        return store

    @classmethod
    def of_document(cls, document: dict[str, Any]) -> ExportFileStore:
        store = cls()
        document = check_document(document)
        store.documents[document["room"]] = document
        return store

    def _add_file(self, path: Path) -> None:
        try:
            document = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ExportFormatError(f"{path} is not an exported room (not JSON: {error})") from None
        document = check_document(document, str(path))
        self.documents[document["room"]] = document
        self._paths[document["room"]] = path

    @property
    def room(self) -> str:
        """The room of a one-room store (an opened export file)."""
        [room] = self.documents
        return room

    def document(self, room: str) -> dict[str, Any]:
        return self.documents[room]

    def _writable(self, room: str) -> dict[str, Any]:
        document = self.documents.get(room)
        if document is None:
            document = self.documents[room] = new_document(room)
        return document

    def _persist(self, room: str) -> None:
        path = self._paths.get(room)
        if path is None and self.directory is not None:
            path = self._paths[room] = self.directory / f"{quote(room, safe='')}.json"
        if path is not None:
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(self.documents[room]))
            temporary.replace(path)  # whole or not at all

    # --- reading ----------------------------------------------------------------------------------

    async def read_raw(self, room: str, start: int = 1, end: int | None = None) -> list[tuple[int, bytes]]:
        stored = self.documents.get(room, {}).get("envelopes", [])
        last = len(stored) if end is None else min(end, len(stored))
        return [(v, _unb64(stored[v - 1])) for v in range(max(start, 1), last + 1)]

    async def read(self, room: str, start: int = 1, end: int | None = None) -> list[Envelope]:
        return [codec.decode_envelope(data, room, version) for version, data in await self.read_raw(room, start, end)]

    async def latest_version(self, room: str) -> int:
        return len(self.documents.get(room, {}).get("envelopes", []))

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        return [(int(v), _unb64(c)) for v, c in self.documents.get(room, {}).get("commands", [])]

    async def rejections(self, room: str) -> list[bytes]:
        return [_unb64(r["record"]) for r in self.documents.get(room, {}).get("rejections", [])]

    async def rooms(self) -> list[str]:
        return sorted(room for room, document in self.documents.items() if document["envelopes"])

    async def load_seed(self, room: str) -> bytes | None:
        seed = self.documents.get(room, {}).get("seed")
        return bytes.fromhex(seed) if seed else None

    async def load_origin(self, room: str) -> bytes | None:
        origin = self.documents.get(room, {}).get("origin")
        return json.dumps(origin).encode() if origin else None

    async def save_origin(self, room: str, origin: bytes) -> bool:
        async with self._lock:
            document = self._writable(room)
            if document.get("origin"):
                return False
            document["origin"] = json.loads(origin)
            self._persist(room)
            return True

    async def load_commit_scheme(self, room: str) -> str | None:
        return self.documents.get(room, {}).get("commit_scheme")

    async def save_commit_scheme(self, room: str, scheme: str) -> bool:
        async with self._lock:
            document = self._writable(room)
            if document.get("commit_scheme"):
                return False
            document["commit_scheme"] = scheme
            self._persist(room)
            return True

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        # ``export`` never writes them: an ended room's nonces are in its room.ended, a live room's stay secret.
        return {c: bytes.fromhex(n) for c, n in self.documents.get(room, {}).get("nonces", {}).items()}

    async def outcome(self, room: str, command_id: str) -> StoredOutcome | None:
        document = self.documents.get(room)
        if document is None:
            return None
        for rejection in document["rejections"]:
            if _command_id(rejection.get("command_id"), rejection["record"]) == command_id:
                return StoredOutcome(room=room, error=rejection.get("error") or {}, record=_unb64(rejection["record"]))
        known = document.get("outcomes", {}).get(command_id)
        if known is not None:
            return StoredOutcome(room=room, first_version=known[0], last_version=known[1])
        spans = document["commands"]
        for index, (first, record) in enumerate(spans):
            if _command_id(None, record) == command_id:
                last = int(spans[index + 1][0]) - 1 if index + 1 < len(spans) else len(document["envelopes"])
                return StoredOutcome(room=room, first_version=int(first), last_version=last)
        return None

    async def outcomes_many(self, pairs: list[tuple[str, str]]) -> list[StoredOutcome | None]:
        return [await self.outcome(room, command_id) for room, command_id in pairs]

    async def latest_snapshot(self, room: str, at_most: int | None = None) -> tuple[int, bytes] | None:
        snapshots = self.documents.get(room, {}).get("snapshots", {})
        versions = [int(v) for v in snapshots if at_most is None or int(v) <= at_most]
        if not versions:
            return None
        return max(versions), _unb64(snapshots[str(max(versions))])

    async def snapshot_and_tail(self, room: str, at_most: int | None = None
                                ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        return await snapshot_then_tail(self, room, at_most)

    # --- writing ----------------------------------------------------------------------------------

    async def append(self, room: str, expected_version: int, command_id: str, envelopes: list[Envelope],
                     command_record: bytes = b"") -> AppendResult:
        async with self._lock:
            known = await self.outcome(room, command_id)
            if known is not None:
                return AppendResult(outcome=known, duplicate=True)
            document = self._writable(room)
            current = len(document["envelopes"])
            if current != expected_version:
                raise VersionConflict(room, expected_version, current)
            if not document["ruleset"] and envelopes:
                document["ruleset"] = envelopes[0].ruleset
            document["envelopes"].extend(_b64(codec.encode_envelope(e)) for e in envelopes)
            first, last = expected_version + 1, expected_version + len(envelopes)
            if command_record:
                document["commands"].append([first, _b64(command_record)])
            document.setdefault("outcomes", {})[command_id] = [first, last]
            self._persist(room)
            return AppendResult(outcome=StoredOutcome(room=room, first_version=first, last_version=last))

    async def record_rejection(self, room: str, command_id: str, error: dict, record: bytes,
                               kept: bool = True) -> AppendResult:
        async with self._lock:
            known = await self.outcome(room, command_id)
            if known is not None:
                return AppendResult(outcome=known, duplicate=True)
            if not kept:  # an export keeps what its room's log holds
                return AppendResult(outcome=StoredOutcome(room=room, error=error, record=record))
            self._writable(room)["rejections"].append({"record": _b64(record), "error": error, "command_id": command_id})
            self._persist(room)
            return AppendResult(outcome=StoredOutcome(room=room, error=error, record=record))

    async def save_snapshot(self, room: str, version: int, data: bytes) -> None:
        async with self._lock:
            self._writable(room).setdefault("snapshots", {})[str(version)] = _b64(data)
            self._persist(room)

    async def save_seed(self, room: str, seed: bytes) -> bool:
        async with self._lock:
            document = self._writable(room)
            if document["seed"]:
                return False
            document["seed"] = seed.hex()
            self._persist(room)
            return True

    async def save_nonce(self, room: str, nonce: bytes, beside_idle: bool = True) -> str:
        commitment = nonce_commitment(nonce)
        async with self._lock:
            self._writable(room).setdefault("nonces", {})[commitment] = nonce.hex()
            self._persist(room)
        return commitment


async def export_document(store: Any, room: str, exported_at_ms: int) -> dict[str, Any]:
    """A room of any store as a readable export document (format_version 2), the stored bytes exactly."""
    return readable_document(await compact_export(store, room, exported_at_ms))


async def compact_export(store: Any, room: str, exported_at_ms: int) -> dict[str, Any]:
    """A room of any store as a compact document (format_version 1): the stored bytes, the seed once revealed."""
    envelopes = await store.read(room)
    rejections = []
    for data in await store.rejections(room):
        outcome = await store.outcome(room, decode_record(data).command_id)
        rejections.append({"record": _b64(data), "error": outcome.error if outcome else None})
    ended = room_end(envelopes)
    document = new_document(room, envelopes[0].ruleset if envelopes else "", exported_at_ms)
    # Only a revealed seed leaves the server: a live room's secret stays secret.
    document["seed"] = ended.revealed_seed if ended is not None else None
    document["envelopes"] = [_b64(data) for _, data in await store.read_raw(room)]
    document["commands"] = [[version, _b64(data)] for version, data in await store.commands(room)]
    document["rejections"] = rejections
    load_origin = getattr(store, "load_origin", None)
    origin = await load_origin(room) if load_origin is not None else None
    if origin:
        document["origin"] = json.loads(origin)
    load_scheme = getattr(store, "load_commit_scheme", None)
    scheme = await load_scheme(room) if load_scheme is not None else None
    if scheme:  # none recorded: the room is v1 and the file says nothing, as files written before the field
        document["commit_scheme"] = scheme
    return document


async def import_room(exported: ExportFileStore, target: Any, room: str, as_room: str | None = None) -> int:
    """Copy one room of an export into ``target`` command by command (as the engine appended it); events copied.

    ``as_room``: load it as a copy under that id (``events.copies``: relabelled, re-sealed), recording its
    origin {room, version, hash} (the exported head; a copy of a copy names the first room) so that
    ``verify`` can prove the copy is the origin's history.

    The room keeps the commitment scheme the file records (none: ``almanac-commit-v1``), a copy too: like the seed
    and the nonces it is part of how the origin's history was committed, and the copy re-seals that history (its
    heads differ from the origin's all the same, its room key being derived from its own id).
    """
    envelopes = await exported.read(room)
    spans = await exported.commands(room)
    name = room if as_room is None else as_room
    mark_unranked = getattr(target, "mark_unranked", None)
    if mark_unranked is not None:
        # Before its events: the projector may rank it the moment they land. Its history was played elsewhere
        # (or forged): an imported room or a copy never enters a leaderboard.
        await mark_unranked(name)
    scheme, save_scheme = await exported.load_commit_scheme(room), getattr(target, "save_commit_scheme", None)
    if scheme and save_scheme is not None:
        # Before its events too: a gateway computing a head of the room the moment they land must see the scheme.
        await save_scheme(name, scheme)
    relabel = (lambda data: data) if as_room is None else (lambda data: relabel_record(data, as_room))
    if as_room is not None:
        inherited = await exported.load_origin(room)
        origin = inherited or json.dumps({"room": room, "version": len(envelopes),
                                          "hash": envelopes[-1].hash if envelopes else GENESIS_HASH}).encode()
        envelopes = relabel_envelopes(envelopes, as_room)
    for index, (first_version, record_bytes) in enumerate(spans):
        last_version = spans[index + 1][0] - 1 if index + 1 < len(spans) else len(envelopes)
        record = decode_record(record_bytes)
        await target.append(name, first_version - 1, record.command_id, envelopes[first_version - 1:last_version],
                            relabel(record_bytes))
    for rejection in exported.document(room)["rejections"]:
        record_bytes = _unb64(rejection["record"])
        await target.record_rejection(name, decode_record(record_bytes).command_id, rejection.get("error") or {},
                                      relabel(record_bytes))
    seed = await exported.load_seed(room)
    if seed is not None:
        await target.save_seed(name, seed)
    for nonce in (await exported.load_nonces(room)).values():  # a file that carries a live room's nonces
        await target.save_nonce(name, nonce)
    if as_room is not None:
        await target.save_origin(as_room, origin)
    return len(envelopes)
