"""Re-decide recorded commands and compare them with the recorded events: the one loop of verify, bundles and bisect.

``verify`` (a room from its store), the offline bundle verifier and ``bisect --against`` (a room's
commands under another version of its rules) all ask one question: do these commands, decided again
by ``events.step.step`` with the room's dice, give the events the room recorded? They ask it here,
with one rule for what "the same event" means (``same_event``), they read the room's revealed
seed and nonces through one helper each, and they check those dice against the room's commitments here
(``seed_mismatch``, ``committed_nonces`` and ``ended_nonces_mismatch``). Pure: the caller reads the log; nothing here reads a clock,
draws randomness or does I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from almanac.events import codec, registry, room as room_rules
from almanac.events.dice import nonce_commitment, nonces_by_commitment, seed_commitment, server_nonce
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import RuleError
from almanac.events.signing import command_bytes, join_bytes, signature_valid
from almanac.events.step import CommandRecord, advance, decode_record, replay, step

# A recorded command and the versions its events hold: (first, last, the command as stored or decoded).
Span = tuple[int, int, "bytes | CommandRecord"]


# --- the seed and nonces a log reveals ------------------------------------------------------------


def room_end(envelopes: Iterable[Envelope]) -> room_rules.RoomEnded | None:
    """The room's end (its last ``room.ended``: the revealed seed and nonces), or None while it runs."""
    ended = None
    for envelope in envelopes:
        if envelope.type == "room.ended":
            ended = envelope
    return codec.decode_event(ended) if ended is not None else None


def public_seed(created: Any, envelopes: Iterable[Envelope]) -> tuple[bytes | None, str]:
    """The seed anyone holding the log can know, and where it came from: a challenge room's public seed
    (``"challenge"``; a fork has its own secret, never a challenge's), the secret revealed by the room's end
    (``"revealed"``), or ``(None, "")`` while a secret room runs (only its server holds the seed)."""
    challenge = getattr(created, "challenge", None)
    if challenge is not None:
        return room_rules.challenge_seed(challenge), "challenge"
    ended = room_end(envelopes)
    if ended is not None:
        return bytes.fromhex(ended.revealed_seed), "revealed"
    return None, ""


def revealed_nonces(envelopes: Iterable[Envelope]) -> dict[str, bytes] | None:
    """A scheme-2 room's players' nonces revealed by its end, by the commitment each hashes to (a nonce that
    does not match its player's commitment is simply not found, and the re-decision fails), or None."""
    ended = room_end(envelopes)
    return nonces_by_commitment(ended.revealed_nonces.values()) if ended is not None else None


# --- the dice a log reveals, checked against what it committed to -------------------------------------


@dataclass(frozen=True)
class DiceMismatch:
    """Where a room's dice and its commitments disagree: ``check`` is ``"seed"`` (the seed does not hash to the
    commitment ``room.created`` recorded), ``"nonce"`` (a reveal against its player's commitment, a join without
    one) or ``"order"`` (a nonce committed no later than the seed commitment); ``recorded`` is what the log
    committed to, ``recomputed`` what the revealed value gives."""

    check: str
    version: int
    message: str
    recorded: Any = None
    recomputed: Any = None


def seed_mismatch(created: Any, seed: bytes) -> DiceMismatch | None:
    """Whether ``seed`` is the one the room committed to at creation (``created``: its ``room.created`` or
    ``room.forked``, whose ``seed_commitment`` each hold): None when it hashes to that commitment. A challenge
    room's public seed commits to nothing: its callers do not ask."""
    digest = seed_commitment(seed)
    if digest == created.seed_commitment:
        return None
    return DiceMismatch(check="seed", version=1, message="the seed does not match the commitment",
                        recorded=created.seed_commitment, recomputed=digest)


@dataclass(frozen=True)
class CommittedNonces:
    """A scheme-2 log's nonce commitments and reveals (``committed_nonces``): each player's commitment and the
    version of the join that made it, the players whose nonce the server drew, each player's own reveal (nonce
    hex, version), and the room's end with its version (None while the room runs)."""

    commitments: dict[str, tuple[str, int]]
    by_server: list[str]
    own: dict[str, tuple[str, int]]
    ended: tuple[room_rules.RoomEnded, int] | None


