"""Verify a dispute bundle offline: no Redis, no server, only this package's pure rules and msgspec.

    almanac verify-bundle bundle.json        or, in Python (this module reads no file itself: events/ does no I/O):
    from almanac.events.forensics.bundle_check import verify_bundle
    print(verify_bundle(json.load(open("bundle.json"))).text())

A bundle (written by ``almanac dispute``; format in docs/forensics.md) claims: "these events of room R,
decided by these commands under rule-set NAME@VERSION with these dice, are part of R's history whose
head at export time was HASH, and every command of that history, from room.created to the head, decides
exactly its recorded events". This module checks that claim in named steps, stopping at the first
failure, and says what each passed step proved:

1.  format    the file is a dispute bundle this verifier reads (format_version 2: the whole chain's commands),
              with no part no step reads (every word a person reads is checked or refused) and whole numbers
              written as whole numbers (not "155", 155.0 or true).
2.  chain     every envelope from version 1 to the head links to the one before (sha256 over the
              previous hash and the envelope's fields) and the last one's hash is the stated head.
    checkpoints the commitment chain (docs/bundle-format.md), recomputed from the envelopes and the bundle's
              salts, passes through every signed checkpoint given (any player's) and the server's own on the
              head, each signed by a key of the key set given. No step without a key set.
3.  anchor    the chain passes through a head you got by other means (``--expect-head HASH`` or
              ``VERSION:HASH``; the server's own chain for a room it holds). Skipped without one (a bundle
              alone cannot tell its room from an invented one) and when none reaches the bundle's head (the
              versions after the last one rest on the rules alone: once the seed is out, anyone can decide
              other commands there); failed when one contradicts the chain.
4.  readable  each readable event in the bundle is exactly the chained envelope it names.
5.  rules     the room's first event names the rule-set version; this machine has that version, and
              its fingerprint is compared with the one the room recorded (a difference is reported).
6.  subject   the slice is all of its subject: a trade (any audit view's item) told again from the
              chain by the rule-set's audit view gives exactly the bundle's events and story; a range
              holds exactly its versions (and is a range: from <= to).
7.  seed      the revealed seed hashes to the commitment recorded when the room was created. Skipped
              before the end (only the server holds the seed).
8.  end       the chain ends the room (``room.ended``): nothing after the head can change what it shows.
              Skipped for a room still running at export.
8b. audience  the first line says who may read the bundle as the chain (ended?) and the rules (hidden values?)
              do: a live room's bundle that claims "anyone" fails.
9.  coverage  the bundle's command records cover the WHOLE chain: versions 1..head split into spans, each
              exactly the envelopes carrying its command's id (no refused command's record among them); the
              readable commands are exactly those whose spans hold the slice's events, in order, each once.
              Skipped (as is redecide) when it carries no records.
10. redecide  (scheme-2 and -3 dice) every nonce was committed after the seed and its reveals hash to its commitment,
              as ``almanac verify`` checks them (events.forensics.redecide.committed_nonces); then
              every command from ``room.created`` to the head is decided again by ``events.step.step`` (the
              engine's own room step, dice from the revealed seed by ``events.dice``) against the state the
              commands before it decided; the events must come out byte for byte as recorded. An edit
              before the slice or after it, a dropped, swapped or inserted event, re-sealed or not, fails
              here or in coverage: no event of the chain is taken on trust.
3b. receipts  (with refusal receipts players hold, docs/bundle-format.md section 8) each is signed by a key of the
              key set given, of this room, its record the command it names refused at its version, on this history
              (the commitment head there is the one signed), its command never recorded accepted; after redecide,
              its command decided again at its version is refused with the signed code: one the rules accept is
              a false refusal (failed, naming the receipt); skipped before the seed is out.
11. refusals  each refused command in the bundle is decided again at its version and refused with the same
              code, and no command id is refused twice. Refusals write no event, so the chain does not cover
              them: one signed by its player with the key their seat registered in the chain, in the form that
              signs the version it was sent against (``events.signing``, v2: it is refused only there), is
              covered by that signature; a bundle that shows any other (unsigned, or signed in the v1 form that
              names no version) is INCOMPLETE (it rests on the operator's word) unless its player holds the
              deployment's receipt of it (given as in 3b: it must be the signed record and code), and an
              invented one never VERIFIES.

The verdict is VERIFIED only when every step ran and passed; NOT VERIFIED when one failed (damaged or
hostile input included: never an exception); else INCOMPLETE, naming each step that did not run. Whatever it is,
it states the room's dice scheme and which seats signed their commands and which did not, with what that leaves
open (events.forensics.signers, as `almanac verify` says it): the rules cannot tell an unsigned seat's command from
one the operator sent with a token it minted, so VERIFIED says so for such seats.
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Collection, Sequence
from typing import Any

import msgspec

from almanac.events import codec, commitments as cm, readable, registry, room as room_rules
from almanac.events.dice import NONCE_SCHEMES
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import CorruptEventError, RuleError, RulesNotInstalledError
from almanac.events.forensics.checkpoint_check import (
    CheckpointFailure,
    check_checkpoints,
    check_receipts,
    commitment_heads,
    trusted,
)
from almanac.events.forensics.redecide import (
    DiceMismatch,
    Refusal,
    command_spans,
    committed_nonces,
    ended_nonces_mismatch,
    public_seed,
    recheck_refusals,
    redecide,
    refused_but_recorded,
    revealed_nonces,
    seed_mismatch,
    signed_joins,
)
from almanac.events.forensics.signers import Seats, seats, seats_line
from almanac.events.forensics.tree_diff import difference_lines, tree_diff
from almanac.events.hashing import envelope_hash
from almanac.events.schema import NAME_PATTERN
from almanac.events.step import CommandRecord, decode_record

BUNDLE_FORMAT = "almanac-dispute-bundle"
BUNDLE_FORMAT_VERSION = 2  # 2: the chain carries every command record (the whole chain is re-decided)

VERIFIED, INCOMPLETE, NOT_VERIFIED = "VERIFIED", "INCOMPLETE", "NOT VERIFIED"
# Bounds of what this verifier reads (a hostile file is refused, not worked through): versions of a chain.
MAX_CHAIN = 1_000_000
CHAIN_ABOUT = ("every stored envelope of the room from version 1 to the head, base64 msgpack: the chain proof (each "
               "hash covers the one before); and every stored command record with the first version it wrote, "
               "[first_version, base64 msgpack]: each is decided again, room.created to the head")
# The parts of a bundle, each with the keys it has: nothing else is read, so nothing else may be written (a word a
# person reads that no step checks is a word a forger chooses). ``copied_as`` is optional.
_PARTS: dict[str, frozenset[str] | None] = {
    "audience": frozenset({"who", "hidden_values", "note"}), "format": None, "format_version": None, "room": None,
    "exported_at_ms": None, "exported_at": None,
    "ruleset": frozenset({"name", "version", "ref", "fingerprint", "fingerprint_of_exporter"}), "subject": None,
    "copied_as": frozenset({"room", "note"}), "head": frozenset({"version", "hash"}), "seed": None, "events": None,
    "commands": None, "refusals": None, "chain": frozenset({"about", "envelopes", "commands"}),
    # docs/bundle-format.md: the room key that opens the commitment salts, the server's signed checkpoint on the
    # head (both read by the checkpoints step) and the deployment's key set as exported (a convenience: signatures
    # are checked only with a key set given from outside, never with the bundle's own).
    "commitments": frozenset({"scheme", "room_key", "views"}), "checkpoint": None, "keys": None,
}
_SUBJECTS = {"audit_view": frozenset({"kind", "view", "item", "story"}), "versions": frozenset({"kind", "from", "to"})}


# --- the words of a bundle that follow from its chain (the exporter writes them, the verifier rebuilds them) ------


def audience(room: str, hides: bool, ended: bool) -> dict[str, Any]:
    """Who may read a bundle: anyone once the room has ended or when its rules hide nothing; else auditors only,
    for the chain carries every value hidden from the players (another player's dice and stock)."""
    if ended or not hides:
        why = "the room has ended (its seed and hidden values are public)" if ended else "its rules hide nothing"
        return {"who": "anyone", "hidden_values": False, "note": f"anyone may read this bundle: {why}"}
    return {"who": "auditors", "hidden_values": True,
            "note": f"AUDITORS ONLY: room {room!r} is live and this bundle carries values hidden from its players "
                    "(every player's dice and holdings): do not give it to a player or publish it before the "
                    "room ends"}


def seed_entry(created: Any, chain: Sequence[Envelope]) -> dict[str, Any]:
    """The bundle's ``seed`` entry: what the chain says of the room's dice (its commitment; the seed once revealed)."""
    revealed, source = public_seed(created, chain)
    if source == "challenge":
        return {"status": "challenge", "commitment": created.seed_commitment, "challenge": created.challenge,
                "revealed": None, "note": "a challenge room's dice come from its public challenge seed"}
    if revealed is not None:
        return {"status": "revealed", "commitment": created.seed_commitment, "revealed": revealed.hex(),
                "note": "the room has ended: its secret seed is revealed (in its room.ended event)"}
    return {"status": "not_revealed", "commitment": created.seed_commitment, "revealed": None,
            "note": "the room has not ended, so its secret seed is not revealed: the chain and the readable "
                    "events can be checked, but no die can be re-derived and no command re-decided; "
                    "ask for a new bundle once the room has ended"}


def copied_as(copy: str) -> dict[str, str]:
    """The bundle's ``copied_as`` entry, when it was exported from a copy of its room (``import --as``)."""
    return {"room": copy, "note": f"exported from {copy!r}, a copy of this room made by import --as; the copy is "
                                  "this history relabelled (docs/forensics.md)"}


def _whole(value: Any) -> bool:
    """A JSON whole number (not a boolean, not 5.0, not "5")."""
    return isinstance(value, int) and not isinstance(value, bool)


class Step(msgspec.Struct, kw_only=True):
    """One named check: passed, failed or skipped, and in one sentence what it proved (or why not)."""

    name: str
    status: str  # "passed", "failed", "skipped"
    detail: str
    version: int | None = None
    # A failure's two sides, named by ``sides`` (the first the authority: the chain, the stored record, what
    # was recorded; the second what is checked against it: the bundle's readable copy, a recomputation).
    recorded: Any = None
    recomputed: Any = None
    sides: tuple[str, str] = ("recorded", "recomputed")


class Verdict(msgspec.Struct, kw_only=True):
    room: str = ""
    ok: bool = False  # VERIFIED: every step ran and passed
    status: str = NOT_VERIFIED  # VERIFIED, INCOMPLETE or NOT VERIFIED
    steps: list[Step] = []
    audience: str = ""  # who the bundle says may read it (its first line), shown again with the verdict
    # The room's dice scheme and which seats signed, read from the chain once it is linked (events.forensics.signers,
    # as `almanac verify` reports them): a VERIFIED room whose seats did not sign says what that leaves open.
    seats: Seats | None = None

    @property
    def failed(self) -> Step | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def unchecked(self) -> list[str]:
        """The steps that did not run (an INCOMPLETE verdict names them)."""
        return [s.name for s in self.steps if s.status == "skipped"]

    def text(self) -> str:
        """The verdict as a person reads it."""
        first = f"bundle of room {self.room!r}: {self.status}"
        if self.status == INCOMPLETE:
            first += " (not checked: " + ", ".join(self.unchecked) + ")"
        lines = [first] + ([f"  audience: {self.audience}"] if self.audience else [])
        if self.seats is not None and self.failed is None:  # (a failed chain's seats are nobody's)
            lines += [f"  seats: {seats_line(self.seats)}"] + [f"  note: {note}" for note in self.seats.notes]
        for s in self.steps:
            where = f" (version {s.version})" if s.version is not None else ""
            lines.append(f"  [{s.status}] {s.name}{where}: {s.detail}")
            if s.status == "failed" and (s.recorded is not None or s.recomputed is not None):
                lines += [f"      {line}" for line in difference_lines(s.recorded, s.recomputed, s.sides)]
        return "\n".join(lines)


class _Failed(Exception):
    def __init__(self, step: Step) -> None:
        self.step = step


def _fail(name: str, detail: str, version: int | None = None, recorded: Any = None, recomputed: Any = None,
          sides: tuple[str, str] = ("recorded", "recomputed")) -> _Failed:
    return _Failed(Step(name=name, status="failed", detail=detail, version=version,
                        recorded=recorded, recomputed=recomputed, sides=sides))


def _skipped(name: str, detail: str) -> Step:
    return Step(name=name, status="skipped", detail=detail)


def _event_of(envelope: Envelope) -> Any:
    view = codec.to_builtins(envelope)
    try:
        view["event"] = codec.to_builtins(codec.decode_event(envelope))
        del view["payload"]
    except (CorruptEventError, RulesNotInstalledError):
        pass
    return view


def _differences(recorded: Envelope, recomputed: Envelope) -> list[str]:
    """The paths of the fields (event fields first, to the leaf: ``event.buyer.dice[1]``) in which two envelopes
    differ, for the message (not the hash: it differs because they do)."""
    # Not the chain hashes: each side's own chain (the recomputed one starts from this machine's room.created).
    names = [path for path, _, _ in tree_diff(_event_of(recorded), _event_of(recomputed))
             if path not in ("hash", "previous_hash")]
    return sorted(names, key=lambda path: not path.startswith("event")) or ["bytes"]


def parse_expected_head(text: str) -> tuple[int | None, str]:
    """``HASH`` (the head itself) or ``VERSION:HASH`` (the chain's hash at an earlier version) -> (version, hash);
    ValueError when it is neither."""
    version, colon, digest = text.strip().lower().rpartition(":")
    if colon and not (version.isascii() and version.isdigit() and len(version) <= 9):  # "١٢" is not a version
        raise ValueError(f"expected a head as HASH or VERSION:HASH, not {text!r}")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"a head hash is 64 lowercase hex digits, not {digest!r}")
    return (int(version) if colon else None), digest


