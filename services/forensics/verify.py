"""Verify a room from its log: the hash chain, every command re-decided byte for byte, the revealed seed."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from almanac.events import codec, registry, room as room_rules
from almanac.events.copies import relabel, relabel_record
from almanac.events.dice import COMMAND_BOUND, NONCE_SCHEMES, nonce_commitment, nonces_by_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import CorruptEventError, RuleError, RulesNotInstalledError
from almanac.events.forensics.redecide import (
    DiceMismatch,
    Mismatch,
    Refusal,
    command_spans,
    committed_nonces,
    ended_nonces_mismatch,
    public_seed,
    recheck_refusals,
    seed_mismatch,
    signed_joins,
)
from almanac.events.forensics.signers import seats
from almanac.events.hashing import envelope_hash, first_broken_link
from almanac.events.step import (
    BY_BOT,
    BY_CLOCK,
    BY_RECLAIM,
    CommandRecord,
    advance,
    decode_record,
    replay,
    unsigned_because,
)
from almanac.services.forensics.pauses import pause_now_and_then, redecide_in_spans
from almanac.storage.base import EventStore
from almanac.storage.loader import RoomLoader


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """The first place where the log and a recomputation disagree, with both sides."""

    # "fork" (the link to the parent), "decode", "chain", "coverage", "seed", "nonce" (a reveal against its
    # commitment), "order" (a nonce committed before the seed commitment was public), "redecide", "refusal",
    # "ruleset" (not installed), "signature" (a signing seat's command without its valid signature, not one the
    # state allows unsigned: events.step.unsigned_because)
    check: str
    version: int | None
    message: str
    recorded: Any = None
    recomputed: Any = None


class ForkLink(msgspec.Struct, frozen=True, kw_only=True):
    """A sandbox fork's link: its parent, the parent's version and that version's hash."""

    parent: str
    at: int
    parent_hash: str


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    ok: bool
    versions: int = 0
    chain_checked: int = 0
    commands_redecided: int = 0
    refusals_rechecked: int = 0
    # Of those, refused commands their player signed with the key their seat registered (sent by that player).
    refusals_signed: int = 0
    seed: str = "unknown"  # "revealed", "stored", "challenge", "unavailable"
    seed_matches_commitment: bool | None = None
    # The rules the room was verified with: its name@version, the fingerprint its room.created recorded
    # ("" for rooms created before versions) and the fingerprint of that version on this node.
    ruleset: str = ""
    fingerprint_recorded: str = ""
    fingerprint_used: str = ""
    # The code revision the recorded fingerprint is, in one sentence (the version's fingerprints.toml):
    # "played under board@1 code revision 4 (2026-12-01: ...)", or that it matches no known revision.
    code_revision: str = ""
    # A sandbox fork: its parent, the parent's version and hash it links to (None for a real room).
    fork: ForkLink | None = None
    divergence: Divergence | None = None
    notes: list[str] = []
    # The dice construction the room recorded (events.dice): 1 server seed, 2 seed + player nonces.
    dice_scheme: int = 1
    # Scheme 2: where the nonces came from ("revealed" by room.ended, "stored" for a live room,
    # "unavailable"), the players who revealed their own (cross-checked), those who never did (the
    # server's reveal at the end stands for them) and those whose nonce the server drew.
    nonces: str = ""
    nonces_revealed_by_player: list[str] = []
    players_not_revealing: list[str] = []
    nonces_by_server: list[str] = []
    # Scheme 3: the seats that registered a key (every command of theirs re-decided only with a valid signature
    # of that player), those that did not (the operator could act for them), and how many commands were signed.
    signing_players: list[str] = []
    unsigned_players: list[str] = []
    commands_signed: int = 0
    # Of the signing seats: whose join was signed by the key it registered (checked when re-deciding the join,
    # events.signing.join_bytes), and whose was not (a join from before signed joins: the operator could have
    # registered a key of its own for them).
    signed_joins: list[str] = []
    unsigned_joins: list[str] = []
    # Of the signing seats' commands, those accepted unsigned because the state before each alone justified it
    # (events.step.unsigned_because): the clock's timeout of a deadline due then, and moves of a seat the log handed
    # to a bot (room.seat_to_bot). Never counted as signed, never as forged.
    commands_by_clock: int = 0
    commands_by_bot: int = 0