def committed_nonces(envelopes: Sequence[Envelope]) -> CommittedNonces | DiceMismatch:
    """A scheme-2 log's nonces as it commits to and reveals them, or the first place they break its rules.

    Order: the seed commitment (room.created, version 1) was public before any player committed to a nonce (a later
    version, another command, no earlier server time), so the server could not pick its seed knowing them. A
    player's own reveal (room.nonce_revealed) must hash to that player's commitment; the server's reveals at the
    end are ``ended_nonces_mismatch``'s."""
    created_envelope = envelopes[0]
    commitments: dict[str, tuple[str, int]] = {}
    by_server: list[str] = []
    own: dict[str, tuple[str, int]] = {}
    ended: tuple[room_rules.RoomEnded, int] | None = None
    for envelope in envelopes[1:]:
        if envelope.type == "room.player_joined":
            joined = codec.decode_event(envelope)
            if not joined.nonce_commitment:
                return DiceMismatch(check="nonce", version=envelope.version,
                                    message=f"player {joined.player!r} joined without a nonce commitment")
            if (envelope.command_id == created_envelope.command_id
                    or envelope.server_time_ms < created_envelope.server_time_ms):
                return DiceMismatch(check="order", version=envelope.version,
                                    message=f"player {joined.player!r} committed to a nonce no later than the room "
                                            "committed to its seed: the server could have chosen its seed knowing it",
                                    recorded=envelope.server_time_ms, recomputed=created_envelope.server_time_ms)
            commitments[joined.player] = (joined.nonce_commitment, envelope.version)
            if joined.nonce_by_server:
                by_server.append(joined.player)
        elif envelope.type == "room.nonce_revealed":
            revealed = codec.decode_event(envelope)
            own[revealed.player] = (revealed.nonce, envelope.version)
        elif envelope.type == "room.ended":
            ended = (codec.decode_event(envelope), envelope.version)
    found = CommittedNonces(commitments=commitments, by_server=by_server, own=own, ended=ended)
    for player, (nonce_hex, version) in own.items():
        if (mismatch := _nonce_mismatch(found, player, nonce_hex, version, "the revealed")) is not None:
            return mismatch
    return found


def ended_nonces_mismatch(found: CommittedNonces, seed: bytes | None) -> DiceMismatch | None:
    """Whether the room's end (``found.ended``, which must be there) reveals every committed player's nonce, each
    hashing to that player's commitment, the one its player revealed if they did, and, for a nonce the server drew,
    the one its seed derives (``events.dice.server_nonce``; checked when ``seed`` is known): None when it does."""
    assert found.ended is not None
    event, version = found.ended
    for player in sorted(found.commitments):
        if player not in event.revealed_nonces:
            return DiceMismatch(check="nonce", version=version,
                                message=f"the room's end does not reveal the nonce of player {player!r}")
    for player, nonce_hex in sorted(event.revealed_nonces.items()):
        if (mismatch := _nonce_mismatch(found, player, nonce_hex, version, "the server's revealed")) is not None:
            return mismatch
        if player in found.by_server and seed is not None and nonce_hex != server_nonce(seed, player).hex():
            return DiceMismatch(check="nonce", version=version,
                                message=f"the nonce the server drew for player {player!r} is not the one its "
                                        "seed derives (events.dice.server_nonce)",
                                recorded=nonce_hex, recomputed=server_nonce(seed, player).hex())
        if player in found.own and found.own[player][0] != nonce_hex:
            return DiceMismatch(check="nonce", version=version,
                                message=f"the server revealed another nonce for player {player!r} than they did",
                                recorded=found.own[player][0], recomputed=nonce_hex)
    return None


def _nonce_mismatch(found: CommittedNonces, player: str, nonce_hex: str, version: int,
                    who: str) -> DiceMismatch | None:
    committed = found.commitments.get(player)
    try:
        recomputed = nonce_commitment(bytes.fromhex(nonce_hex))
    except ValueError:
        recomputed = "not hex"
    if committed is None or committed[0] != recomputed:
        where = f"its commitment at version {committed[1]}" if committed else "no commitment (never joined)"
        return DiceMismatch(check="nonce", version=version,
                            message=f"{who} nonce of player {player!r} does not match {where}",
                            recorded=committed[0] if committed else None, recomputed=recomputed)
    return None


# --- the spans of the recorded commands -----------------------------------------------------------


def command_spans(commands: Sequence[tuple[int, bytes]], latest: int) -> list[tuple[int, int, bytes]]:
    """Each recorded command (its first version, its stored record) with the versions its events hold: up to
    the next command's first version, the last one up to ``latest``."""
    return [(first, (commands[index + 1][0] - 1) if index + 1 < len(commands) else latest, data)
            for index, (first, data) in enumerate(commands)]


