"""Verify a dispute bundle offline: no Redis, no server, only this package's pure rules and msgspec.

    almanac verify-bundle bundle.json        or, in Python (this module reads no file itself: events/ does no I/O):
    from almanac.events.forensics.bundle_check import verify_bundle
    print(verify_bundle(json.load(open("bundle.json"))).text())

A bundle (written by ``almanac dispute``; format in docs/forensics.md) claims: "these events of room R,
decided by these commands under rule-set NAME@VERSION with these dice, are part of R's history whose
head at export time was HASH". This module checks that claim in named steps, stopping at the first
failure, and says what each passed step proved:

1. format     the file is a dispute bundle this verifier reads.
2. chain      every envelope from version 1 to the head links to the one before (sha256 over the
              previous hash and the envelope's fields) and the last one's hash is the stated head:
              nothing was altered, dropped or inserted unless the whole chain was re-sealed.
3. readable   each readable event in the bundle is exactly the chained envelope it names (fields and
              decoded payload): what a person reads is what the chain proves.
4. rules      the room's first event names the rule-set version; this machine has that version, and
              its fingerprint is compared with the one the room recorded (a difference is reported).
   subject    the slice is all of its subject: a trade (any audit view's item) told again from the
              chain by the rule-set's audit view gives exactly the bundle's events and story, so no
              step of it was left out; a range holds exactly its versions.
5. seed       the revealed seed hashes to the commitment recorded when the room was created (so the
              operator could not pick it after seeing the play). Skipped, and said so, before the end.
6. coverage   each command's span of versions is exactly the envelopes carrying its command id, and
              every event of the slice lies in one of them.
7. redecide   each command is decided again by ``almanac.events.step.step`` (the engine's own room
              step: its dice are derived from the revealed seed by ``events.dice``) against the state
              folded from the chain before it; the events must come out byte for byte as recorded. A
              forged but re-sealed chain fails here: the forger cannot make the rules and the
              committed dice produce the forged events.
8. refusals   each refused command in range is decided again at its version and refused with the same code.

The one thing a bundle cannot prove alone is that the head hash is the room's real head: compare it
with a head hash published or given to you by other means (``--expect-head``).
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from almanac.events import codec, readable, registry, room as room_rules
from almanac.events.dice import seed_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import CorruptEventError, RuleError, RulesNotInstalledError
from almanac.events.forensics.checkpoint_check import (
    CheckpointFailure,
    check_checkpoints,
    commitment_heads,
    trusted,
)
from almanac.events.forensics.redecide import (
    Refusal,
    public_seed,
    recheck_refusals,
    redecide,
    revealed_nonces,
)
from almanac.events.forensics.tree_diff import difference_lines, tree_diff
from almanac.events.hashing import envelope_hash
from almanac.events.step import CommandRecord, decode_record

BUNDLE_FORMAT = "almanac-dispute-bundle"
BUNDLE_FORMAT_VERSION = 1


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
    ok: bool = False
    steps: list[Step] = []

    @property
    def failed(self) -> Step | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    def text(self) -> str:
        """The verdict as a person reads it."""
        lines = [f"bundle of room {self.room!r}: " + ("VERIFIED" if self.ok else "NOT VERIFIED")]
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
    names = [path for path, _, _ in tree_diff(_event_of(recorded), _event_of(recomputed)) if path != "hash"]
    return sorted(names, key=lambda path: not path.startswith("event")) or ["bytes"]


def verify_bundle(bundle: Any, expect_head: str | None = None, checkpoints: list[Any] | None = None,
                  keys: Any = None) -> Verdict:
    """Check a bundle (parsed JSON) step by step; the verdict names every step and the first failure.

    ``expect_head`` is the envelope chain's last hash, or ``VERSION:HASH`` (that version's chain hash or
    commitment head); ``checkpoints`` are signed checkpoints players hold, checked against the key set ``keys``
    (docs/bundle-format.md)."""
    verdict = Verdict(room=str(bundle.get("room", "")) if isinstance(bundle, dict) else "")
    try:
        _run(bundle, verdict, expect_head, checkpoints, keys)
        verdict.ok = True
    except _Failed as failure:
        verdict.steps.append(failure.step)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError, OverflowError, CorruptEventError,
            msgspec.DecodeError, msgspec.ValidationError) as error:
        # A hostile or damaged file: a failed step naming the first part that is not as the format says.
        where = verdict.steps[-1].name if verdict.steps else "format"
        verdict.steps.append(Step(name="format", status="failed",
                                  detail=f"the bundle is malformed after step {where!r}: {type(error).__name__}: {error}"))
    return verdict


def _expected(expect_head: str | None) -> tuple[int | None, str] | None:
    """``HASH`` (the head's) or ``VERSION:HASH`` as (version or None, hash)."""
    if expect_head is None:
        return None
    version, sep, value = expect_head.strip().rpartition(":")
    if not sep:
        return None, value.lower()
    if not version.isdigit() or int(version) < 1:
        raise _fail("chain", f"--expect-head {expect_head!r} is neither HASH nor VERSION:HASH")
    return int(version), value.lower()


def _checkpoint_step(bundle: dict, room: str, chain: list[Envelope], expected: tuple[int | None, str] | None,
                     checkpoints: list[Any] | None, keys: Any) -> Step:
    """The commitment chain through the expected head and the players' signed checkpoints (checkpoint_check)."""
    try:
        heads = commitment_heads(bundle, chain)
        if expected is not None and expected[0] is not None:
            version, value = expected
            if version > len(chain):
                raise CheckpointFailure(f"the chain ends at version {len(chain)}, before the expected head's version",
                                        version, recorded=version, recomputed=len(chain), sides=("expected", "bundle ends at"))
            ours = {chain[version - 1].hash} | ({heads[version - 1].hex()} if heads is not None else set())
            if value not in ours:
                raise CheckpointFailure("the bundle's history does not pass through the head you expected", version,
                                        recorded=value, recomputed=sorted(ours), sides=("expected", "bundle"))
        if heads is None:
            if checkpoints:
                raise CheckpointFailure("the bundle carries no commitment openings (no commitments section), so no "
                                        "checkpoint can be checked against it")
            return Step(name="checkpoints", status="skipped", detail="the bundle has no commitments section (made "
                        "before checkpoints existed): no signed head can be checked")
        own = bundle.get("checkpoint")
        given = list(checkpoints or [])
        if keys is None:
            if given:
                raise CheckpointFailure("checkpoints were given but no key set to check their signatures with (the "
                                        "deployment's /.well-known/almanac-keys.json)")
            # The bundle's own checkpoint is signed by a key the bundle itself names: checking it would prove
            # nothing, not even against an outsider. Nothing anchors this history yet.
            return Step(name="checkpoints", status="skipped", detail=f"commitment head {heads[-1].hex()[:16]}… "
                        "recomputed, but nothing anchors it: give checkpoints players hold (--checkpoints) or the "
                        "deployment's key set (--keys) to check the server's signature on it")
        trusted_keys = trusted(keys)
        check_checkpoints(room, heads, given + ([own] if own is not None else []), trusted_keys)
    except CheckpointFailure as failure:
        return Step(name="checkpoints", status="failed", detail=failure.detail, version=failure.version,
                    recorded=failure.recorded, recomputed=failure.recomputed, sides=failure.sides)
    through = f"{len(given)} checkpoint(s) held by players" if given else "no player's checkpoint (none given)"
    return Step(name="checkpoints", status="passed", detail=f"the commitment chain, recomputed from the envelopes and "
                f"their salts, ends at head {heads[-1].hex()[:16]}…; the history passes through {through}"
                + (" and the server's signature on the bundle's head" if own is not None else "")
                + ", every signature valid under the key set you gave")


def _run(bundle: Any, verdict: Verdict, expect_head: str | None, checkpoints: list[Any] | None = None,
         keys: Any = None) -> None:
    passed = verdict.steps.append

    # 1. format
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise _fail("format", f"not a dispute bundle (format is not {BUNDLE_FORMAT!r})")
    if bundle.get("format_version") != BUNDLE_FORMAT_VERSION:
        raise _fail("format", f"format_version {bundle.get('format_version')!r}; this verifier reads {BUNDLE_FORMAT_VERSION}")
    try:
        room = bundle["room"]
        head = bundle["head"]
        raws = [base64.b64decode(text, validate=True) for text in bundle["chain"]["envelopes"]]
        events, commands, refusals = bundle["events"], bundle["commands"], bundle["refusals"]
        seed_info, ruleset = bundle["seed"], bundle["ruleset"]
        head_version, head_hash = int(head["version"]), str(head["hash"])
    except (KeyError, TypeError, ValueError) as error:
        raise _fail("format", f"a required part is missing or malformed: {error!r}") from None
    passed(Step(name="format", status="passed", detail=f"a dispute bundle of room {room!r}, "
                f"{len(events)} event(s), {len(commands)} command(s), {len(refusals)} refusal(s)"))

    # 2. chain
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
    expected = _expected(expect_head)
    if expected is not None and expected[0] is None and head_hash != expected[1]:
        raise _fail("chain", "the bundle's head hash is not the head hash you expected (from another source)",
                    head_version, recorded=head_hash, recomputed=expected[1], sides=("bundle", "expected"))
    passed(Step(name="chain", status="passed", detail=f"versions 1..{head_version} are linked and unaltered, ending at "
                f"head {head_hash[:16]}…" + (" (the hash you expected)" if expected and expected[0] is None else
                                             "; compare that hash with one published by other means")))
    step = _checkpoint_step(bundle, room, chain, expected, checkpoints, keys)
    if step.status == "failed":
        raise _Failed(step)
    passed(step)

    # 3. readable
    for entry in events:
        version = entry.get("version") if isinstance(entry, dict) else None
        if not isinstance(version, int) or not 1 <= version <= head_version:
            raise _fail("readable", f"an event entry names version {version!r}, outside the chain")
        wrong = readable.check_event_entry(entry, chain[version - 1])
        if wrong is not None:
            raise _fail("readable", f"event entry {version} does not say what the chain holds: {wrong}", version,
                        recorded=_event_of(chain[version - 1]).get("event"), recomputed=entry.get("event"),
                        sides=("chained", "readable"))
    passed(Step(name="readable", status="passed",
                detail=f"each of the {len(events)} readable event(s) is exactly the chained envelope it names"))

    # 4. rules
    try:
        created = codec.decode_event(chain[0])
    except RulesNotInstalledError as error:
        raise _fail("rules", f"this machine lacks the room's rules: {error.message}", 1) from None
    if not isinstance(created, room_rules.RoomCreated):
        raise _fail("rules", f"the first event is {chain[0].type}, not room.created", 1)
    ref = f"{created.ruleset}@{created.ruleset_version}"
    if ruleset.get("ref") != ref or ruleset.get("fingerprint") != created.fingerprint:
        raise _fail("rules", "the bundle's rule-set does not match the room's room.created event", 1,
                    recorded={"ref": ref, "fingerprint": created.fingerprint}, recomputed=ruleset,
                    sides=("chained", "readable"))
    try:
        rules = registry.at(created.ruleset, created.ruleset_version)
    except (RulesNotInstalledError, RuleError) as error:
        raise _fail("rules", f"this machine cannot decide {ref}: {error}", 1) from None
    same = rules.fingerprint == created.fingerprint
    passed(Step(name="rules", status="passed", detail=f"the room is decided by {ref}; this machine has it with "
                f"fingerprint {rules.fingerprint[:16]}…, " + ("the same code the room recorded" if same else
                f"NOT the fingerprint the room recorded ({created.fingerprint[:16] or 'none'}…): the code differs, "
                "so the re-decision below checks the recorded events against this machine's code")))

    # 4b. subject: the slice is all of what it claims to be (the audit view told again from the chain)
    subject = bundle.get("subject")
    slice_versions = sorted(entry["version"] for entry in events)
    if isinstance(subject, dict) and subject.get("kind") == "audit_view":
        offered = rules.audit_view(str(subject.get("view")))
        if offered is None:
            raise _fail("subject", f"{ref} has no audit view {subject.get('view')!r}")
        story = offered.steps([(e, codec.decode_event(e)) for e in chain], str(subject.get("item")))
        told = sorted({int(s["version"]) for s in story})
        if told != slice_versions or not readable.same_json(codec.to_builtins(story), subject.get("story")):
            raise _fail("subject", f"the {subject.get('view')} {subject.get('item')!r} told again from the chain is not "
                        "the bundle's story and events (one left out, or one added)", None,
                        recorded=told, recomputed=slice_versions, sides=("chained", "readable"))
        passed(Step(name="subject", status="passed", detail=f"the {subject.get('view')} {subject.get('item')!r}, told "
                    f"again from the chain by {ref}'s audit view, is exactly the bundle's {len(told)} event(s) and story"))
    elif isinstance(subject, dict) and subject.get("kind") == "versions":
        if slice_versions != list(range(int(subject["from"]), int(subject["to"]) + 1)):
            raise _fail("subject", f"the bundle's events are not exactly versions {subject['from']}..{subject['to']}")
        passed(Step(name="subject", status="passed", detail=f"the events are exactly versions {subject['from']}..{subject['to']}"))
    else:
        raise _fail("subject", "the bundle names no subject (an audit view's item or a version range)")

    # 5. seed (taken from the chain itself: the room.ended event; the bundle's copy must agree)
    seed, source = public_seed(created, chain)
    if source == "challenge":
        passed(Step(name="seed", status="passed", detail=f"a challenge room: its dice come from the public challenge "
                    f"{created.challenge!r}, which anyone can derive"))
    elif seed is not None:
        digest = seed_commitment(seed)
        if digest != created.seed_commitment:
            raise _fail("seed", "the revealed seed does not hash to the commitment made when the room was created",
                        1, recorded=created.seed_commitment, recomputed=digest, sides=("committed", "revealed"))
        if seed_info.get("revealed") not in (None, seed.hex()):
            raise _fail("seed", "the bundle's seed is not the one the room revealed", None,
                        recorded=seed.hex(), recomputed=seed_info.get("revealed"), sides=("chained", "readable"))
        passed(Step(name="seed", status="passed", detail="the seed revealed at the end hashes to the commitment "
                    f"{created.seed_commitment[:16]}… recorded at creation: it was fixed before play"))
    else:
        verdict.steps.append(Step(name="seed", status="skipped", detail="the room has not ended: its seed is secret, so "
                                  "no die can be re-derived and no command re-decided (steps coverage and "
                                  "chain still hold; ask again after the room ends)"))
    nonces = revealed_nonces(chain)  # scheme-2 dice: the players' nonces, revealed by the room's end

    # 6. coverage
    spans: list[tuple[int, int, CommandRecord]] = []
    for entry in commands:
        try:
            first, last = int(entry["first_version"]), int(entry["last_version"])
            data = base64.b64decode(entry["raw"], validate=True)
            record = decode_record(data)
        except (KeyError, TypeError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as error:
            raise _fail("coverage", f"a command entry is malformed: {error!r}") from None
        if not readable.same_json(codec.to_builtins(record), entry.get("command")):
            raise _fail("coverage", f"the readable command {record.command_id!r} is not its stored record", first,
                        recorded=codec.to_builtins(record), recomputed=entry.get("command"), sides=("stored", "readable"))
        if not 1 <= first <= last <= head_version:
            raise _fail("coverage", f"command {record.command_id!r} claims versions {first}..{last}", first)
        inside = {e.command_id for e in chain[first - 1:last]}
        before = chain[first - 2].command_id if first > 1 else None
        after = chain[last].command_id if last < head_version else None
        if inside != {record.command_id} or record.command_id in (before, after):
            raise _fail("coverage", f"versions {first}..{last} are not exactly the events of command "
                        f"{record.command_id!r}", first, recorded=sorted(inside), recomputed=record.command_id,
                        sides=("chained", "claimed"))
        spans.append((first, last, record))
    spans.sort(key=lambda span: span[0])
    covered = {version for first, last, _ in spans for version in range(first, last + 1)}
    for entry in events:
        if entry["version"] not in covered:
            raise _fail("coverage", "an event of the slice has no command in the bundle that decided it", entry["version"])
    passed(Step(name="coverage", status="passed", detail=f"every event of the slice lies in one of the "
                f"{len(spans)} command span(s), and each span is exactly that command's events"))
    if seed is None:
        for name in ("redecide", "refusals"):
            verdict.steps.append(Step(name=name, status="skipped", detail="needs the seed, revealed when the room ends"))
        return

    # 7. redecide (events.forensics.redecide: each span from the state the chain folds to before it)
    checked = redecide(chain, spans, seed, rules.ref, nonces=nonces)
    wrong = checked.mismatch
    if wrong is not None and wrong.reason == "refused":
        error = wrong.error
        assert error is not None and isinstance(wrong.recorded, list)
        raise _fail("redecide", f"command {wrong.command_id!r} decided again is refused ({error.code}: "
                    f"{error.message}), but the chain records its events", wrong.version,
                    recorded=[_event_of(e) for e in wrong.recorded], recomputed=error.to_dict(),
                    sides=("recorded", "re-decided"))
    if wrong is not None:
        theirs, mine = wrong.recorded, wrong.recomputed
        assert not isinstance(theirs, list)
        what = "missing" if mine is None else "extra" if theirs is None else ", ".join(_differences(theirs, mine))
        raise _fail("redecide", f"command {wrong.command_id!r} decided again with {ref} and the dice "
                    f"re-derived from the seed gives other events (differs in: {what})", wrong.version,
                    recorded=None if theirs is None else _event_of(theirs),
                    recomputed=None if mine is None else _event_of(mine), sides=("recorded", "re-decided"))
    passed(Step(name="redecide", status="passed", detail=f"each of the {len(spans)} command(s), decided again by "
                f"{ref} with its dice re-derived from the seed, gives exactly the recorded events"))

    # 8. refusals
    kept = []
    for entry in refusals:
        try:
            record = decode_record(base64.b64decode(entry["raw"], validate=True))
        except (KeyError, TypeError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as error:
            raise _fail("refusals", f"a refusal entry is malformed: {error!r}") from None
        kept.append(Refusal(record=record, error=entry.get("error")))
    rechecked, refused = recheck_refusals(chain, kept, seed, nonces=nonces)
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
    passed(Step(name="refusals", status="passed", detail=f"each of the {rechecked} refused command(s) in range, decided "
                "again at its version, is refused with the recorded code (refusals are not in the chain: this shows "
                "the refusals are consistent with the rules, not that none is missing)"))
