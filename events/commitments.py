"""The commitment chain and checkpoints (docs/bundle-format.md): hiding per-event commitments, their head, and
the Ed25519-signed checkpoint message. Pure: the secrets and keys are passed in.

Two schemes, chosen per room when it is created (a room keeps its scheme for life, so checkpoints already
issued stay valid): ``almanac-commit-v1`` commits to each event whole; ``almanac-commit-v2`` commits to each
audience's view of it (the whole event, the public part, each seat's view) under its own salt, so that a
player can be shown their own view and the public part of every event, opened, and the rest only as hashes."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from almanac.events.envelope import Envelope
from almanac.events.hashing import canonical_bytes
from almanac.events.shown import PUBLIC, Shown

SCHEME = "almanac-commit-v1"
SCHEME_V2 = "almanac-commit-v2"
SCHEMES = (SCHEME, SCHEME_V2)
FULL = "*"  # the audience label of the whole event (body_v): opened to auditors only
_SALT_V2 = b"almanac/salt/v2\0"
_LEAF_V2 = b"almanac/leaf/v2\0"
_EVENT_V2 = b"almanac/event/v2\0"
_HEAD_V2 = b"almanac/head/v2\0"
HEAD_0 = bytes(32)
_ROOM_KEY = b"almanac/room-key/v1\0"
_SALT = b"almanac/salt/v1\0"
_EVENT = b"almanac/event/v1\0"
_HEAD = b"almanac/head/v1\0"
_CHECKPOINT = b"almanac/checkpoint/v1\0"
CHECKPOINT_FIELDS = ("room", "version", "head", "kid", "sig")
_HEX = re.compile(r"[0-9a-f]*")


def event_body(envelope: Envelope) -> bytes:
    """``body_v``: the bytes both chains cover (every field but the two hashes), canonical msgpack."""
    return canonical_bytes((envelope.room, envelope.version, envelope.ruleset, envelope.type, envelope.payload,
                            envelope.command_id, envelope.player, envelope.server_time_ms))


def room_key(commit_secret: bytes, room: str) -> bytes:
    return hmac.new(commit_secret, _ROOM_KEY + room.encode(), hashlib.sha256).digest()


def salt(key: bytes, version: int) -> bytes:
    return hmac.new(key, _SALT + version.to_bytes(8, "big"), hashlib.sha256).digest()


def commitment(salt_v: bytes, body: bytes) -> bytes:
    return hashlib.sha256(_EVENT + salt_v + body).digest()


def next_head(head: bytes, commitment_v: bytes, scheme: str = SCHEME) -> bytes:
    return hashlib.sha256((_HEAD if scheme == SCHEME else _HEAD_V2) + head + commitment_v).digest()


# --- almanac-commit-v2: a commitment per audience (docs/bundle-format.md section 6) ----------------------------


def _label(label: str) -> bytes:
    encoded = label.encode()
    return len(encoded).to_bytes(2, "big") + encoded


@functools.lru_cache(maxsize=4096)
def _labelled(label: str) -> bytes:
    """``_label(label)`` made once per label: every event's leaves and root name the same few (``FULL``, ``PUBLIC``
    and the seats)."""
    return _label(label)


def view_bytes(envelope: Envelope, form: Mapping[str, Any]) -> bytes:
    """The bytes of one audience's view of an event: the form that reader is sent (``events.shown.shown_form``:
    the same dict, so the committed view is by construction what they received), bound to the room and its rules.

    A hidden form (``{"version", "hidden"}``: the reader learns only that version ``v`` exists) commits to
    ``[room, version]``; else to ``[room, version, ruleset, type, player, server_time_ms, event]``."""
    if form.get("hidden") is True:
        return canonical_bytes([envelope.room, form["version"]])
    return canonical_bytes([envelope.room, form["version"], envelope.ruleset, form["type"], form["player"],
                            form["server_time_ms"], form["event"]])


def views(envelope: Envelope, event: Any = None, shown: Shown | None = None) -> dict[str, bytes]:
    """Every audience's view of an event, by label: ``FULL`` (``body_v``), ``PUBLIC`` (the event as a reader with
    no seat is sent it) and each seat whose view differs from the public one. The seats considered are the event's
    player and every player the rule-set's declared secrets show a field of this event to (``Secret.seen_by``): the
    same declaration ``redact`` applies, so who gets a leaf follows from public fields.

    ``shown``: the event's ``events.shown.Shown`` the caller holds already (the gateway's answer made the player's
    form from it: nothing is decoded or redacted again); else one is made from ``event`` (decoded already, when the
    caller has it) or the envelope. Each distinct redaction's form is encoded once (a seat that sees the event as
    everyone does is not encoded again)."""
    if shown is None:
        shown = Shown(envelope, event)
    encoded: dict[int, bytes] = {}  # id(the kept form) -> its view bytes (the forms are held by ``shown``)

    def view(reader: str) -> bytes:
        form = shown.kept_form(reader)
        known = encoded.get(id(form))
        if known is None:
            known = encoded[id(form)] = view_bytes(envelope, form)
        return known

    public = view(PUBLIC)
    result = {FULL: event_body(envelope), PUBLIC: public}
    seats = {envelope.player} if envelope.player else set()
    for secret in shown.decider.secrets.get(type(shown.event), ()):
        seats.update(secret.seen_by(shown.event))
    for seat in sorted(seats - {PUBLIC, FULL}):
        seen = view(seat)
        if seen != public:
            result[seat] = seen
    return result


def leaf_salt(key: bytes, version: int, label: str) -> bytes:
    keyed = _keyed(key).copy()
    keyed.update(_SALT_V2 + version.to_bytes(8, "big") + label.encode())
    return keyed.digest()


@functools.lru_cache(maxsize=4096)
def _keyed(key: bytes) -> hmac.HMAC:
    """HMAC-SHA256 keyed with ``key``, nothing fed yet: copied per salt, the key's pads are hashed once per room
    and not once per leaf (about half a salt's cost). A copy gives what ``hmac.new(key, message)`` gives."""
    return hmac.new(key, digestmod=hashlib.sha256)


def leaf(label: str, salt_v: bytes, view: bytes) -> bytes:
    return hashlib.sha256(_LEAF_V2 + _labelled(label) + salt_v + view).digest()


def root(leaves: Mapping[str, bytes]) -> bytes:
    """``c_v`` of scheme v2: every audience's leaf, in the byte order of their labels, each named."""
    ordered = sorted(leaves, key=str.encode)
    return hashlib.sha256(_EVENT_V2 + len(ordered).to_bytes(2, "big")
                          + b"".join([_labelled(label) + leaves[label] for label in ordered])).digest()


def leaves_of(key: bytes, envelope: Envelope, event: Any = None, shown: Shown | None = None) -> dict[str, bytes]:
    """Every audience's leaf of an event (``views``' arguments); each salt is ``leaf_salt``'s, the HMAC fed the
    shared prefix once."""
    versioned = _keyed(key).copy()
    versioned.update(_SALT_V2 + envelope.version.to_bytes(8, "big"))
    result = {}
    for label, view in views(envelope, event, shown).items():
        salted = versioned.copy()
        salted.update(label.encode())
        result[label] = leaf(label, salted.digest(), view)
    return result


def event_commitment(key: bytes, envelope: Envelope, scheme: str = SCHEME, shown: Shown | None = None) -> bytes:
    """``c_v`` of ``envelope`` under ``scheme`` (``shown``: its ``events.shown.Shown``, when the caller holds one)."""
    if scheme == SCHEME_V2:
        return root(leaves_of(key, envelope, shown=shown))
    return commitment(salt(key, envelope.version), event_body(envelope))


def advance_head(key: bytes, head: bytes, envelopes: Iterable[Envelope], scheme: str = SCHEME) -> bytes:
    """The head after ``envelopes`` (consecutive, following ``head``) of the room whose key is ``key``."""
    for envelope in envelopes:
        head = next_head(head, event_commitment(key, envelope, scheme), scheme)
    return head


def heads(key: bytes, envelopes: Iterable[Envelope], scheme: str = SCHEME) -> list[bytes]:
    """``head_1 .. head_N`` of a room's envelopes from version 1."""
    return list(each_head(key, envelopes, scheme))


def each_head(key: bytes, envelopes: Iterable[Envelope], scheme: str = SCHEME) -> Iterator[bytes]:
    """``head_1 .. head_N`` one at a time (a caller that pauses between versions: a heavy read)."""
    head = HEAD_0
    for envelope in envelopes:
        head = next_head(head, event_commitment(key, envelope, scheme), scheme)
        yield head


def checkpoint_message(room: str, version: int, head: bytes) -> bytes:
    encoded = room.encode()
    return _CHECKPOINT + len(encoded).to_bytes(2, "big") + encoded + version.to_bytes(8, "big") + head


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:16]


