"""What a dishonest operator can do to a bundle: edit, drop, swap, cut or insert events, re-seal, re-run commands, sign."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from store_forgery import with_event

from almanac.events import codec, readable, registry
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import seal
from almanac.events.step import decode_record, replay, step
from almanac.services.checkpoints import KeyRing

# The chain as the forger edits it: (the version the envelope had in the honest bundle, or None for an event
# the forger made up, the envelope).
Tagged = list[tuple[int | None, Envelope]]


def copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def chain_of(bundle: dict) -> list[Envelope]:
    return [codec.decode_envelope(base64.b64decode(d), bundle["room"], v)
            for v, d in enumerate(bundle["chain"]["envelopes"], start=1)]


def retell_story(bundle: dict, chain: list[Envelope]) -> None:
    """The forger tells the audit view's story again from the forged chain (the subject step then agrees)."""
    subject = bundle["subject"]
    if subject["kind"] == "audit_view":
        view = registry.stored(chain[0].ruleset).audit_view(subject["view"])
        subject["story"] = json.loads(json.dumps(codec.to_builtins(
            view.steps([(e, codec.decode_event(e)) for e in chain], subject["item"]))))


def rewrite(bundle: dict, version: int, change, reseal: bool) -> dict:
    """The bundle with the event at ``version`` changed by ``change(event dict)``; ``reseal``: every hash
    from there to the head recomputed (a forger covering their tracks), its readable entries rebuilt."""
    if reseal:
        return forge(bundle, lambda tagged: [(old, with_event(e, change) if old == version else e)
                                             for old, e in tagged])
    bundle = copy(bundle)
    chain = chain_of(bundle)
    chain[version - 1] = with_event(chain[version - 1], change)
    raws = [codec.encode_envelope(e) for e in chain]
    bundle["chain"]["envelopes"] = [readable.b64(r) for r in raws]
    bundle["events"] = [readable.event_entry(raws[e["version"] - 1], bundle["room"], e["version"])
                        for e in bundle["events"]]
    retell_story(bundle, chain)
    return bundle


def revealed_seed(chain: list[Envelope]) -> bytes:
    ended = [e for e in chain if e.type == "room.ended"]
    return bytes.fromhex(codec.decode_event(ended[-1]).revealed_seed)


def forge(bundle: dict, edit: Callable[[Tagged], Tagged], rerun_slice: bool = False) -> dict:
    """A forged bundle: ``edit`` changes the tagged chain (edit, drop, swap, insert); versions are numbered again
    and the whole chain re-sealed to a new head; with ``rerun_slice`` the slice's commands are decided again
    with ``events.step.step`` on the forged history (their dice follow the new versions), as a forger with the
    seed does so that a verifier that re-decides only the slice agrees. Every readable part (events, commands,
    story, the chain's command records when the bundle carries them) is rebuilt to match."""
    bundle = copy(bundle)
    room = bundle["room"]
    tagged = edit(list(enumerate(chain_of(bundle), start=1)))
    tagged = [(old, msgspec.structs.replace(e, version=v)) for v, (old, e) in enumerate(tagged, start=1)]
    if rerun_slice:
        seed = revealed_seed([e for _, e in tagged])
        for entry in bundle["commands"]:
            record = decode_record(readable.entry_record_bytes(entry))
            at = [i for i, (_, e) in enumerate(tagged) if e.command_id == record.command_id]
            state = replay([e for _, e in tagged[:at[0]]])
            mine, _ = step(state, tagged[at[0] - 1][1].hash if at[0] else GENESIS_HASH, record, seed)
            olds = [tagged[i][0] for i in at]
            tagged[at[0]:at[-1] + 1] = list(zip(olds + [None] * (len(mine) - len(olds)), mine, strict=False))
            tagged = _resealed(tagged)
    tagged = _resealed(tagged)
    chain = [e for _, e in tagged]
    new_version = {old: v for v, (old, _) in enumerate(tagged, start=1) if old is not None}
    raws = [codec.encode_envelope(e) for e in chain]
    bundle["chain"]["envelopes"] = [readable.b64(r) for r in raws]
    bundle["head"] = {"version": len(chain), "hash": chain[-1].hash}
    bundle["events"] = [readable.event_entry(raws[new_version[e["version"]] - 1], room, new_version[e["version"]])
                        for e in bundle["events"] if e["version"] in new_version]
    firsts = _first_versions(chain)
    bundle["commands"] = [entry for entry in bundle["commands"] if entry["command"]["command_id"] in firsts]
    for entry in bundle["commands"]:
        first, last = firsts[entry["command"]["command_id"]]
        entry["first_version"], entry["last_version"] = first, last
    if "commands" in bundle["chain"]:  # the forger moves each record to where its command's events now start
        records = [(firsts[decode_record(base64.b64decode(raw)).command_id][0], raw)
                   for _, raw in bundle["chain"]["commands"]
                   if decode_record(base64.b64decode(raw)).command_id in firsts]
        bundle["chain"]["commands"] = [list(pair) for pair in sorted(records)]
    if bundle["subject"]["kind"] == "versions":  # the range is where its events now are
        shown = [e["version"] for e in bundle["events"]]
        bundle["subject"].update({"from": min(shown), "to": max(shown)})
    retell_story(bundle, chain)
    return bundle