def envelope_view(envelope: Envelope) -> dict[str, Any]:
    """An envelope as builtins with its event decoded when possible (for showing both sides)."""
    view = codec.to_builtins(envelope)
    try:
        view["event"] = codec.to_builtins(codec.decode_event(envelope))
        del view["payload"]
    except CorruptEventError as error:
        view["event_error"] = error.reason
    return view


async def raw_envelopes(store: EventStore, room: str) -> list[tuple[int, bytes]]:
    """The room's stored envelopes as (version, bytes), exactly as stored when the store can say."""
    read_raw = getattr(store, "read_raw", None)
    if read_raw is not None:
        return await read_raw(room)
    return [(e.version, codec.encode_envelope(e)) for e in await store.read(room)]


class _AsOrigin:
    """A copy's first ``upto`` versions shown as its origin room's (``events.copies``), for ``verify_room``."""

    def __init__(self, store: EventStore, copy: str, origin: str, upto: int, envelopes: list[Envelope]) -> None:
        self.store, self.copy, self.origin, self.upto = store, copy, origin, upto
        self.envelopes = relabel(envelopes[:upto], origin)

    async def read_raw(self, room: str) -> list[tuple[int, bytes]]:
        return [(e.version, codec.encode_envelope(e)) for e in self.envelopes]

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        return [(v, relabel_record(data, self.origin)) for v, data in await self.store.commands(self.copy)
                if v <= self.upto]

    async def rejections(self, room: str) -> list[bytes]:
        kept = []
        for data in await self.store.rejections(self.copy):
            at = decode_record(data).refused_at_version
            if at is not None and at < self.upto:
                kept.append(relabel_record(data, self.origin))
        return kept

    async def load_seed(self, room: str) -> bytes | None:
        return await self.store.load_seed(self.copy)

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        # A live copy's players' nonces are held under the copy's id (``import_room`` copies them).
        load = getattr(self.store, "load_nonces", None)
        return await load(self.copy) if load is not None else {}

    async def outcome(self, room: str, command_id: str) -> Any:
        return await self.store.outcome(self.copy, command_id)


async def room_seed(store: EventStore, room: str, created: Any, envelopes: list[Envelope]) -> tuple[bytes | None, str]:
    """The room's seed and where it came from: the log's (``events.forensics.redecide.public_seed``: "challenge",
    "revealed"), else the secret its server holds ("stored"), else (None, "unavailable")."""
    seed, source = public_seed(created, envelopes)
    if seed is None:
        seed = await store.load_seed(room)
        source = "stored" if seed is not None else "unavailable"
    return seed, source


async def as_origin(store: EventStore, room: str) -> tuple[Any, str, dict[str, Any] | None]:
    """A copy (``import --as``) as its origin's history: (store view, origin room, origin); else unchanged."""
    load_origin = getattr(store, "load_origin", None)
    origin = await load_origin(room) if load_origin is not None else None
    if not origin:
        return store, room, None
    found = json.loads(origin)
    envelopes = await store.read(room, 1, int(found["version"]))
    return _AsOrigin(store, room, found["room"], int(found["version"]), envelopes), found["room"], found