def verify_bundle(bundle: Any, expect_head: str | None = None, *,
                  anchors: Sequence[tuple[str, str]] = (), stored_refusals: Collection[bytes] | None = None,
                  checkpoints: Sequence[Any] | None = None, keys: Any = None,
                  receipts: Sequence[Any] | None = None) -> Verdict:
    """Check a bundle (parsed JSON) step by step; the verdict names every step, the first failure and what did
    not run. ``expect_head``: a head you obtained elsewhere (``HASH`` or ``VERSION:HASH``); ``anchors``: more
    such heads, each with who vouches for it (``("12:ab…", "the server's own chain")``); ``stored_refusals``: the
    refusal records a server holding the room stored (each refusal shown must be one); ``checkpoints``: signed
    checkpoints players hold (any number, any player), checked with the key set ``keys`` (docs/bundle-format.md;
    a ``VERSION:HASH`` head may also be a checkpoint's commitment head); ``receipts``: signed refusal receipts
    players hold (docs/bundle-format.md section 8), checked with ``keys`` too, each decided again at its version
    (step ``receipts``: one the rules accept there is a false refusal). Never raises on any input: a damaged or
    hostile bundle is a failed step."""
    verdict = Verdict(room=str(bundle.get("room", ""))[:200] if isinstance(bundle, dict) else "")
    at = ["format"]  # the step under way, named if the input breaks it
    heads = ([(expect_head, "you")] if expect_head is not None else []) + list(anchors)
    try:
        _run(bundle, verdict, heads, stored_refusals, at, checkpoints, keys, list(receipts or []))
    except _Failed as failure:
        verdict.steps.append(failure.step)
    except RecursionError:
        verdict.steps.append(Step(name=at[0], status="failed", detail="the bundle is nested too deeply to read"))
    except Exception as error:  # noqa: BLE001 - a hostile file must give a failed step, whatever breaks
        # A hostile or damaged file (or a chain whose events the rules cannot fold: an army healed that does not
        # exist): a failed step naming the step that broke and how, never an exception out of the verifier.
        verdict.steps.append(Step(name=at[0], status="failed",
                                  detail=f"the bundle is malformed or its events cannot be followed ({at[0]}): "
                                         f"{type(error).__name__}: {str(error)[:300]}"))
    if verdict.failed is not None:
        verdict.status, verdict.ok = NOT_VERIFIED, False
    elif verdict.unchecked:
        verdict.status, verdict.ok = INCOMPLETE, False
    else:
        verdict.status, verdict.ok = VERIFIED, True
    return verdict


