"""Signed checkpoints (docs/bundle-format.md): the deployment's Ed25519 keys and commitment secret, the key set
document, and each room's commitment head kept up to date in memory so that signing an answer costs one
HMAC and two SHA-256 per new event plus one Ed25519 signature."""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from nacl.bindings import crypto_sign_seed_keypair
from nacl.signing import SigningKey

from almanac.events import commitments as cm
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError, RuleError
from almanac.events.shown import Shown
from almanac.events.step import CommandRecord, decode_record
from almanac.services.data_secrets import file_secret
from almanac.services.forensics.pauses import pause_now_and_then

SIGNING_KEY_FILE = "signing-key"  # hex Ed25519 seed, mode 0600, in the data directory
COMMIT_SECRET_FILE = "commit-secret"  # hex 32 bytes, mode 0600
NEW_ROOM_SCHEME = cm.SCHEME_V2  # the commitment scheme rooms created from now on get (recorded per room)
RECENT_HEADS = 64  # heads kept per room (an answer may name a version a few commands back)
# Besides them, the head of every ANCHOR_EVERY-th version, at most MAX_ANCHORS per room (the oldest dropped): an
# answer about an older version (a page of events, time travel) then hashes at most ANCHOR_EVERY events rather
# than the room from version 1, each event's views redacted again (0.6 s per answer in a 400-event room).
# An anchor costs about 120 B of memory (its dict entry, int and 32-byte head): a 150-event room keeps 2, a room of
# 4,096 versions or more the full 64 (7.7 KB, as much as its RECENT_HEADS), bounded by MAX_ROOMS like the heads.
ANCHOR_EVERY = 64
MAX_ANCHORS = 64
# The first answer about a long room in a process hashes it from version 1 (or from its last anchor): ~15 us an event
# for a scheme-v2 claim room, 0.3 s for 20,000 versions in one go, which held every other client of the gateway's loop
# as long. Past HEAD_SLICE versions it reads that many at a time and gives the loop back every HEAD_PAUSE_EVERY
# events (~0.5 ms of hashing), and one answer at a time hashes a room (the others wait for its heads, then start
# from them): another client's GET beside it answers in its usual time (tests/gateway/test_gateway_heavy_reads.py).
HEAD_SLICE = 512
HEAD_PAUSE_EVERY = 32
MAX_ROOMS = 20_000  # rooms whose heads are kept (least recently used dropped; they are derivable again)
# Signed checkpoints kept, by (room, version), least recently used dropped: every answer and feed message naming
# a version signs it once (spectator feeds delayed alike, a live answer and the feeds behind it, all reuse it).
SIGNED_KEPT = 8_192


def _hex32(text: str, what: str) -> bytes:
    try:
        value = bytes.fromhex(text.strip())
    except ValueError:
        value = b""
    if len(value) != 32:
        raise ValueError(f"{what} must be 64 hex characters (32 bytes)")
    return value


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


class KeyRing:
    """The active signing key, the retired ones still published, and the key set document."""

    def __init__(self, seeds: list[bytes], retired_public: Iterable[bytes] = ()) -> None:
        if not seeds:
            raise ValueError("a key ring needs at least one signing key")
        self.keys = [Ed25519PrivateKey.from_private_bytes(seed) for seed in seeds]
        self.active = self.keys[0]
        # The active key as libsodium's: a signature per answer is the gateway's largest cost of its own, and
        # libsodium makes the very same signature (Ed25519 is deterministic) in about two thirds of OpenSSL's time.
        self._signing = SigningKey(seeds[0])
        if crypto_sign_seed_keypair(seeds[0])[0] != public_bytes(self.active.public_key()):
            raise ValueError("the signing key's public key differs between libsodium and OpenSSL")
        publics = [public_bytes(key.public_key()) for key in self.keys] + list(retired_public)
        self.kid = cm.key_id(publics[0])
        seen: dict[str, bytes] = {}
        for public in publics:
            seen.setdefault(cm.key_id(public), public)
        self.document = {
            "format": "almanac-keys", "format_version": 1, "active": self.kid,
            "keys": [{"kid": kid, "alg": "Ed25519", "public_key": public.hex(),
                      "status": "active" if kid == self.kid else "retired"} for kid, public in seen.items()],
        }

    def sign(self, room: str, version: int, head: bytes) -> dict[str, Any]:
        sig = self._signing.sign(cm.checkpoint_message(room, version, head)).signature
        return {"room": room, "version": version, "head": head.hex(), "kid": self.kid, "sig": sig.hex()}

    def sign_refusal(self, room: str, version: int, head: bytes, record: CommandRecord, raw: bytes,
                     code: str) -> dict[str, Any]:
        """A refusal receipt (docs/bundle-format.md section 8): ``record`` refused at ``version`` with ``code``, its
        stored bytes ``raw``, the room's commitment head at that version ``head``."""
        sig = self._signing.sign(cm.refusal_message(room, version, head, record.player, record.command_id, raw,
                                                    code)).signature
        return {"room": room, "version": version, "head": head.hex(), "player": record.player,
                "command_id": record.command_id, "code": code, "raw": base64.b64encode(raw).decode(),
                "kid": self.kid, "sig": sig.hex()}