async def _verify_copy(store: EventStore, room: str, origin: dict[str, Any]) -> VerifyReport:
    """A copy (``import --as``): its own chain, then its first versions relabelled back are the origin's
    history (same head hash) and decide again as the origin; later versions decide again as the copy."""
    raw = await raw_envelopes(store, room)
    upto, origin_room, origin_hash = int(origin["version"]), str(origin["room"]), str(origin["hash"])
    base = {"room": room, "versions": len(raw)}
    try:
        envelopes = [codec.decode_envelope(data, room, version) for version, data in raw]
    except CorruptEventError as error:
        return VerifyReport(ok=False, **base, divergence=Divergence(check="decode", version=error.version,
                                                                    message=error.reason))
    broken = first_broken_link(envelopes, GENESIS_HASH) if envelopes else None
    if broken is not None or len(envelopes) < upto:
        return VerifyReport(ok=False, **base, divergence=Divergence(
            check="chain", version=broken[0] if broken else len(envelopes) + 1,
            message=broken[1] if broken else f"the copy holds fewer versions than its origin's {upto}"))
    as_origin = _AsOrigin(store, room, origin_room, upto, envelopes)
    inner = await verify_room(as_origin, origin_room)  # type: ignore[arg-type]
    relabelled_head = as_origin.envelopes[-1].hash if as_origin.envelopes else GENESIS_HASH
    notes = [f"a copy of room {origin_room!r} at version {upto}: versions 1..{upto} relabelled to {origin_room!r} "
             f"re-seal to its head hash {origin_hash[:16]}… and were checked as that room", *inner.notes]
    report = codec.to_builtins(inner)
    report.update(room=room, versions=len(envelopes), chain_checked=len(envelopes), notes=notes)
    if not inner.ok:
        return msgspec.convert(report, VerifyReport)
    if relabelled_head != origin_hash:
        report.update(ok=False, divergence={"check": "origin", "version": upto,
                                            "message": f"versions 1..{upto} relabelled are not the history of "
                                                       f"{origin_room!r} the copy names", "recorded": origin_hash,
                                            "recomputed": relabelled_head})
        return msgspec.convert(report, VerifyReport)
    # The origin held in the same store is the authority, not the hash the copy recorded for it.
    stored = await store.read(origin_room, upto, upto) if origin_room != room else []
    if stored:
        if stored[0].hash != origin_hash:
            report.update(ok=False, divergence={"check": "origin", "version": upto,
                                                "message": f"room {origin_room!r} in this store has another history "
                                                           f"at version {upto} than the copy", "recorded": origin_hash,
                                                "recomputed": stored[0].hash})
            return msgspec.convert(report, VerifyReport)
        notes.append(f"checked against {origin_room!r} in this store: the same hash at version {upto}")
    else:
        notes.append(f"room {origin_room!r} is not in this store: the copy is checked against the head it recorded")
    if len(envelopes) > upto:
        seed, _ = await room_seed(store, room, codec.decode_event(envelopes[0]), envelopes)
        tail = [(v, data) for v, data in await store.commands(room) if v > upto]
        if seed is None or not tail or tail[0][0] != upto + 1:
            notes.append(f"versions {upto + 1}..{len(envelopes)} (after the copy) are chain-checked only")
        else:
            checked = await redecide_in_spans(envelopes, command_spans(tail, len(envelopes)), seed, inner.ruleset,
                                              state=replay(envelopes[:upto]), folded=upto,
                                              last_hash=envelopes[upto - 1].hash)
            if checked.mismatch is not None:
                report.update(ok=False, divergence=codec.to_builtins(_divergence(checked.mismatch)))
                return msgspec.convert(report, VerifyReport)
            report["commands_redecided"] += checked.commands
    return msgspec.convert(report, VerifyReport)