def _seats(chain: list[Envelope], records: Any) -> Seats | None:
    """The room's dice scheme and who signed (events.forensics.signers), the joins' signatures checked against the
    bundle's command records that decode (a record that does not is the coverage step's to name); None when the
    chain does not open with a readable room.created (the rules step names that)."""
    try:
        created = codec.decode_event(chain[0])
        if not isinstance(created, room_rules.RoomCreated):
            return None
        decoded = []
        for pair in records or []:
            try:
                decoded.append(decode_record(base64.b64decode(pair[1], validate=True)))
            except (TypeError, ValueError, IndexError, KeyError, msgspec.DecodeError, msgspec.ValidationError):
                continue
        return seats(created.dice_scheme, chain, decoded)
    except (CorruptEventError, RulesNotInstalledError, TypeError, ValueError):
        return None


def _checkpoint_step(bundle: dict, room: str, chain: list[Envelope], checkpoints: Sequence[Any] | None,
                     keys: Any) -> tuple[Step | None, list[bytes] | None]:
    """The commitment chain recomputed from the envelopes and their salts, and every signed checkpoint given (the
    players') or carried (the server's own on the bundle's head) checked against it with the key set ``keys``
    (checkpoint_check). No step when there is nothing to check it with."""
    given = list(checkpoints or [])
    try:
        commit_heads = commitment_heads(bundle, chain)
        if commit_heads is None:
            if given:
                raise CheckpointFailure("the bundle carries no commitment openings (no commitments section), so no "
                                        "checkpoint can be checked against it")
            return None, None
        if keys is None:
            if given:
                raise CheckpointFailure("checkpoints were given but no key set to check their signatures with (the "
                                        "deployment's /.well-known/almanac-keys.json)")
            # The bundle's own checkpoint is signed by a key the bundle itself names: checking it would prove
            # nothing, not even against an outsider.
            return None, commit_heads
        own = bundle.get("checkpoint")
        if not given and own is None:
            return None, commit_heads  # nothing signed to check
        check_checkpoints(room, commit_heads, given + ([own] if own is not None else []), trusted(keys))
    except CheckpointFailure as failure:
        return Step(name="checkpoints", status="failed", detail=failure.detail, version=failure.version,
                    recorded=failure.recorded, recomputed=failure.recomputed, sides=failure.sides), None
    through = f"{len(given)} checkpoint(s) held by players" if given else "no player's checkpoint (none given)"
    return Step(name="checkpoints", status="passed", detail=f"the commitment chain, recomputed from the envelopes "
                f"and their salts, ends at head {commit_heads[-1].hex()[:16]}…; the history passes through {through}"
                + (" and the server's signature on the bundle's head" if own is not None else "")
                + ", every signature valid under the key set given"), commit_heads