def _resealed(tagged: Tagged) -> Tagged:
    previous, out = GENESIS_HASH, []
    for version, (old, envelope) in enumerate(tagged, start=1):
        envelope = seal(msgspec.structs.replace(envelope, version=version, previous_hash=previous))
        previous = envelope.hash
        out.append((old, envelope))
    return out


def edited(bundle: dict, version: int, change: Callable[[dict], None]) -> dict:
    """The event at ``version`` changed by ``change(event dict)``, everything re-sealed (``rewrite`` re-sealing)."""
    return rewrite(bundle, version, change, reseal=True)


def dropped(bundle: dict, version: int) -> dict:
    """The event at ``version`` left out, everything after it numbered again and re-sealed."""
    return forge(bundle, lambda tagged: [(old, e) for old, e in tagged if old != version])


def swapped(bundle: dict, a: int, b: int) -> dict:
    """The events at versions ``a`` and ``b`` told in each other's place, re-sealed."""
    def swap(tagged: Tagged) -> Tagged:
        tagged[a - 1], tagged[b - 1] = tagged[b - 1], tagged[a - 1]
        return tagged

    return forge(bundle, swap)


def truncated(bundle: dict, length: int) -> dict:
    """The history cut after its first ``length`` events (a head the forger picks), re-sealed."""
    return forge(bundle, lambda tagged: tagged[:length])


def not_resealed(bundle: dict, version: int) -> dict:
    """The envelope at ``version`` claimed by another command and nothing re-sealed (an edit straight in the store)."""
    bundle = copy(bundle)
    chain = chain_of(bundle)
    chain[version - 1] = msgspec.structs.replace(chain[version - 1], command_id="forged")
    bundle["chain"]["envelopes"][version - 1] = readable.b64(codec.encode_envelope(chain[version - 1]))
    return bundle


def stranger_ring() -> KeyRing:
    """A key that is not the deployment's: what a forger signs checkpoints with."""
    return KeyRing([Ed25519PrivateKey.generate().private_bytes_raw()])


def _first_versions(chain: list[Envelope]) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    for envelope in chain:
        first, _ = spans.get(envelope.command_id, (envelope.version, envelope.version))
        spans[envelope.command_id] = (first, envelope.version)
    return spans


def with_refusal(bundle: dict, record: Any, code: str, field: str | None = "signature") -> dict:
    """The bundle with one more refusal, of ``record`` (a CommandRecord), as an operator holding the store would
    add it."""
    bundle = copy(bundle)
    raw = codec.encode(record)
    bundle["refusals"].append({**readable.record_entry(raw), "raw": readable.b64(raw),
                               "error": {"code": code, "message": "invented", "field": field}})
    return bundle


def invented_refusal(bundle: dict, player: str, body: dict[str, Any], at: int, code: str) -> dict:
    """The bundle with a refusal the player never sent: a command decided at version ``at`` and refused."""
    record = decode_record(readable.entry_record_bytes(bundle["commands"][0]))
    forged = msgspec.structs.replace(record, command_id="invented-1", player=player, body=body, refused_at_version=at)
    return with_refusal(bundle, forged, code, field=None)