async def verify_room(store: EventStore, room: str) -> VerifyReport:
    """Check a room's log; the report names the first divergence (``ok`` False) or none."""
    load_origin = getattr(store, "load_origin", None)
    origin = await load_origin(room) if load_origin is not None else None
    if origin:
        return await _verify_copy(store, room, json.loads(origin))
    raw = await raw_envelopes(store, room)
    report: dict[str, Any] = {"room": room, "versions": len(raw)}
    notes: list[str] = []

    def failed(divergence: Divergence) -> VerifyReport:
        return VerifyReport(ok=False, divergence=divergence, notes=notes, **report)

    if not raw:
        return failed(Divergence(check="decode", version=None, message=f"room {room!r} has no events"))

    # 0. A fork's chain starts from its parent's hash at the fork version: check that link first.
    previous = link_hash = GENESIS_HASH
    base: room_rules.RoomState | None = None
    try:
        first = codec.decode_envelope(raw[0][1], room, raw[0][0])
        forked = codec.decode_event(first) if first.type == "room.forked" else None
    except (CorruptEventError, RulesNotInstalledError):
        forked = None  # step 1 reports it
    if forked is not None:
        report["fork"] = ForkLink(parent=forked.parent, at=forked.at, parent_hash=forked.parent_hash)
        linked = await store.read(forked.parent, forked.at, forked.at)
        if not linked or linked[0].hash != forked.parent_hash:
            return failed(Divergence(check="fork", version=1,
                                     message=f"the fork's parent {forked.parent!r} at version {forked.at} does not "
                                             "have the hash the fork recorded",
                                     recorded=forked.parent_hash, recomputed=linked[0].hash if linked else None))
        try:
            # A loader on the store being verified, caching nothing: that store may be an export file or a copy shown
            # as its origin, never the process's own, and a verifier trusts no state it did not fold itself.
            base = await RoomLoader(store, 0).base_of(first)
        except CorruptEventError as error:
            return failed(Divergence(check="fork", version=1, message=error.reason))
        previous = link_hash = forked.parent_hash
        notes.append(f"a sandbox fork of {forked.parent!r} at version {forked.at}: the link to the parent's hash "
                     "was checked; verify the parent for its own history")

    # 1. Every entry decodes, sits at its version, and links to the one before.
    envelopes: list[Envelope] = []
    for expected_version, (version, data) in enumerate(raw, start=1):
        await pause_now_and_then(expected_version)
        if version != expected_version:
            return failed(Divergence(check="chain", version=expected_version,
                                     message=f"version {expected_version} is missing (next entry is {version})"))
        try:
            envelope = codec.decode_envelope(data, room, version)
            codec.decode_event(envelope)
        except RulesNotInstalledError as error:
            # Never folded with other rules than its own: say which version is missing, check nothing more.
            report["ruleset"] = error.ref
            return failed(Divergence(check="ruleset", version=version, message=error.message))
        except CorruptEventError as error:
            return failed(Divergence(check="decode", version=version, message=error.reason))
        if envelope.previous_hash != previous:
            return failed(Divergence(check="chain", version=version,
                                     message="the entry does not link to the previous entry's hash",
                                     recorded=envelope.previous_hash, recomputed=previous))
        own = envelope_hash(envelope)
        if own != envelope.hash:
            return failed(Divergence(check="chain", version=version,
                                     message="the entry's content does not match its hash (altered after sealing)",
                                     recorded=envelope.hash, recomputed=own))
        previous = envelope.hash
        envelopes.append(envelope)
    report["chain_checked"] = len(envelopes)

    # 2. The seed: revealed at the end, or the challenge's public seed, or the stored secret.
    created = codec.decode_event(envelopes[0])
    if not isinstance(created, room_rules.RoomCreated | room_rules.RoomForked):
        return failed(Divergence(check="decode", version=1, message=f"the first event is {envelopes[0].type}"))
    try:
        rules = registry.at(created.ruleset, created.ruleset_version)
    except RulesNotInstalledError as error:
        report["ruleset"] = error.ref
        return failed(Divergence(check="ruleset", version=1, message=error.message))
    recorded_print = getattr(created, "fingerprint", rules.fingerprint)  # a fork's rules are its parent's
    report.update(ruleset=rules.ref, fingerprint_recorded=recorded_print, fingerprint_used=rules.fingerprint,
                  code_revision=rules.played_under(recorded_print))
    if recorded_print != rules.fingerprint:
        here = rules.revision(rules.fingerprint)
        notes.append(f"{rules.ref} here has fingerprint {rules.fingerprint}"
                     + (f" (code revision {here.number})" if here else " (no listed code revision)")
                     + f", the room recorded {created.fingerprint or 'none (created before versions)'}: the code "
                     "differs, so every decision is checked again against it")
    seed, report["seed"] = await room_seed(store, room, created, envelopes)
    if seed is None:
        notes.append("the room has not ended and its secret seed is not available: commands not re-decided")
    if seed is not None and report["seed"] != "challenge":
        wrong_seed = seed_mismatch(created, seed)
        report["seed_matches_commitment"] = wrong_seed is None
        if wrong_seed is not None:
            return failed(_dice_divergence(wrong_seed))

    # 2b. Scheme 2: every nonce commitment came after the seed commitment, and every reveal matches.
    nonces: dict[str, bytes] | None = None
    # A fork draws with its parent's scheme (its own seed and its own players' nonces).
    scheme = base.dice_scheme if isinstance(created, room_rules.RoomForked) and base is not None else created.dice_scheme
    report["dice_scheme"] = scheme
    if scheme in NONCE_SCHEMES:
        checked_nonces = await _check_nonces(store, room, envelopes, seed, report, notes)
        if isinstance(checked_nonces, Divergence):
            return failed(checked_nonces)
        nonces = checked_nonces
        if nonces is None and seed is not None:
            notes.append("the players' nonces are not available: commands not re-decided")
            seed = None

    # 3. Every event was caused by a recorded command, in order, with nothing left over.
    spans = command_spans(await store.commands(room), len(envelopes))
    expected_first = 1
    for index, (first_version, last_version, _) in enumerate(spans):
        if first_version != expected_first or last_version < first_version:
            return failed(Divergence(check="coverage", version=expected_first,
                                     message=f"recorded command {index + 1} starts at version {first_version}, "
                                             f"expected {expected_first}"))
        expected_first = last_version + 1
    if expected_first != len(envelopes) + 1:
        return failed(Divergence(check="coverage", version=expected_first,
                                 message="events without a recorded command"))

    # 4. Re-decide each command against the state before it, with the room's dice (events.forensics.redecide).
    if seed is not None:
        checked = await redecide_in_spans(envelopes, spans, seed, rules.ref, nonces=nonces, state=base,
                                          last_hash=link_hash)
        if checked.mismatch is not None:
            return failed(_divergence(checked.mismatch))
        report["commands_redecided"] = checked.commands
        refusals = await _refusals(store, room, len(envelopes))
        if isinstance(refusals, Divergence):
            return failed(refusals)
        signed_refusals: list[Refusal] = []
        # (A key registered by an unsigned join may be the operator's: its signature covers nothing.)
        joins_signed = signed_joins(envelopes, [decode_record(data) for _, _, data in spans])
        rechecked, wrong = recheck_refusals(envelopes, refusals, seed, nonces=nonces, base=base, signed=signed_refusals,
                                            joins_signed=joins_signed)
        if wrong is not None and wrong.decided_at is not None:
            return failed(Divergence(check="refusal", version=wrong.version,
                                     message=f"refused command {wrong.refusal.record.command_id!r} is recorded "
                                             f"accepted at version {wrong.decided_at}: a command id is decided once",
                                     recorded=wrong.refusal.error, recomputed="accepted"))
        if wrong is not None:
            outcome_error = wrong.refusal.error
            return failed(Divergence(check="refusal", version=wrong.version,
                                     message=f"refused command {wrong.refusal.record.command_id!r} now decides "
                                             "differently", recorded=outcome_error,
                                     recomputed=wrong.recomputed.to_dict() if wrong.recomputed else "accepted"))
        report["refusals_rechecked"] = rechecked
        report["refusals_signed"] = len(signed_refusals)
    unsigned = _signing(spans, envelopes, base, scheme, report, notes)
    if unsigned is not None:
        return failed(unsigned)
    return VerifyReport(ok=True, notes=notes, **report)