def _run(bundle: Any, verdict: Verdict, heads: list[tuple[str, str]], held_refusals: Collection[bytes] | None,
         at: list[str], checkpoints: Sequence[Any] | None = None, keys: Any = None,
         receipts: list[Any] | None = None) -> None:
    passed = verdict.steps.append

    # 1. format
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise _fail("format", f"not a dispute bundle (format is not {BUNDLE_FORMAT!r})")
    said = bundle.get("audience")  # shown with the verdict; the audience step checks it against the chain
    if isinstance(said, dict) and isinstance(said.get("note"), str):
        verdict.audience = said["note"][:500]
    if not _whole(bundle.get("format_version")) or bundle["format_version"] != BUNDLE_FORMAT_VERSION:
        raise _fail("format", f"format_version {bundle.get('format_version')!r}; this verifier reads "
                    f"{BUNDLE_FORMAT_VERSION} (format 1 carried only the slice's commands: ask for a new bundle)")
    unread = sorted(set(bundle) - set(_PARTS)) + [
        f"{part}.{key}" for part, keys in _PARTS.items() if keys is not None and isinstance(bundle.get(part), dict)
        for key in sorted(set(bundle[part]) - keys)]
    if unread:
        raise _fail("format", "the bundle has parts no step reads (a forger's words): " + ", ".join(unread[:10]))
    try:
        room = bundle["room"]
        head = bundle["head"]
        if not (_whole(head["version"]) and _whole(bundle["exported_at_ms"])):
            raise TypeError("head.version and exported_at_ms are whole numbers")
        if bundle["exported_at"] != readable.utc_text(bundle["exported_at_ms"]):
            raise ValueError("exported_at is not exported_at_ms as UTC")
        raws = [base64.b64decode(text, validate=True) for text in bundle["chain"]["envelopes"]]
        events, commands, refusals = bundle["events"], bundle["commands"], bundle["refusals"]
        seed_info, ruleset = bundle["seed"], bundle["ruleset"]
        head_version, head_hash = int(head["version"]), str(head["hash"])
        records = bundle["chain"].get("commands")
        if bundle["chain"].get("about") != CHAIN_ABOUT or ("copied_as" in bundle and not (
                isinstance(bundle["copied_as"].get("room"), str)
                and bundle["copied_as"] == copied_as(bundle["copied_as"]["room"]))):
            raise ValueError("chain.about or copied_as is not the text the exporter writes")
        if not (isinstance(room, str) and re.fullmatch(NAME_PATTERN, room) and isinstance(events, list) and isinstance(commands, list)
                and isinstance(refusals, list) and isinstance(seed_info, dict) and isinstance(ruleset, dict)
                and (records is None or isinstance(records, list))):
            raise TypeError("room (a room id: ASCII letters, digits, _ . -), events, commands, refusals, seed, ruleset "
                            "or chain.commands has the wrong type")
        if not all(isinstance(e, dict) for e in events + commands + refusals):
            raise TypeError("an entry of events, commands or refusals is not an object")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise _fail("format", f"a required part is missing or malformed: {error!r}") from None
    if not 1 <= head_version <= MAX_CHAIN:
        raise _fail("format", f"the head is version {head_version}: a chain holds 1..{MAX_CHAIN} versions")
    passed(Step(name="format", status="passed", detail=f"a dispute bundle of room {room!r}, "
                f"{len(events)} event(s), {len(commands)} command(s), {len(refusals)} refusal(s)"))

    # 2. chain
    at[0] = "chain"
    if len(raws) != head_version:
        raise _fail("chain", f"the chain holds {len(raws)} envelopes but the head is version {head_version}: "
                    "an event was dropped or added", recorded=head_version, recomputed=len(raws),
                    sides=("stated", "counted"))
    chain: list[Envelope] = []
    previous = GENESIS_HASH
    for version, data in enumerate(raws, start=1):
        try:
            envelope = codec.decode_envelope(data, room, version)
        except CorruptEventError as error:
            raise _fail("chain", f"entry {version} is not envelope {version} of this room: {error.reason}", version) from None
        if envelope.previous_hash != previous:
            raise _fail("chain", "the entry does not link to the hash of the entry before it (dropped, inserted "
                        "or reordered)", version, recorded=envelope.previous_hash, recomputed=previous)
        own = envelope_hash(envelope)
        if own != envelope.hash:
            raise _fail("chain", "the entry's content does not match its hash (altered after sealing)",
                        version, recorded=envelope.hash, recomputed=own)
        previous = envelope.hash
        chain.append(envelope)
    if previous != head_hash:
        raise _fail("chain", "the chain does not end at the stated head hash", head_version,
                    recorded=head_hash, recomputed=previous, sides=("stated", "recomputed"))
    passed(Step(name="chain", status="passed", detail=f"versions 1..{head_version} are linked and unaltered, ending at "
                f"head {head_hash[:16]}…"))
    verdict.seats = _seats(chain, records)

    # 3. checkpoints: the commitment chain passes through every signed checkpoint players hold
    at[0] = "checkpoints"
    step, commit_heads = _checkpoint_step(bundle, room, chain, checkpoints, keys)
    if step is not None:
        if step.status == "failed":
            raise _Failed(step)
        passed(step)
    signed = step is not None
    receipted = _receipts_held(room, commit_heads, chain, receipts or [], keys, at)

    # 3. anchor: heads from outside the bundle (the chain must pass through each)
    at[0] = "anchor"
    # The signed checkpoints reach as far as the latest one a player holds. The bundle's own checkpoint on its head
    # is signed by the deployment that exported it: it vouches for the head against anyone but that deployment, and
    # so for nothing against the operator, whose forged history it would sign just as well.
    signed_reach = max((cp["version"] for cp in checkpoints or [] if isinstance(cp, dict) and _whole(cp.get("version"))),
                       default=0) if signed else 0
    if not heads and not signed_reach:
        own = (" (the bundle's own checkpoint is the exporting deployment's signature: the operator's word)"
               if signed else "")
        verdict.steps.append(_skipped("anchor", f"nothing outside the bundle vouches for its head{own}: the operator, "
                                      "or a forger, can invent a whole room that passes every other step; give a "
                                      "head you got elsewhere (--expect-head HASH or VERSION:HASH) or checkpoints "
                                      "players hold (--checkpoints FILE, --keys)"))
    anchored, reach = [], 0
    for text, source in heads:
        try:
            version, digest = parse_expected_head(text)
        except ValueError as error:
            raise _fail("anchor", f"the head {source} expected: {error}") from None
        version = head_version if version is None else version
        if not 1 <= version <= head_version:
            raise _fail("anchor", f"the head {source} expected is at version {version}, beyond this chain "
                        f"(1..{head_version})", version, recorded=head_version, recomputed=version,
                        sides=("bundle", "expected"))
        if chain[version - 1].hash != digest and (commit_heads is None or commit_heads[version - 1].hex() != digest):
            raise _fail("anchor", f"the chain does not pass through the head {source} expected at version "
                        f"{version}: another history", version, recorded=chain[version - 1].hash, recomputed=digest,
                        sides=("bundle", "expected"))
        anchored.append(f"{source} at version {version} ({digest[:16]}…)")
        reach = max(reach, version)
    if signed_reach:
        anchored.append("the deployment's signed checkpoints players hold (step checkpoints)")
        reach = max(reach, min(signed_reach, head_version))
    if anchored and reach == head_version:
        passed(Step(name="anchor", status="passed", detail="the chain passes through the head expected by "
                    + "; by ".join(anchored)))
    elif anchored:
        # Consistent so far, but versions after the last anchor rest on the rules alone: whoever holds the seed (the
        # operator; everyone, once the room has ended) can decide other commands there that the rules accept.
        verdict.steps.append(_skipped("anchor", "the chain passes through the head expected by " + "; by ".join(anchored)
                                      + f", but nothing outside the bundle vouches for versions {reach + 1}.."
                                      f"{head_version}: whoever holds the seed (everyone, once the room has ended) "
                                      "can decide other commands there; give a head at version "
                                      f"{head_version}"))

    # 4. readable
    at[0] = "readable"
    for entry in events:
        version = entry.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= head_version:
            raise _fail("readable", f"an event entry names version {version!r}, outside the chain")
        # The entry the chained envelope gives (decoded once); an honest entry is exactly it, payload copy optional.
        truth = {k: v for k, v in readable.event_entry(raws[version - 1], room, version).items() if k != "raw"}
        shown = {k: v for k, v in entry.items() if k != "raw"}
        shown.setdefault("payload", truth["payload"])
        if readable.same_json(shown, truth):
            continue
        wrong = readable.check_event_entry(entry, chain[version - 1])  # which part lies, for the message
        if wrong is not None:
            raise _fail("readable", f"event entry {version} does not say what the chain holds: {wrong}", version,
                        recorded=_event_of(chain[version - 1]).get("event"), recomputed=entry.get("event"),
                        sides=("chained", "readable"))
        # Every other word a person reads (summary, time) is the chained envelope's too, and nothing is added.
        raise _fail("readable", f"event entry {version} reads otherwise than its chained envelope (its summary, "
                    "time or an added field)", version, recorded=truth, recomputed=shown, sides=("chained", "readable"))
    passed(Step(name="readable", status="passed",
                detail=f"each of the {len(events)} readable event(s) is exactly the chained envelope it names"))

    # 5. rules
    at[0] = "rules"
    try:
        created = codec.decode_event(chain[0])
    except RulesNotInstalledError as error:
        raise _fail("rules", f"this machine lacks the room's rules: {error.message}", 1) from None
    if not isinstance(created, room_rules.RoomCreated):
        raise _fail("rules", f"the first event is {chain[0].type}, not room.created", 1)
    ref = f"{created.ruleset}@{created.ruleset_version}"
    chained = {"name": created.ruleset, "version": created.ruleset_version, "ref": ref,
               "fingerprint": created.fingerprint}
    if any(ruleset.get(key) != value or type(ruleset.get(key)) is not type(value) for key, value in chained.items()):
        raise _fail("rules", "the bundle's rule-set does not match the room's room.created event", 1,
                    recorded=chained, recomputed=ruleset, sides=("chained", "readable"))
    try:
        rules = registry.at(created.ruleset, created.ruleset_version)
    except (RulesNotInstalledError, RuleError) as error:
        raise _fail("rules", f"this machine cannot decide {ref}: {error}", 1) from None
    same = rules.fingerprint == created.fingerprint
    passed(Step(name="rules", status="passed", detail=f"the room is decided by {ref}; this machine has it with "
                f"fingerprint {rules.fingerprint[:16]}…, " + ("the same code the room recorded" if same else
                f"NOT the fingerprint the room recorded ({created.fingerprint[:16] or 'none'}…): the code differs, "
                "so the re-decision below checks the recorded events against this machine's code")))

    # 6. subject: the slice is all of what it claims to be (the audit view told again from the chain)
    at[0] = "subject"
    subject = bundle.get("subject")
    if isinstance(subject, dict) and set(subject) != _SUBJECTS.get(subject.get("kind"), set(subject)):
        raise _fail("subject", f"the subject has other parts than a {subject.get('kind')!r} subject has: "
                    f"{sorted(set(subject) ^ _SUBJECTS[subject['kind']])}")
    slice_versions = [entry["version"] for entry in events]
    if any(b <= a for a, b in itertools.pairwise(slice_versions)):
        raise _fail("subject", "the bundle's events are not in version order, each once (reordered or repeated)")
    if isinstance(subject, dict) and subject.get("kind") == "audit_view":
        offered = rules.audit_view(subject["view"]) if isinstance(subject["view"], str) else None
        if offered is None or not isinstance(subject["item"], str):
            raise _fail("subject", f"{ref} has no audit view {subject.get('view')!r} or the item is not a name")
        story = offered.steps([(e, codec.decode_event(e)) for e in chain], subject["item"])
        if not story:  # the exporter answers 404 for an item the chain does not hold: a bundle of nothing is a lie
            raise _fail("subject", f"the chain holds no {subject['view']} {subject['item']!r}")
        told = sorted({int(s["version"]) for s in story})
        if told != slice_versions or not readable.same_json(codec.to_builtins(story), subject.get("story")):
            raise _fail("subject", f"the {subject.get('view')} {subject.get('item')!r} told again from the chain is not "
                        "the bundle's story and events (one left out, or one added)", None,
                        recorded=told, recomputed=slice_versions, sides=("chained", "readable"))
        passed(Step(name="subject", status="passed", detail=f"the {subject.get('view')} {subject.get('item')!r}, told "
                    f"again from the chain by {ref}'s audit view, is exactly the bundle's {len(told)} event(s) and story"))
    elif isinstance(subject, dict) and subject.get("kind") == "versions":
        low, high = subject.get("from"), subject.get("to")
        if not (_whole(low) and _whole(high) and 1 <= low <= high <= head_version):
            raise _fail("subject", f"versions {low!r}..{high!r} is not a range of this chain (1..{head_version}, "
                        "from <= to)")
        if slice_versions != list(range(low, high + 1)):
            raise _fail("subject", f"the bundle's events are not exactly versions {low}..{high}")
        passed(Step(name="subject", status="passed", detail=f"the events are exactly versions {low}..{high}"))
    else:
        raise _fail("subject", "the bundle names no subject (an audit view's item or a version range)")

    # 7. seed (taken from the chain itself: the room.ended event; the bundle's copy must agree)
    at[0] = "seed"
    seed, source = public_seed(created, chain)
    told = seed_entry(created, chain)  # the whole entry, its note included: every word of it follows from the chain
    if not readable.same_json(seed_info, told):
        raise _fail("seed", "the bundle's seed entry does not say what the chain does", 1, recorded=told,
                    recomputed=seed_info, sides=("chained", "readable"))
    if source == "challenge":
        passed(Step(name="seed", status="passed", detail=f"a challenge room: its dice come from the public challenge "
                    f"{created.challenge!r}, which anyone can derive (and so anyone could predict)"))
    elif seed is not None:
        if (wrong_seed := seed_mismatch(created, seed)) is not None:  # the one check `almanac verify` runs too
            raise _fail("seed", "the revealed seed does not hash to the commitment made when the room was created",
                        1, recorded=wrong_seed.recorded, recomputed=wrong_seed.recomputed,
                        sides=("committed", "revealed"))
        passed(Step(name="seed", status="passed", detail="the seed revealed at the end hashes to the commitment "
                    f"{created.seed_commitment[:16]}… recorded at creation: it was fixed before play"))
    else:
        verdict.steps.append(_skipped("seed", "the room has not ended: its seed is secret, so no die can be "
                                      "re-derived and no command re-decided; ask again after the room ends"))
    nonces = revealed_nonces(chain)  # scheme-2 dice: the players' nonces, revealed by the room's end

    # 8. end: a bundle cut before room.ended shows a history that may still go on
    at[0] = "end"
    ended = next((e.version for e in reversed(chain) if e.type == "room.ended"), None)
    if ended is None:
        verdict.steps.append(_skipped("end", f"the room had not ended at export (head version {head_version}): "
                                      "what came after is not in this bundle"))
    elif ended != head_version:
        raise _fail("end", f"events follow the room's end (room.ended at version {ended}, head {head_version})",
                    ended + 1)
    else:
        passed(Step(name="end", status="passed", detail=f"the chain ends the room (room.ended at version {ended}): "
                    "no later event can change what it shows"))

    # 8b. audience: who may read the bundle follows from the chain (ended?) and the rules (hide anything?)
    at[0] = "audience"
    who = audience(room, bool(rules.decider.secrets), ended is not None)
    if not readable.same_json(bundle.get("audience"), who):
        raise _fail("audience", "the bundle's first line does not say who may read it as its chain and rules do",
                    None, recorded=who, recomputed=bundle.get("audience"), sides=("chained", "readable"))
    passed(Step(name="audience", status="passed", detail=f"the first line says what the chain and rules do: {who['who']}"
                + (" (the room is live and its rules hide values)" if who["hidden_values"] else "")))

    # 9. coverage: the command records split the WHOLE chain into spans, each exactly its command's events
    at[0] = "coverage"
    if not records:
        for name in ("coverage", "redecide"):
            verdict.steps.append(_skipped(name, "the bundle carries no command records, so no event can be tied to "
                                          "the command that decided it, nor any command decided again"))
        _receipts_redecided(verdict, receipted, chain, None, None, at)
        _refusals(verdict, refusals, chain, None, None, held_refusals, at, receipted=receipted)
        return
    stored: list[tuple[int, bytes]] = []
    for index, pair in enumerate(records):
        if not (isinstance(pair, list) and len(pair) == 2 and _whole(pair[0]) and isinstance(pair[1], str)):
            raise _fail("coverage", f"command record {index} is not [first_version, base64]")
        stored.append((pair[0], base64.b64decode(pair[1], validate=True)))
    firsts = [first for first, _ in stored]
    if firsts[0] != 1 or any(b <= a for a, b in itertools.pairwise(firsts)) or firsts[-1] > head_version:
        raise _fail("coverage", "the command records do not start at version 1 and go up within the chain "
                    "(a record left out or out of order)", recorded=f"1..{head_version}", recomputed=firsts[:20],
                    sides=("chained", "claimed"))
    spans: list[tuple[int, int, CommandRecord]] = []
    by_first: dict[int, tuple[int, bytes]] = {}
    for first, last, data in command_spans(stored, head_version):
        try:
            record = decode_record(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise _fail("coverage", f"the command record at version {first} does not decode: {error}", first) from None
        if record.room != room:
            raise _fail("coverage", f"the command record at version {first} is of room {record.room!r}", first)
        if record.refused_at_version is not None:
            raise _fail("coverage", f"the command record at version {first} is a refused command's (refused at "
                        f"version {record.refused_at_version}), yet it stands for events of the chain", first)
        inside = {e.command_id for e in chain[first - 1:last]}
        before = chain[first - 2].command_id if first > 1 else None
        if inside != {record.command_id} or record.command_id == before:
            raise _fail("coverage", f"versions {first}..{last} are not exactly the events of command "
                        f"{record.command_id!r} (an event inserted, dropped or moved)", first,
                        recorded=sorted(inside), recomputed=record.command_id, sides=("chained", "claimed"))
        spans.append((first, last, record))
        by_first[first] = (last, data)
    for entry in commands:  # the slice's readable commands: each one of the whole chain's records, told truly
        first, last = entry.get("first_version"), entry.get("last_version")
        if not (_whole(first) and _whole(last)):
            raise _fail("coverage", f"a command entry names versions {first!r}..{last!r}, not whole numbers")
        if first not in by_first or by_first[first][0] != last:
            raise _fail("coverage", f"the readable command at versions {first}..{last} is not a command span of "
                        "the chain", first)
        data = by_first[first][1]
        truth = {**readable.record_entry(data), "first_version": first, "last_version": last}
        if "raw" in entry:  # an optional second copy of the stored bytes: it must be the same
            truth["raw"] = readable.b64(data)
        if not readable.same_json(entry, truth):
            record = codec.to_builtins(decode_record(data))
            raise _fail("coverage", f"the readable command {record['command_id']!r} is not its stored record", first,
                        recorded=record if entry.get("command") != record else truth,
                        recomputed=entry.get("command") if entry.get("command") != record else entry,
                        sides=("stored", "readable"))
    # Exactly the commands whose spans hold the slice's events, in order, each once: a command shown twice reads
    # as sent twice, one left out leaves an event with no command that decided it.
    wanted = set(slice_versions)
    deciding = [first for first, last, _ in spans if any(v in wanted for v in range(first, last + 1))]
    shown = [entry["first_version"] for entry in commands]
    if shown != deciding:
        raise _fail("coverage", "the readable commands are not exactly the commands that decided the slice's events, "
                    "in order, each once (one repeated, left out or added)", recorded=deciding[:20],
                    recomputed=shown[:20], sides=("chained", "readable"))
    passed(Step(name="coverage", status="passed", detail=f"the {len(spans)} command record(s) cover versions "
                f"1..{head_version}, each span exactly that command's events; the slice's {len(commands)} readable "
                "command(s) are among them"))
    if seed is None:
        verdict.steps.append(_skipped("redecide", "needs the seed, revealed when the room ends"))
        _receipts_redecided(verdict, receipted, chain, None, None, at)
        _refusals(verdict, refusals, chain, None, None, held_refusals, at, receipted=receipted)
        return

    # 10. redecide: every command from room.created on (events.forensics.redecide), not only the slice's. The
    # players' nonces are dice too: a scheme-2 chain holds every commitment and reveal, so it is checked as
    # `almanac verify` checks it (each commitment after the seed's, each reveal against its commitment) first.
    at[0] = "redecide"
    if created.dice_scheme in NONCE_SCHEMES:
        found = committed_nonces(chain)
        wrong_dice = found if isinstance(found, DiceMismatch) else (
            ended_nonces_mismatch(found, seed) if found.ended is not None else None)
        if wrong_dice is not None:
            # ("order" compares server times: the join's against the seed commitment's)
            sides = ("committed", "revealed") if wrong_dice.check == "nonce" else ("joined at", "seed committed at")
            raise _fail("redecide", wrong_dice.message, wrong_dice.version, recorded=wrong_dice.recorded,
                        recomputed=wrong_dice.recomputed, sides=sides)
    checked = redecide(chain, spans, seed, rules.ref, nonces=nonces)
    wrong = checked.mismatch
    if wrong is not None and wrong.reason == "refused" and isinstance(wrong.recorded, list) and wrong.error is not None:
        error = wrong.error
        raise _fail("redecide", f"command {wrong.command_id!r} decided again is refused ({error.code}: "
                    f"{error.message}), but the chain records its events", wrong.version,
                    recorded=[_event_of(e) for e in wrong.recorded], recomputed=error.to_dict(),
                    sides=("recorded", "re-decided"))
    if wrong is not None and wrong.reason == "undecodable":
        raise _fail("redecide", f"the command record at version {wrong.version} does not decode: {wrong.detail}",
                    wrong.version)
    if wrong is not None and wrong.reason == "repeated":
        raise _fail("redecide", wrong.detail, wrong.version)
    if wrong is not None:
        theirs, mine = wrong.recorded, wrong.recomputed
        if isinstance(theirs, list):
            theirs = theirs[0] if theirs else None
        what = "missing" if mine is None else "extra" if theirs is None else ", ".join(_differences(theirs, mine))
        raise _fail("redecide", f"command {wrong.command_id!r} decided again with {ref} and the dice "
                    f"re-derived from the seed gives other events (differs in: {what})", wrong.version,
                    recorded=None if theirs is None else _event_of(theirs),
                    recomputed=None if mine is None else _event_of(mine), sides=("recorded", "re-decided"))
    passed(Step(name="redecide", status="passed", detail=f"each of the {len(spans)} command(s) of the whole chain, "
                f"room.created to the head, decided again by {ref} with its dice re-derived from the seed, gives "
                "exactly the recorded events"))
    _receipts_redecided(verdict, receipted, chain, seed, nonces, at)
    _refusals(verdict, refusals, chain, seed, nonces, held_refusals, at,
              joins_signed=signed_joins(chain, [record for _, _, record in spans]), receipted=receipted)


_Receipted = list[tuple[Any, CommandRecord, bytes]]


def _receipts_held(room: str, commit_heads: list[bytes] | None, chain: list[Envelope], receipts: list[Any],
                   keys: Any, at: list[str]) -> _Receipted:
    """The refusal receipts given, each checked against the chain (checkpoint_check.check_receipts) with the key set
    given from outside; a contradiction fails step ``receipts`` naming the receipt."""
    if not receipts:
        return []
    at[0] = "receipts"
    try:
        if keys is None:
            raise CheckpointFailure("refusal receipts were given but no key set to check their signatures with (the "
                                    "deployment's /.well-known/almanac-keys.json)")
        return check_receipts(room, commit_heads, chain, receipts, trusted(keys))
    except CheckpointFailure as failure:
        raise _Failed(Step(name="receipts", status="failed", detail=failure.detail, version=failure.version,
                           recorded=failure.recorded, recomputed=failure.recomputed, sides=failure.sides)) from None


def _receipts_redecided(verdict: Verdict, receipted: _Receipted, chain: list[Envelope], seed: bytes | None,
                        nonces: Any, at: list[str]) -> None:
    """10b. receipts: each refusal the deployment signed is decided again at its version against the chain and
    refused there with the signed code; one the rules accept is a false refusal (the step fails naming it)."""
    if not receipted:
        return
    at[0] = "receipts"
    if seed is None:
        verdict.steps.append(_skipped("receipts", f"{len(receipted)} refusal receipt(s) are validly signed and on "
                                      "this history, but deciding their commands again needs the seed (revealed "
                                      "when the room ends): whether the refusals were true is not checked"))
        return
    for receipt, record, _ in receipted:
        label = cm.receipt_label(receipt)
        _, wrong = recheck_refusals(chain, [Refusal(record=record, error={"code": receipt["code"]})], seed,
                                    nonces=nonces)
        if wrong is None:
            continue
        if wrong.recomputed is None:
            raise _fail("receipts", f"false refusal: {label} signs that command {record.command_id!r} of "
                        f"{record.player!r} was refused ({receipt['code']}) at version {receipt['version']}, but the "
                        "rules decide it again there and accept it", receipt["version"],
                        recorded=receipt["code"], recomputed="accepted", sides=("signed refusal", "re-decided"))
        raise _fail("receipts", f"{label}: its command decided again at version {receipt['version']} is refused for "
                    "another reason than the one signed", receipt["version"], recorded=receipt["code"],
                    recomputed=wrong.recomputed.to_dict(), sides=("signed refusal", "re-decided"))
    verdict.steps.append(Step(name="receipts", status="passed", detail=f"each of the {len(receipted)} refusal "
                              "receipt(s) is signed by a trusted key on this history, and its command decided again "
                              "at its version is refused with the signed code: the refusals were true"))


def _refusals(verdict: Verdict, refusals: list[Any], chain: list[Envelope], seed: bytes | None,
              nonces: Any, stored: Collection[bytes] | None, at: list[str], joins_signed: Collection[str] = (),
              receipted: _Receipted = ()) -> None:
    """11. refusals: each one refused again with its code; any shown leaves the verdict INCOMPLETE (not chained)
    unless its player signed it or holds the deployment's receipt of it."""
    at[0] = "refusals"
    by_receipt = {record.command_id: (raw, receipt) for receipt, record, raw in receipted}
    kept = []
    for entry in refusals:
        try:
            data = base64.b64decode(entry["raw"], validate=True)
            record = decode_record(data)
        except (KeyError, TypeError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as error:
            raise _fail("refusals", f"a refusal entry is malformed: {error!r}") from None
        if stored is not None and data not in stored:
            raise _fail("refusals", f"refused command {record.command_id!r} is not among the refusals the server "
                        "holding this room stored (an invented refusal)", record.refused_at_version)
        error_entry = entry.get("error")
        truth = {**readable.record_entry(data), "raw": entry["raw"], "error": error_entry}
        if not readable.same_json(entry, truth):
            raise _fail("refusals", f"the readable refusal {record.command_id!r} is not its stored record",
                        record.refused_at_version, recorded=truth, recomputed=entry, sides=("stored", "readable"))
        kept.append(Refusal(record=record, error=error_entry if isinstance(error_entry, dict) else None))
        signed_for = by_receipt.get(record.command_id)
        if signed_for is not None and (signed_for[0] != data or (kept[-1].error or {}).get("code") != signed_for[1]["code"]):
            raise _fail("refusals", f"refused command {record.command_id!r} is not shown as the deployment signed its "
                        f"refusal ({cm.receipt_label(signed_for[1])}): another record or code",
                        record.refused_at_version, recorded=signed_for[1]["code"],
                        recomputed=(kept[-1].error or {}).get("code"), sides=("signed refusal", "bundle"))
    first_shown: dict[str, int | None] = {}
    for refusal in kept:
        record = refusal.record
        if record.seen_version is not None and record.seen_version != record.refused_at_version:
            raise _fail("refusals", f"refused command {record.command_id!r} names version {record.seen_version} (the "
                        f"version its client saw) but is shown refused at version {record.refused_at_version}: a "
                        "command naming its version is refused only there (events.step.step)",
                        record.refused_at_version)
        if record.command_id in first_shown:
            raise _fail("refusals", f"refused command {record.command_id!r} is shown refused twice (at versions "
                        f"{first_shown[record.command_id]} and {record.refused_at_version}): a command id is decided "
                        "once, a resend gets its stored outcome", record.refused_at_version)
        first_shown[record.command_id] = record.refused_at_version
    twice = refused_but_recorded(chain, kept)  # (needs no seed: checked before deciding anything again)
    if twice is not None:
        raise _fail("refusals", f"refused command {twice.refusal.record.command_id!r} is recorded accepted at "
                    f"version {twice.decided_at} of the chain: a command id is decided once",
                    twice.refusal.record.refused_at_version)
    if not kept:
        verdict.steps.append(Step(name="refusals", status="passed", detail="the bundle claims no refused command "
                                  "(refusals write no event: the chain cannot show that none happened)"))
        return
    if seed is None:
        verdict.steps.append(_skipped("refusals", f"{len(kept)} refusal(s) shown: deciding them again needs the seed; "
                                      "and refusals are not in the chain, so they rest on the operator's word"))
        return
    signed: list[Refusal] = []
    rechecked, refused = recheck_refusals(chain, kept, seed, nonces=nonces, signed=signed, joins_signed=joins_signed)
    # A receipt shows the deployment answered that refusal then, at that version (the receipts step checked its
    # signature and the history it stands on), not who sent the command: the deployment signs the refusal of
    # whatever it is sent, its own inventions included. It covers a refusal only of a seat that does not sign
    # (whose every command the operator could have sent anyway: the seats note says so); a signing seat's refusal
    # is covered by its player's signature alone.
    # (and only of a name the chain seated: a receipt for a name that never joined covers nothing either)
    seated = {envelope.player for envelope in chain if envelope.type in ("room.created", "room.player_joined")}
    signed += [r for r in kept if r.record.command_id in by_receipt and r not in signed
               and r.record.player not in joins_signed and r.record.player in seated]
    if refused is not None:
        command_id = refused.refusal.record.command_id
        if not refused.placed:
            raise _fail("refusals", f"refused command {command_id!r} names no version of the chain")
        if refused.recomputed is not None:
            raise _fail("refusals", f"refused command {command_id!r} is now refused for another reason",
                        refused.version, recorded=refused.refusal.error, recomputed=refused.recomputed.to_dict(),
                        sides=("recorded", "re-decided"))
        raise _fail("refusals", f"refused command {command_id!r} would be accepted", refused.version,
                    recorded=refused.refusal.error, recomputed="accepted", sides=("recorded", "re-decided"))
    # Consistent with the rules, but a refusal writes no event: nothing chained shows the player sent it, unless
    # the player signed it with the key the chain registered for their seat by a signed join (then it is theirs).
    if len(signed) == len(kept):
        verdict.steps.append(Step(name="refusals", status="passed", detail=f"each of the {rechecked} refused "
                                  "command(s) shown is signed by its player with the key their seat registered in "
                                  "the chain, over the version it is shown refused at, or (a seat that does not "
                                  "sign) answered with the deployment's signed receipt given here, and refused again "
                                  "with its recorded code: covered by the signature (a receipt shows the deployment "
                                  "answered the refusal; that the player sent the command only if the player is who "
                                  "handed in the receipt)"))
        return
    held = " and each is one the server holding the room stored," if stored is not None else ""
    unsigned = len(kept) - len(signed)
    verdict.steps.append(_skipped("refusals", f"each of the {rechecked} refused command(s) shown is refused again "
                                  f"with its recorded code,{held} but {unsigned} of them not signed by a seat that "
                                  "registered a key over the version it is shown at (unsigned, or signed in the v1 "
                                  "form, which names no version), and refusals write no event: the chain does not cover those, so "
                                  "they rest on the operator's word (an invented one cannot be told from a real one)"))