def key_ring(settings: Any) -> KeyRing:
    """The deployment's keys from settings (ALMANAC_SIGNING_KEYS, ALMANAC_RETIRED_PUBLIC_KEYS), else the one
    generated into the data directory."""
    configured = [part for part in settings.signing_keys.split(",") if part.strip()]
    seeds = [_hex32(part, "ALMANAC_SIGNING_KEYS entries") for part in configured] or \
        [_hex32(file_secret(settings.data_dir, SIGNING_KEY_FILE, "ALMANAC_SIGNING_KEYS"), SIGNING_KEY_FILE)]
    retired = [_hex32(part, "ALMANAC_RETIRED_PUBLIC_KEYS entries")
               for part in settings.retired_public_keys.split(",") if part.strip()]
    return KeyRing(seeds, retired)


def commit_secret(settings: Any) -> bytes:
    return _hex32(settings.commit_secret or file_secret(settings.data_dir, COMMIT_SECRET_FILE, "ALMANAC_COMMIT_SECRET"), "ALMANAC_COMMIT_SECRET")


class Checkpointer:
    """Signs checkpoints; keeps each room's recent commitment heads (derivable: dropped ones are recomputed
    from the stored envelopes)."""

    def __init__(self, ring: KeyRing, secret: bytes, max_rooms: int = MAX_ROOMS) -> None:
        self.ring = ring
        self.secret = secret
        self.max_rooms = max_rooms
        self._heads: OrderedDict[str, dict[int, bytes]] = OrderedDict()
        self._anchors: dict[str, dict[int, bytes]] = {}  # see ANCHOR_EVERY; a room's go with its heads
        self._keys: dict[str, bytes] = {}
        self._signed: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()  # see SIGNED_KEPT
        self.signatures = 0  # Ed25519 signatures made by ``checkpoint`` (each (room, version) once while kept)
        self._schemes: dict[str, str] = {}
        self._hashing: dict[str, asyncio.Event] = {}  # rooms whose long hash runs (set when it ends): see ``head``

    @classmethod
    def from_settings(cls, settings: Any) -> Checkpointer:
        return cls(key_ring(settings), commit_secret(settings))

    def room_key(self, room: str) -> bytes:
        key = self._keys.get(room)
        if key is None:
            if len(self._keys) >= self.max_rooms:
                self._keys.clear()
            key = self._keys[room] = cm.room_key(self.secret, room)
        return key

    async def scheme(self, store: Any, room: str) -> str:
        """The commitment scheme ``room`` was created with (recorded by the engine at creation, see
        ``record_scheme``); a room with no record predates scheme v2 and keeps ``almanac-commit-v1``."""
        known = self._schemes.get(room)
        if known is None:
            load = getattr(store, "load_commit_scheme", None)
            known = (await load(room) if load is not None else None) or cm.SCHEME
            if known not in cm.SCHEMES:
                raise LookupError(f"room {room!r} records an unknown commitment scheme {known!r}")
            if len(self._schemes) >= self.max_rooms:
                self._schemes.clear()
            self._schemes[room] = known
        return known

    def _remember(self, room: str, version: int, head: bytes) -> None:
        recent = self._heads.get(room)
        if recent is None:
            recent = self._heads[room] = {}
            if len(self._heads) > self.max_rooms:
                self._anchors.pop(self._heads.popitem(last=False)[0], None)
        else:
            self._heads.move_to_end(room)
        recent[version] = head
        if len(recent) > RECENT_HEADS:
            del recent[min(recent)]
        if version % ANCHOR_EVERY == 0:
            anchors = self._anchors.setdefault(room, {})
            anchors[version] = head
            if len(anchors) > MAX_ANCHORS:
                del anchors[min(anchors)]

    async def head(self, store: Any, room: str, version: int, envelopes: Iterable[Envelope] = (),
                   since: tuple[int, bytes] | None = None, shown: Mapping[int, Shown] | None = None) -> bytes:
        """``head_version`` of ``room``: from memory, advanced with ``envelopes`` (those the caller already has),
        reading from ``store`` only the versions neither covers. ``since`` (a version and its head the caller
        holds, e.g. a feed's previous checkpoint) is a start point besides the kept ones: a delayed or catching-up
        feed runs behind the last RECENT_HEADS versions, and would otherwise hash the room from version 1 for each
        message it sends. ``shown``: the caller's ``events.shown.Shown`` of some of those envelopes, by version (the
        gateway's answer made its events from them): a v2 room's views reuse their decoded event and redactions."""
        recent = self._heads.get(room, {})
        if version in recent:
            return recent[version]
        anchors = self._anchors.get(room, {})
        if version in anchors:
            return anchors[version]
        if version - 1 in recent:
            # The latest start there can be (every other is below it): an answer's command follows the version the
            # last one signed, so the kept heads (up to RECENT_HEADS, and the anchors) are not all looked through.
            start, head = version - 1, recent[version - 1]
        else:
            starts = [(v, h) for v, h in recent.items() if v < version]
            starts += [(v, h) for v, h in anchors.items() if v < version]
            if since is not None and since[0] < version:
                starts.append(since)
            start, head = max(starts, default=(0, cm.HEAD_0))
        if version - start > HEAD_SLICE:  # a long hash (a room this process has not answered about since it started)
            busy = self._hashing.get(room)
            if busy is not None:  # another answer is hashing this room: its heads (anchors) are this one's start
                await busy.wait()
                return await self.head(store, room, version, envelopes, since, shown)
            self._hashing[room] = done = asyncio.Event()
            try:
                return await self._long_head(store, room, start, head, version, envelopes, shown)
            finally:
                del self._hashing[room]
                done.set()
        have = {envelope.version: envelope for envelope in envelopes}
        wanted = range(start + 1, version + 1)
        if all(v in have for v in wanted):
            chain = [have[v] for v in wanted]
        else:  # a version this process has not seen (another gateway's command, a restart): the stream has it
            chain = await store.read(room, start + 1, version)
            if len(chain) != version - start:
                raise LookupError(f"room {room!r} has no version {version}")
        key, scheme = self.room_key(room), await self.scheme(store, room)
        for envelope in chain:
            head = self._next(key, scheme, room, head, envelope, shown)
        return head

    def _next(self, key: bytes, scheme: str, room: str, head: bytes, envelope: Envelope,
              shown: Mapping[int, Shown] | None) -> bytes:
        """The head after ``envelope`` (kept: see ``_remember``)."""
        try:
            commitment = cm.event_commitment(key, envelope, scheme, shown.get(envelope.version) if shown else None)
        except (RuleError, CorruptEventError) as error:  # v2 reads the event: rules missing here, or corrupt
            raise LookupError(f"room {room!r} version {envelope.version}: its views cannot be committed to "
                              f"here ({error})") from None
        head = cm.next_head(head, commitment, scheme)
        self._remember(room, envelope.version, head)
        return head

    async def _long_head(self, store: Any, room: str, start: int, head: bytes, version: int,
                         envelopes: Iterable[Envelope], shown: Mapping[int, Shown] | None) -> bytes:
        """The head of ``version`` from ``start``'s ``head``, more than HEAD_SLICE versions on: the versions in between
        from ``envelopes``, else read from ``store`` a slice at a time, the loop given back every HEAD_PAUSE_EVERY
        events (see there)."""
        key, scheme = self.room_key(room), await self.scheme(store, room)
        have = {envelope.version: envelope for envelope in envelopes}
        for first in range(start + 1, version + 1, HEAD_SLICE):
            last = min(first + HEAD_SLICE - 1, version)
            if all(v in have for v in range(first, last + 1)):
                chain = [have[v] for v in range(first, last + 1)]
            else:
                chain = await store.read(room, first, last)
                if len(chain) != last - first + 1:
                    raise LookupError(f"room {room!r} has no version {version}")
            for index, envelope in enumerate(chain):
                head = self._next(key, scheme, room, head, envelope, shown)
                await pause_now_and_then(index, HEAD_PAUSE_EVERY)
        return head

    async def checkpoint(self, store: Any, room: str, version: int, envelopes: Iterable[Envelope] = (),
                         since: dict[str, Any] | None = None,
                         shown: Mapping[int, Shown] | None = None) -> dict[str, Any] | None:
        """The signed checkpoint of ``room`` at ``version`` (None for a room with no events); ``since``: an earlier
        checkpoint of the room the caller holds, a start point for the head; ``shown``: see ``head``."""
        if version < 1:
            return None
        signed = self._signed.get((room, version))
        if signed is not None:
            self._signed.move_to_end((room, version))
            return signed
        start = (since["version"], bytes.fromhex(since["head"])) if since is not None else None
        head = await self.head(store, room, version, envelopes, start, shown)
        signed = self.ring.sign(room, version, head)
        self.signatures += 1
        self._signed[(room, version)] = signed
        if len(self._signed) > SIGNED_KEPT:
            self._signed.popitem(last=False)
        return signed

    async def refusal_receipt(self, store: Any, raw: bytes, code: str) -> dict[str, Any] | None:
        """The signed receipt of a refusal the engine recorded (``raw``: its stored refusal record, the version it
        was refused at inside; ``code``: the error's). None when none can be made: a refusal before the room's first
        event (no history to re-decide it on), a record that does not decode, or a code outside the receipt's
        bounds. Signs only what its player knows (their command, the code, the version) and the commitment head
        a checkpoint at that version carries: nothing hidden from them can be learnt from it."""
        try:
            record = decode_record(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        version = record.refused_at_version
        if version is None or version < 1 or not cm.receipt_code(code) or len(raw) * 4 // 3 + 4 > cm.MAX_RAW:
            return None
        head = await self.head(store, record.room, version)
        return self.ring.sign_refusal(record.room, version, head, record, raw, code)

    def openings(self, room: str, scheme: str = cm.SCHEME) -> dict[str, Any]:
        """A bundle's ``commitments`` section for an auditor: the room key opens every salt."""
        return {"scheme": scheme, "room_key": self.room_key(room).hex()}


async def record_scheme(store: Any, room: str, scheme: str = NEW_ROOM_SCHEME) -> None:
    """Record the commitment scheme of a room being created (first write wins: a retried creation keeps it).
    A store without the optional ``save_commit_scheme`` keeps every room on scheme v1."""
    save = getattr(store, "save_commit_scheme", None)
    if save is not None:
        await save(room, scheme)


async def player_checkpoints(checkpointer: Checkpointer, store: Any, room: str, player: str | None) -> dict[str, Any]:
    """A checkpoint file (docs/bundle-format.md 2.1) of ``room``: the checkpoint at the last version of each of
    ``player``'s commands (what their accepted answers carried; every command when ``player`` is None) and at the
    room's head, with the key set."""
    envelopes = await store.read(room, 1, None)
    if not envelopes:
        raise LookupError(f"room {room!r} does not exist")
    key = checkpointer.room_key(room)
    heads = []
    # A heavy read (GET /rooms/{room}/checkpoints): a version at a time with a pause now and then, where a client's
    # leaving stops it (services.forensics.pauses); without them a hung-up client's read of a long room ran to its end.
    for index, head in enumerate(cm.each_head(key, envelopes, await checkpointer.scheme(store, room))):
        await pause_now_and_then(index)
        heads.append(head)
    last_of: dict[str, int] = {}
    for envelope in envelopes:
        if player is None or envelope.player == player:
            last_of[envelope.command_id] = envelope.version
    signed = []
    for index, version in enumerate(sorted(set(last_of.values()) | {len(envelopes)})):
        await pause_now_and_then(index)  # a signature each of the player's commands: as long as the heads, or longer
        signed.append(checkpointer.ring.sign(room, version, heads[version - 1]))
    return {"format": "almanac-checkpoints", "format_version": 1, "keys": checkpointer.ring.document,
            "checkpoints": signed}


def new_signing_seed() -> str:
    """A fresh Ed25519 seed (hex) for ALMANAC_SIGNING_KEYS (rotation: put it first, keep the old ones after it)."""
    return secrets.token_hex(32)