def _signing(spans: list[tuple[int, int, bytes]], envelopes: list[Envelope], base: room_rules.RoomState | None,
             scheme: int, report: dict[str, Any], notes: list[str]) -> Divergence | None:
    """Who signed (events.forensics.signers, shared with the bundle verifiers): in a scheme-3 room each signing seat's
    commands were re-decided only with their player's valid signature (``events.step.check_signature``); the others'
    could have been sent by whoever held a token. A signing seat's unsigned command is named for what the state
    before it says sent it (``events.step.unsigned_because``: the clock's timeout of a due deadline, or the bot the
    log handed the seat to), from the log alone, so even a room whose commands are not re-decided (no seed here)
    fails on any other unsigned command of a signing seat."""
    records: list[tuple[int, CommandRecord]] = []
    for first, _, data in spans:
        try:
            records.append((first, decode_record(data)))
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            return Divergence(check="decode", version=first, message=f"undecodable command record: {error}")
    found = seats(scheme, envelopes, [record for _, record in records])
    keys = set(found.signing_players)
    signed = 0
    unsigned_by: dict[str, dict[str, int]] = {BY_CLOCK: {}, BY_BOT: {}, BY_RECLAIM: {}}
    state, folded = base, 0
    for first, record in records:
        if record.player not in keys:
            continue  # a seat that never signs
        if record.signature is not None:
            signed += record.body.get("kind") != "join_room"  # checked when re-deciding
            continue
        while folded < first - 1:  # the state the command was decided against (folded only this far, only now)
            state = advance(state, envelopes[folded])
            folded += 1
        if state is None or record.player not in dict(state.player_keys):
            continue  # before the seat registered its key (its create, its join)
        try:
            why = unsigned_because(state, record, codec.decode_command(room_rules.stored_ref(state), record.body))
        except RuleError:
            why = None
        if why is None:
            return Divergence(check="signature", version=first,
                              message=f"command {record.command_id!r} of {record.player!r}, whose seat signs, is "
                                      "recorded without a signature, and it is neither the clock's timeout of a "
                                      "deadline due then nor a move of a seat the log handed to a bot")
        unsigned_by[why][record.player] = unsigned_by[why].get(record.player, 0) + 1
    by_clock, by_bot = sum(unsigned_by[BY_CLOCK].values()), sum(unsigned_by[BY_BOT].values())
    report.update(signing_players=found.signing_players, unsigned_players=found.unsigned_players,
                  commands_signed=signed, signed_joins=found.signed_joins, unsigned_joins=found.unsigned_joins,
                  commands_by_clock=by_clock, commands_by_bot=by_bot)
    if scheme == COMMAND_BOUND and report.get("commands_redecided"):
        notes.append(f"signed by their players (each signature checked when re-deciding): {signed} commands of "
                     f"{', '.join(found.signing_players) or 'nobody'}")
    if by_clock:
        notes.append(f"sent by the clock for a due deadline, unsigned (the state before each names the deadline due "
                     f"at its time; docs/dice.md): {by_clock} commands as {', '.join(sorted(unsigned_by[BY_CLOCK]))}")
    if by_bot:
        notes.append(f"played by the bot the log handed the seat to, unsigned (room.seat_to_bot; docs/dice.md): "
                     f"{by_bot} commands of {', '.join(sorted(unsigned_by[BY_BOT]))}")
    if unsigned_by[BY_RECLAIM]:
        notes.append("seats taken back from their bots with the seat key, unsigned (room.seat_reclaimed): "
                     f"{', '.join(sorted(unsigned_by[BY_RECLAIM]))}")
    notes.extend(found.notes)
    return None