# --- one event compared -------------------------------------------------------------------------


def same_event(recorded: Envelope, recomputed: Envelope, renamed: tuple[str, str] | None = None) -> bool:
    """Whether an event decided again is the recorded one: the one rule, ``room.created`` included.

    Equal in every envelope field, the payload byte for byte, but for the chain hashes and the fingerprint:
    ``previous_hash`` and ``hash`` are each side's own chain (the recorded chain is checked link by link by
    the callers: verify's and the bundle's chain step; code with another fingerprint seals another chain from
    ``room.created`` on), and ``room.created``'s ``fingerprint`` is the code's hash, not the decision (a comment
    edit changes it; the callers report it). ``room.created`` is compared decoded, so a room created before
    versions (stored schema 1, read through the upcaster) compares by what it says. Re-decided under another
    version than the room's (``bisect --against``), what names the version differs by design and is read as
    that version's: ``renamed`` is (the room's envelope label, that version's), and ``room.created``'s
    ``ruleset_version`` is the re-decided one's.
    """
    theirs_created = codec.decode_event(recorded) if recorded.type == "room.created" else None
    if renamed is not None and recorded.ruleset == renamed[0]:
        recorded = msgspec.structs.replace(recorded, ruleset=renamed[1])
    if theirs_created is not None and recomputed.type == "room.created":
        mine = codec.decode_event(recomputed)
        named = {"fingerprint": mine.fingerprint}
        if renamed is not None:
            named["ruleset_version"] = mine.ruleset_version
        theirs = msgspec.structs.replace(theirs_created, **named)
        return (_unchained(recorded)[:-1] == _unchained(recomputed)[:-1]
                and codec.encode(theirs) == codec.encode(mine))
    return _unchained(recorded) == _unchained(recomputed)


# The envelope's fields but its chain hashes, the payload last (room.created leaves it out: compared decoded).
_UNCHAINED = [name for name in Envelope.__struct_fields__ if name not in ("previous_hash", "hash", "payload")]


def _unchained(envelope: Envelope) -> tuple[Any, ...]:
    return (*(getattr(envelope, name) for name in _UNCHAINED), envelope.payload)