def heal_a_missing_army(bundle: dict) -> dict:
    """A realm bundle with a forged ``realm.army_healed`` for alice inserted after version 7, re-sealed: alice lost
    her army in a raid at version 4, so the rules cannot even fold it (realm's evolve asserts the army exists). It
    claims a command of its own, so a verifier that folds the events before its slice meets it there."""
    def insert(chain: Tagged) -> Tagged:
        healed = msgspec.structs.replace(chain[6][1], type="realm.army_healed", command_id="forged-heal",
                                         payload=codec.encode({"type": "realm.army_healed", "city": "alice",
                                                               "points": 5, "herbs": 5, "damage_after": 0}))
        return chain[:7] + [(None, healed)] + chain[7:]

    return forge(bundle, insert)


def with_record(bundle: dict, command_id: str, **changes: Any) -> dict:
    """The bundle with the stored record of ``command_id`` changed (command records are not in the chain: a forger
    can rewrite one without touching a hash), its readable entry rebuilt to match."""
    bundle = copy(bundle)
    for pair in bundle["chain"]["commands"]:
        record = decode_record(base64.b64decode(pair[1]))
        if record.command_id == command_id:
            pair[1] = readable.b64(codec.encode(msgspec.structs.replace(record, **changes)))
            for entry in bundle["commands"]:
                if entry["first_version"] == pair[0]:
                    entry.pop("raw", None)  # a record of an older shape kept its bytes; the forger's is re-encoded
                    entry.update(readable.record_entry(base64.b64decode(pair[1])))
    return bundle


def decided_again(bundle: dict, order: list) -> dict:
    """A versions bundle whose whole history is the command records ``order`` decided by the rules (``events.step.step``
    with the revealed seed and nonces: public once the room has ended), re-sealed, every part rebuilt: a history
    only a verifier holding a later head, or knowing more than the rules, can tell from the real one."""
    from almanac.events.forensics.redecide import revealed_nonces  # noqa: PLC0415 - the forger's own tooling

    bundle = copy(bundle)
    chain = chain_of(bundle)
    seed, nonces = revealed_seed(chain), revealed_nonces(chain)
    # The history up to the first command the forger changes stays as recorded (a head a player holds there holds)
    recorded = bundle["chain"]["commands"]
    kept = next(i for i, (old, new) in enumerate(zip(records_of(bundle), order, strict=False)) if old != new)
    cut = recorded[kept][0] - 1
    forged, firsts = chain[:cut], [first for first, _ in recorded[:kept]]
    state, last = replay(forged), forged[-1].hash
    for record in order[kept:]:
        mine, state = step(state, last, record, seed, nonces=nonces)  # the forger picked what the rules accept
        firsts.append(len(forged) + 1)
        forged += mine
        last = mine[-1].hash
    raws = [codec.encode_envelope(e) for e in forged]
    bundle["chain"]["envelopes"] = [readable.b64(r) for r in raws]
    bundle["chain"]["commands"] = [[first, readable.b64(codec.encode(r))] for first, r in zip(firsts, order, strict=True)]
    bundle["head"] = {"version": len(forged), "hash": forged[-1].hash}
    low, high = bundle["subject"]["from"], bundle["subject"]["to"]
    bundle["events"] = [{k: v for k, v in readable.event_entry(raws[v - 1], bundle["room"], v).items() if k != "payload"}
                        for v in range(low, high + 1)]
    spans = [(first, (firsts[i + 1] - 1) if i + 1 < len(firsts) else len(forged), order[i])
             for i, first in enumerate(firsts)]
    bundle["commands"] = [{"first_version": first, "last_version": last, **readable.record_entry(codec.encode(r))}
                          for first, last, r in spans if first <= high and last >= low]
    return bundle


def records_of(bundle: dict) -> list:
    return [decode_record(base64.b64decode(raw)) for _, raw in bundle["chain"]["commands"]]


def replay_command(bundle: dict, command_id: str, at: int) -> dict:
    """The history decided again with the command ``command_id`` decided a second time as the ``at``-th command: the
    operator's replay of a command the player sent once (a signed one included)."""
    records = records_of(bundle)
    again = next(r for r in records if r.command_id == command_id)
    return decided_again(bundle, records[:at] + [again] + records[at:])


def drop_command(bundle: dict, command_id: str) -> dict:
    """The history decided again without the command ``command_id`` (a player's acceptance of a trade, say)."""
    return decided_again(bundle, [r for r in records_of(bundle) if r.command_id != command_id])