async def _check_nonces(store: EventStore, room: str, envelopes: list[Envelope], seed: bytes | None,
                        report: dict[str, Any], notes: list[str]) -> dict[str, bytes] | None | Divergence:
    """A scheme-2 room's nonces, by commitment, each checked against the join that committed to it, and every
    commitment made after the seed's (events.forensics.redecide: ``committed_nonces``, ``ended_nonces_mismatch``,
    the checks the bundle verifier runs too). Before the room's end, the nonces this store holds, if they match the
    commitments. None when the room is live and its nonces are not held here.
    """
    found = committed_nonces(envelopes)
    if isinstance(found, DiceMismatch):
        return _dice_divergence(found)
    report.update(nonces_revealed_by_player=sorted(found.own), nonces_by_server=sorted(found.by_server),
                  players_not_revealing=sorted(set(found.commitments) - set(found.own)))
    if found.ended is not None:
        wrong = ended_nonces_mismatch(found, seed)
        if wrong is not None:
            return _dice_divergence(wrong)
        report["nonces"] = "revealed"
        if report["players_not_revealing"]:
            notes.append("never revealed their own nonce (the server's reveal at the end, checked against their "
                         f"commitment, stands for them): {', '.join(report['players_not_revealing'])}")
        if found.by_server:
            notes.append(f"the server derived the nonce of {', '.join(sorted(found.by_server))} (they sent none): "
                         "those add no entropy against the operator")
        return nonces_by_commitment(found.ended[0].revealed_nonces.values())
    held = await store.load_nonces(room)
    if all(c in held and nonce_commitment(held[c]) == c for c, _ in found.commitments.values()):
        report["nonces"] = "stored"
        return {c: held[c] for c, _ in found.commitments.values()}
    report["nonces"] = "unavailable"
    return None