# --- re-decide a span of commands ---------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """The first command that does not decide its recorded events again.

    ``reason``: ``"undecodable"`` (its stored record does not decode: ``detail`` says why), ``"repeated"`` (its
    command id was decided before, at ``detail``'s version: the engine decides a command id once, a resend gets
    the stored outcome, so a history deciding one twice is a replay the operator made), ``"refused"``
    (decided again it is refused: ``error``; ``recorded`` holds its span's events), ``"differs"`` (at
    ``version`` the recorded event and the re-decided one differ; either is None where one side has no event
    there).
    """

    reason: str
    version: int
    command_id: str
    recorded: Envelope | list[Envelope] | None = None
    recomputed: Envelope | None = None
    error: RuleError | None = None
    detail: str = ""


def redecide_each(recorded: Sequence[Envelope], spans: Iterable[Span], seed: bytes, ruleset: str, *,
                  nonces: Mapping[str, bytes] | None = None, state: room_rules.RoomState | None = None,
                  folded: int = 0, last_hash: str = GENESIS_HASH) -> Iterator[Mismatch | None]:
    """Re-decide each span's command; one item per command: None when it gives its recorded events again, else
    the Mismatch, which is the last item.

    ``recorded`` is the room's whole log (version v at index v-1); ``spans`` in version order, possibly with
    gaps (a bundle's slice). ``state`` is the room before version ``folded`` + 1 and ``last_hash`` the chain
    hash it links to: nothing for a new room, a fork's parent state and link hash (``folded`` 0), a copy's
    history (``folded`` its length). The state before each command is the one the commands before it decided
    (equal to the recorded one, or the loop has stopped), folded from ``recorded`` across gaps. ``ruleset``
    (NAME@VERSION) is the version a ``create_room`` is decided under again: the room's own for verify, another
    one for ``bisect --against``. ``seed`` and ``nonces`` are the room's dice (``public_seed``,
    ``revealed_nonces``, or the ones its server holds).
    """
    renamed = _renamed(recorded, ruleset)
    decided: dict[str, int] = {}  # each command id and the version its events start at
    for first, last, stored in spans:
        while folded < first - 1:  # versions no span of this run decides: the recorded ones
            state = advance(state, recorded[folded])
            last_hash = recorded[folded].hash
            folded += 1
        try:
            record = decode_record(stored) if isinstance(stored, bytes) else stored
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            yield Mismatch(reason="undecodable", version=first, command_id="", detail=str(error))
            return
        if decided.setdefault(record.command_id, first) != first:
            yield Mismatch(reason="repeated", version=first, command_id=record.command_id,
                           detail=f"command {record.command_id!r} was decided already at version "
                                  f"{decided[record.command_id]}; a command id is decided once (a resend gets its "
                                  "stored outcome), so deciding it again is a replay")
            return
        if state is None and record.body.get("kind") == "create_room" and _pinnable(record.body, ruleset, renamed):
            # Created again under the version asked for, never simply this node's newest.
            record = msgspec.structs.replace(record, body={**record.body, "ruleset": ruleset})
        theirs = list(recorded[first - 1:last])
        try:
            mine, after = step(state, last_hash, record, seed, nonces=nonces)
        except RuleError as error:
            yield Mismatch(reason="refused", version=first, command_id=record.command_id, recorded=theirs,
                           error=error)
            return
        for offset in range(max(len(theirs), len(mine))):
            one = theirs[offset] if offset < len(theirs) else None
            other = mine[offset] if offset < len(mine) else None
            if one is None or other is None or not same_event(one, other, renamed):
                yield Mismatch(reason="differs", version=first + offset, command_id=record.command_id,
                               recorded=one, recomputed=other)
                return
        state, last_hash, folded = after, mine[-1].hash, last
        yield None


def _pinnable(body: dict[str, Any], ruleset: str, renamed: tuple[str, str] | None) -> bool:
    """Whether a ``create_room``'s request may be decided again as ``ruleset``: it names that rule-set, and either
    no version (a bare name meant the default of its day, which the room recorded) or, re-decided under another
    version on purpose (``bisect --against``: ``renamed``), any. A request naming another rule-set, or another
    version than the room was created under, is decided as it stands (and so disagrees with ``room.created``):
    a record is not in the chain, and a forger could otherwise show a command asking for rules it never got."""
    asked = body.get("ruleset")
    if not isinstance(asked, str):
        return False
    try:
        name, version = registry.parse(asked)
    except RuleError:
        return False
    return name == registry.parse(ruleset)[0] and (version is None or renamed is not None)


def _renamed(recorded: Sequence[Envelope], ruleset: str) -> tuple[str, str] | None:
    """(the room's envelope label, the label of ``ruleset``) when ``ruleset`` is another version than the one the
    room was created under; None when it is the same (or the log starts with a fork, never created again)."""
    if not recorded or recorded[0].type != "room.created":
        return None
    created = codec.decode_event(recorded[0])
    name, version = registry.parse(ruleset)
    if (name, version) == (created.ruleset, created.ruleset_version):
        return None
    return recorded[0].ruleset, registry.stored_ref(name, version or created.ruleset_version)


@dataclass(frozen=True)
class Redecided:
    """How many commands decided their recorded events again, and the first that did not (None: all did)."""

    commands: int
    mismatch: Mismatch | None


def redecide(recorded: Sequence[Envelope], spans: Iterable[Span], seed: bytes, ruleset: str, *,
             nonces: Mapping[str, bytes] | None = None, state: room_rules.RoomState | None = None,
             folded: int = 0, last_hash: str = GENESIS_HASH) -> Redecided:
    """``redecide_each`` run to its end (arguments as there)."""
    count = 0
    for mismatch in redecide_each(recorded, spans, seed, ruleset, nonces=nonces, state=state, folded=folded,
                                  last_hash=last_hash):
        if mismatch is not None:
            return Redecided(count, mismatch)
        count += 1
    return Redecided(count, None)


# --- refusals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """A refused command as kept: its record (with the version it was refused at) and the recorded error."""

    record: CommandRecord
    error: dict[str, Any] | None


@dataclass(frozen=True)
class RefusalMismatch:
    """A refused command that decided again is not refused with its recorded code: ``recomputed`` is the error
    it now gets, or None when it is accepted; ``placed`` False when it names no version of the log;
    ``decided_at`` the version whose event records the same command id accepted (a command id is decided once)."""

    refusal: Refusal
    recomputed: RuleError | None = None
    placed: bool = True
    decided_at: int | None = None

    @property
    def version(self) -> int:
        """The version the refused command would have written (the one after the version it was refused at)."""
        return (self.refusal.record.refused_at_version or 0) + 1


def signed_by_seat(state: room_rules.RoomState | None, record: CommandRecord) -> bool:
    """Whether ``record`` carries its player's valid signature (events.signing.command_bytes) by the key their seat
    registered in ``state``: a seat without a key, or a join (its key is not yet the seat's), is never signed."""
    registered = dict(state.player_keys).get(record.player) if state is not None else None
    return registered is not None and signature_valid(registered, record.signature, command_bytes(
        record.room, record.player, record.command_id, record.body, record.seen_version))


def signature_places(record: CommandRecord) -> bool:
    """Whether a refused command's signature covers the version it is shown refused at: the v2 form signs the
    version the client saw (``seen_version``), and a v2 command is refused only there (``events.step.step``).
    The v1 form signs no version: it shows the player sent the command, not where, so an operator could show
    it again at any version where the rules also refuse it (docs/bundle-format.md, "Signed commands")."""
    return record.seen_version is not None and record.seen_version == record.refused_at_version


def signed_joins(recorded: Sequence[Envelope], records: Iterable[CommandRecord]) -> set[str]:
    """The players whose join in ``recorded`` registered a key and carries that key's signature over the join
    (events.signing.join_bytes). A key registered by an unsigned join (allowed for logs from before signed joins)
    may be the operator's own: a signature by it shows nothing about the player."""
    signatures = {record.command_id: record.signature for record in records if record.signature is not None}
    found = set()
    for envelope in recorded:
        if envelope.type != "room.player_joined" or envelope.command_id not in signatures:
            continue
        joined = codec.decode_event(envelope)
        commitment = None if joined.nonce_by_server else (joined.nonce_commitment or None)
        if joined.public_key and signature_valid(joined.public_key, signatures[envelope.command_id],
                                                 join_bytes(envelope.room, joined.player, joined.public_key,
                                                            commitment)):
            found.add(joined.player)
    return found


def refused_but_recorded(recorded: Sequence[Envelope], refusals: Iterable[Refusal]) -> RefusalMismatch | None:
    """The first refusal whose command id the log records accepted (``decided_at`` its first version), or None.

    A command id is decided once: one shown refused too (e.g. its signed record copied to the refusals at the
    version its client saw, where re-deciding it would refuse it again) is not a refusal that happened. Needs
    no seed: the ids alone tell."""
    accepted: dict[str, int] = {}
    for envelope in recorded:
        accepted.setdefault(envelope.command_id, envelope.version)
    for refusal in refusals:
        if refusal.record.command_id in accepted:
            return RefusalMismatch(refusal=refusal, decided_at=accepted[refusal.record.command_id])
    return None


def recheck_refusals(recorded: Sequence[Envelope], refusals: Iterable[Refusal], seed: bytes, *,
                     nonces: Mapping[str, bytes] | None = None,
                     base: room_rules.RoomState | None = None,
                     signed: list[Refusal] | None = None,
                     joins_signed: Collection[str] = ()) -> tuple[int, RefusalMismatch | None]:
    """Each refused command, decided again against the recorded log at the version it was refused at, is
    refused with the code recorded for it: (how many were, the first that is not). In version order, folding
    the log forward once; ``base`` is the state version 1 folds onto (a fork's parent's). ``signed``, when given,
    receives each refusal whose command carries a valid signature by the key its seat had registered by then
    (``signed_by_seat``) in the form that covers its version (``signature_places``), and whose player's join was
    signed by that key (``joins_signed``, from ``signed_joins``): its player sent it against that version, so the
    refusal is not the operator's word alone."""
    checked = 0
    state, folded = base, 0
    refusals = sorted(refusals, key=lambda r: r.record.refused_at_version or 0)
    twice = refused_but_recorded(recorded, refusals)
    if twice is not None:
        return checked, twice
    for refusal in refusals:
        at = refusal.record.refused_at_version
        if at is None or not 0 <= at <= len(recorded):
            return checked, RefusalMismatch(refusal=refusal, placed=False)
        state = replay(recorded[folded:at], state)
        folded = at
        code = (refusal.error or {}).get("code")
        if (signed is not None and refusal.record.player in joins_signed and signature_places(refusal.record)
                and signed_by_seat(state, refusal.record)):
            signed.append(refusal)
        try:
            step(state, recorded[at - 1].hash if at else GENESIS_HASH, refusal.record, seed, nonces=nonces)
        except RuleError as error:
            if error.code == code:
                checked += 1
                continue
            return checked, RefusalMismatch(refusal=refusal, recomputed=error)
        return checked, RefusalMismatch(refusal=refusal)
    return checked, None