def _is_hex(value: Any, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and _HEX.fullmatch(value) is not None


def _fields_problem(value: Any, fields: tuple[str, ...], kind: str) -> str | None:
    """Why ``value`` is not an object of exactly ``fields`` (None when it is): the first thing each format checks."""
    if not isinstance(value, Mapping):
        return f"{kind} is an object"
    unknown = sorted(set(value) - set(fields))
    if unknown:
        return f"unknown fields {unknown[:5]}"
    missing = [name for name in fields if name not in value]
    if missing:
        return f"missing {missing}"
    return None


def checkpoint_problem(checkpoint: Any) -> str | None:
    """Why ``checkpoint`` is not a well-formed checkpoint (None when it is)."""
    problem = _fields_problem(checkpoint, CHECKPOINT_FIELDS, "a checkpoint")
    if problem is not None:
        return problem
    room, version = checkpoint["room"], checkpoint["version"]
    if not isinstance(room, str) or not 0 < len(room.encode()) < 65_536:
        return "room is not a room id"
    if type(version) is not int or not 1 <= version < 2**63:
        return "version is not a positive integer"
    for name, length in (("head", 64), ("kid", 16), ("sig", 128)):
        if not _is_hex(checkpoint[name], length):
            return f"{name} is not {length} lowercase hex characters"
    return None


def key_set_problem(document: Any) -> str | None:
    """Why ``document`` is not a key set (docs/bundle-format.md section 3)."""
    if not isinstance(document, Mapping) or document.get("format") != "almanac-keys":
        return "not an almanac-keys document"
    if document.get("format_version") != 1:
        return f"key set format_version {document.get('format_version')!r} is not 1"
    keys = document.get("keys")
    if not isinstance(keys, list) or not keys:
        return "the key set has no keys"
    for entry in keys:
        if not isinstance(entry, Mapping) or entry.get("alg") != "Ed25519" or not _is_hex(entry.get("public_key"), 64):
            return "a key is not {kid, alg: Ed25519, public_key: 64 hex}"
        if entry.get("kid") != key_id(bytes.fromhex(entry["public_key"])):
            return f"key {entry.get('kid')!r} is not the id of its public key"
    return None


def trusted_keys(document: Mapping) -> dict[str, bytes]:
    """kid -> raw public key of a well-formed key set (active and retired keys both verify)."""
    return {entry["kid"]: bytes.fromhex(entry["public_key"]) for entry in document["keys"]}


def signature_valid(public_key: bytes, checkpoint: Mapping) -> bool:
    """Whether ``checkpoint`` (well-formed) is signed by ``public_key``."""
    message = checkpoint_message(checkpoint["room"], checkpoint["version"], bytes.fromhex(checkpoint["head"]))
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(bytes.fromhex(checkpoint["sig"]), message)
    except (InvalidSignature, ValueError):
        return False
    return True


# --- refusal receipts (docs/bundle-format.md section 8) ---------------------------------------------------------

_REFUSAL = b"almanac/refusal/v1\0"
RECEIPT_FIELDS = ("room", "version", "head", "player", "command_id", "code", "raw", "kid", "sig")
# Bounds of a receipt's strings (the message length-prefixes each in two bytes): a code as the rules name one, and
# the stored record (base64) of a command the gateway's body limit already bounds.
MAX_CODE = 100
MAX_RAW = 100_000
_CODE = re.compile(r"[a-z0-9_.]{1,100}")


def _prefixed(text: str) -> bytes:
    encoded = text.encode()
    return len(encoded).to_bytes(2, "big") + encoded


def refusal_message(room: str, version: int, head: bytes, player: str, command_id: str, record: bytes,
                    code: str) -> bytes:
    """What a refusal receipt signs: the room at the version its command was refused at (the commitment head a
    checkpoint at that version signs), who sent which command (the SHA-256 of its stored refusal record) and the
    code it was refused with."""
    return (_REFUSAL + _prefixed(room) + version.to_bytes(8, "big") + head + _prefixed(player)
            + _prefixed(command_id) + hashlib.sha256(record).digest() + _prefixed(code))


def receipt_code(code: Any) -> bool:
    """Whether ``code`` is a refusal code a receipt can carry (the rules' codes: lowercase, digits, ``_`` and ``.``)."""
    return isinstance(code, str) and _CODE.fullmatch(code) is not None


def receipt_problem(receipt: Any) -> str | None:
    """Why ``receipt`` is not a well-formed refusal receipt (None when it is); its record is not decoded here."""
    problem = _fields_problem(receipt, RECEIPT_FIELDS, "a receipt")
    if problem is not None:
        return problem
    for name in ("room", "player", "command_id"):
        value = receipt[name]
        if not isinstance(value, str) or not 0 < len(value.encode()) < 65_536:
            return f"{name} is not a name"
    if not receipt_code(receipt["code"]):
        return f"code is not a refusal code (1..{MAX_CODE} of a-z 0-9 _ .)"
    if type(receipt["version"]) is not int or not 1 <= receipt["version"] < 2**63:
        return "version is not a positive integer"
    raw = receipt["raw"]
    if not isinstance(raw, str) or not 0 < len(raw) <= MAX_RAW:
        return f"raw is not 1..{MAX_RAW} characters of base64"
    try:
        base64.b64decode(raw, validate=True)
    except ValueError:
        return "raw is not base64"
    for name, length in (("head", 64), ("kid", 16), ("sig", 128)):
        if not _is_hex(receipt[name], length):
            return f"{name} is not {length} lowercase hex characters"
    return None


def receipt_signature_valid(public_key: bytes, receipt: Mapping) -> bool:
    """Whether ``receipt`` (well-formed) is signed by ``public_key``."""
    message = refusal_message(receipt["room"], receipt["version"], bytes.fromhex(receipt["head"]), receipt["player"],
                              receipt["command_id"], base64.b64decode(receipt["raw"]), receipt["code"])
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(bytes.fromhex(receipt["sig"]), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def receipt_label(receipt: Any) -> str:
    if isinstance(receipt, Mapping):
        return (f"refusal receipt {receipt.get('room')}@{receipt.get('version')} command "
                f"{str(receipt.get('command_id'))[:120]!r} kid {receipt.get('kid')}")
    return repr(receipt)[:60]


def checkpoint_label(checkpoint: Any) -> str:
    if isinstance(checkpoint, Mapping):
        return f"{checkpoint.get('room')}@{checkpoint.get('version')} kid {checkpoint.get('kid')}"
    return repr(checkpoint)[:60]


def read_checkpoint_file(document: Any) -> tuple[list[Any], Mapping | None]:
    """The checkpoints and the key set (if any) of a checkpoint file (or a bare list of checkpoints)."""
    if isinstance(document, list):
        return document, None
    if isinstance(document, Mapping) and document.get("format") == "almanac-checkpoints":
        checkpoints = document.get("checkpoints")
        keys = document.get("keys")
        return (checkpoints if isinstance(checkpoints, list) else [checkpoints]), keys
    raise ValueError("not a checkpoint file (an almanac-checkpoints document or a JSON list of checkpoints)")


def read_receipt_file(document: Any) -> tuple[list[Any], Mapping | None]:
    """The refusal receipts and the key set (if any) of a receipt file (section 8.2), a bare list of receipts, or
    one receipt (a refusal answer's ``receipt`` as saved)."""
    if isinstance(document, list):
        return document, None
    if isinstance(document, Mapping) and document.get("format") == "almanac-receipts":
        receipts = document.get("receipts")
        return (receipts if isinstance(receipts, list) else [receipts]), document.get("keys")
    if isinstance(document, Mapping) and "raw" in document and "sig" in document:
        return [document], None
    raise ValueError("not a receipt file (an almanac-receipts document, a JSON list of refusal receipts or one)")