def _dice_divergence(wrong: DiceMismatch) -> Divergence:
    """A seed or nonce that does not match what the room committed to, as the report names it."""
    return Divergence(check=wrong.check, version=wrong.version, message=wrong.message, recorded=wrong.recorded,
                      recomputed=wrong.recomputed)


async def _refusals(store: EventStore, room: str, latest: int) -> list[Refusal] | Divergence:
    """The room's refused commands with their recorded errors, those this log can place (a refusal kept before
    refusals kept their version, or refused after the versions read here, is left out)."""
    kept = []
    for record_bytes in await store.rejections(room):
        try:
            record = decode_record(record_bytes)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            return Divergence(check="decode", version=None, message=f"undecodable refused command: {error}")
        if record.refused_at_version is None or record.refused_at_version > latest:
            continue
        outcome = await store.outcome(room, record.command_id)
        kept.append(Refusal(record=record, error=outcome.error if outcome is not None else None))
    return kept


def _divergence(mismatch: Mismatch) -> Divergence:
    """A command that did not decide its recorded events again, as the report names it (both sides shown)."""
    if mismatch.reason == "undecodable":
        return Divergence(check="decode", version=mismatch.version,
                          message=f"undecodable command record: {mismatch.detail}")
    if mismatch.reason == "repeated":
        return Divergence(check="redecide", version=mismatch.version, message=mismatch.detail)
    if mismatch.reason == "refused":
        error = mismatch.error
        assert error is not None and isinstance(mismatch.recorded, list)
        # A signing seat's command in the log without that player's valid signature: not theirs.
        check = "signature" if error.code in ("signature_required", "signature_invalid") else "redecide"
        return Divergence(check=check, version=mismatch.version,
                          message=f"command {mismatch.command_id!r} is now refused: {error.code}: {error.message}",
                          recorded=[envelope_view(e) for e in mismatch.recorded], recomputed=error.to_dict())
    theirs, mine = mismatch.recorded, mismatch.recomputed
    assert not isinstance(theirs, list)
    return Divergence(check="redecide", version=mismatch.version,
                      message=f"command {mismatch.command_id!r} now decides differently",
                      recorded=None if theirs is None else envelope_view(theirs),
                      recomputed=None if mine is None else envelope_view(mine))
