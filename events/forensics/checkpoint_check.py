"""The bundle verifier's commitment-chain step: recompute every head from the chain's envelopes and their salts,
then check that the history passes through each signed checkpoint and refusal receipt a player holds
(docs/bundle-format.md)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import msgspec

from almanac.events import commitments as cm
from almanac.events.envelope import Envelope
from almanac.events.step import CommandRecord, decode_record


class CheckpointFailure(Exception):
    """A contradiction: ``detail`` says what, ``version`` where, ``recorded``/``recomputed`` the two sides."""

    def __init__(self, detail: str, version: int | None = None, recorded: Any = None, recomputed: Any = None,
                 sides: tuple[str, str] = ("checkpoint", "recomputed")) -> None:
        super().__init__(detail)
        self.detail, self.version, self.recorded, self.recomputed, self.sides = detail, version, recorded, recomputed, sides


def commitment_heads(bundle: Mapping, chain: list[Envelope | None]) -> list[bytes] | None:
    """``head_1 .. head_N`` of the bundle's chain from its ``commitments`` section; None when it has none.

    ``chain[v-1]`` is envelope v, or None for an event hidden from the bundle's reader (then its commitment is
    given instead of its salt)."""
    section = bundle.get("commitments")
    if section is None:
        return None
    scheme = section.get("scheme") if isinstance(section, Mapping) else None
    if scheme not in cm.SCHEMES:
        raise CheckpointFailure(f"the commitments section is not scheme {' or '.join(map(repr, cm.SCHEMES))}")
    key_hex = section.get("room_key")
    if scheme == cm.SCHEME_V2 and key_hex is None:
        raise CheckpointFailure("a scheme v2 bundle without room_key is a player bundle (verify-player-bundle)")
    given: dict[int, tuple[str, bytes]] = {}
    if key_hex is not None:
        if not isinstance(key_hex, str) or len(key_hex) != 64:
            raise CheckpointFailure("room_key is not 64 hex characters")
        key = bytes.fromhex(key_hex)
    else:
        key = None
        entries = section.get("events")
        if not isinstance(entries, list) or len(entries) != len(chain):
            raise CheckpointFailure("without room_key, commitments.events must list every version of the chain")
        for expected, entry in enumerate(entries, start=1):
            if not isinstance(entry, Mapping) or entry.get("version") != expected or len(entry) != 2:
                raise CheckpointFailure(f"commitments.events entry {expected} is not {{version, salt | commitment}}",
                                        expected)
            kind = "salt" if "salt" in entry else "commitment"
            value = entry.get(kind)
            if not isinstance(value, str) or len(value) != 64:
                raise CheckpointFailure(f"commitments.events entry {expected}: {kind} is not 64 hex characters", expected)
            given[expected] = (kind, bytes.fromhex(value))
    given_views = section.get("views")
    if scheme == cm.SCHEME_V2 and (not isinstance(given_views, list) or len(given_views) != len(chain)):
        raise CheckpointFailure("a scheme v2 bundle lists every event's views (commitments.views)")
    head = cm.HEAD_0
    result: list[bytes] = []
    for version, envelope in enumerate(chain, start=1):
        if key is not None:
            if envelope is None:
                raise CheckpointFailure("an event is missing from the chain", version)
            try:
                c = cm.event_commitment(key, envelope, scheme) if scheme == cm.SCHEME else \
                    _views_root(key, envelope, given_views[version - 1])
            except CheckpointFailure:
                raise
            except Exception as error:  # noqa: BLE001 - a v2 view needs the event decoded: a hostile one is a failure
                raise CheckpointFailure(f"the event cannot be read to commit to its views: {error}", version) from None
        else:
            kind, value = given[version]
            if envelope is None and kind == "commitment":
                c = value
            elif envelope is not None and kind == "salt":
                c = cm.commitment(value, cm.event_body(envelope))
            else:
                raise CheckpointFailure("a shown event needs its salt and a hidden one its commitment", version)
        head = cm.next_head(head, c, scheme)
        result.append(head)
    return result


def _views_root(key: bytes, envelope: Envelope, given: Any) -> bytes:
    """``c_v`` of scheme v2 from the envelope, its views re-derived by the rule-set's redaction: the views the bundle
    lists (what a verifier without the rules hashes) must be exactly those."""
    views = cm.views(envelope)
    listed = {label: base64.b64encode(view).decode() for label, view in views.items() if label != cm.FULL}
    if given != listed:
        raise CheckpointFailure("the views listed for this event are not the rule-set's redactions of it",
                                envelope.version, recorded=sorted(listed), recomputed=sorted(given)
                                if isinstance(given, Mapping) else given, sides=("rules", "bundle"))
    return cm.root({label: cm.leaf(label, cm.leaf_salt(key, envelope.version, label), view)
                    for label, view in views.items()})


def trusted(keys: Any) -> dict[str, bytes]:
    problem = cm.key_set_problem(keys)
    if problem is not None:
        raise CheckpointFailure(f"the key set is not usable: {problem}")
    return cm.trusted_keys(keys)


def equivocation(checkpoints: list[Any], keys: dict[str, bytes]) -> tuple[Mapping, Mapping] | None:
    """The first two checkpoints (in the order given) that are well formed, validly signed by a trusted key, and of
    one room and version with different heads; None when there are none.

    Such a pair is the deployment contradicting itself: it needs no chain to prove, so a player can hand it to anyone."""
    signed: dict[tuple[str, int], Mapping] = {}
    for checkpoint in checkpoints:
        if cm.checkpoint_problem(checkpoint) is not None or checkpoint["kid"] not in keys \
                or not cm.signature_valid(keys[checkpoint["kid"]], checkpoint):
            continue  # the checks below name it; only valid signatures can prove an equivocation
        first = signed.setdefault((checkpoint["room"], checkpoint["version"]), checkpoint)
        if first["head"] != checkpoint["head"]:
            return first, checkpoint
    return None


def equivocation_detail(first: Mapping, second: Mapping) -> str:
    """The equivocation said once, word for word as the console's verifier says it (verify.js)."""
    kid = first["kid"] if first["kid"] == second["kid"] else f"{first['kid']} and key {second['kid']}"
    return (f"equivocation: the deployment signed two heads for version {first['version']}: {first['head']} and "
            f"{second['head']}, key {kid} (room {first['room']}; both signatures are valid, so this proves the "
            "deployment contradicted itself whatever the bundle's chain says)")


def check_checkpoints(room: str, heads: list[bytes], checkpoints: list[Any], keys: dict[str, bytes]) -> None:
    """No two validly signed checkpoints contradict each other (equivocation, checked first: it holds whatever the
    bundle), and every checkpoint is well formed, of ``room``, within the chain, on its head and signed by a trusted
    key."""
    pair = equivocation(checkpoints, keys)
    if pair is not None:
        first, second = pair
        raise CheckpointFailure(equivocation_detail(first, second), first["version"], recorded=first["head"],
                                recomputed=second["head"], sides=("signed", "also signed"))
    for checkpoint in checkpoints:
        label = f"checkpoint {cm.checkpoint_label(checkpoint)}"
        _signed_here(label, "checkpoint", checkpoint, cm.checkpoint_problem, cm.signature_valid, keys, room)
        version = checkpoint["version"]
        if version > len(heads):
            raise CheckpointFailure(f"{label}: the bundle's chain ends at version {len(heads)}, before the "
                                    "checkpoint (truncated or rolled back)", version,
                                    recorded=version, recomputed=len(heads), sides=("checkpoint", "bundle ends at"))
        if heads[version - 1].hex() != checkpoint["head"]:
            raise CheckpointFailure(f"{label}: the bundle's history does not pass through it (an event "
                                    f"at or before version {version} differs from what was signed)", version,
                                    recorded=checkpoint["head"], recomputed=heads[version - 1].hex())


def _signed_here(label: str, kind: str, signed: Mapping, problem_of: Any, valid: Any, keys: dict[str, bytes],
                 room: str) -> None:
    """A checkpoint or receipt (``kind``) well formed (``problem_of``, the kind's field check, finds nothing), signed
    by a key of the trusted set, its signature valid (``valid``, the kind's check), and of ``room``; else a
    CheckpointFailure naming it by ``label``."""
    problem = problem_of(signed)
    if problem is not None:
        raise CheckpointFailure(f"{label} is malformed: {problem}")
    version = signed["version"]
    if signed["kid"] not in keys:
        raise CheckpointFailure(f"{label} is signed by key {signed['kid']}, which is not in the trusted key set "
                                f"({', '.join(sorted(keys))})", version)
    if not valid(keys[signed["kid"]], signed):
        raise CheckpointFailure(f"{label}: the signature is not valid (forged or altered)", version)
    if signed["room"] != room:
        raise CheckpointFailure(f"{label} is of room {signed['room']!r}, not of this bundle's room {room!r}", version,
                                recorded=signed["room"], recomputed=room, sides=(kind, "bundle"))


def check_receipts(room: str, heads: list[bytes] | None, chain: list[Envelope], receipts: list[Any],
                   keys: dict[str, bytes]) -> list[tuple[Mapping, CommandRecord, bytes]]:
    """Every refusal receipt a player holds (docs/bundle-format.md section 8) well formed, signed by a trusted key,
    of ``room``, its record the command it names refused at its version, and on the bundle's history (the
    commitment head at that version is the one it signs); its command never recorded accepted. Returns each with
    its decoded record and stored bytes, for deciding it again (``bundle_check``). The first contradiction raises
    a CheckpointFailure naming the receipt."""
    accepted = {}
    for envelope in chain:
        accepted.setdefault(envelope.command_id, envelope.version)
    checked = []
    for receipt in receipts:
        label = cm.receipt_label(receipt)
        _signed_here(label, "receipt", receipt, cm.receipt_problem, cm.receipt_signature_valid, keys, room)
        version = receipt["version"]
        raw = base64.b64decode(receipt["raw"])
        try:
            record = decode_record(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise CheckpointFailure(f"{label}: its command record does not decode ({error})", version) from None
        said = (receipt["room"], receipt["player"], receipt["command_id"], version)
        held = (record.room, record.player, record.command_id, record.refused_at_version)
        if said != held:
            raise CheckpointFailure(f"{label}: its command record is not the command it names, refused at its version",
                                    version, recorded=list(said), recomputed=list(held), sides=("signed", "record"))
        if version > len(chain):
            raise CheckpointFailure(f"{label}: the bundle's chain ends at version {len(chain)}, before the refusal "
                                    "(truncated or rolled back)", version, recorded=version, recomputed=len(chain),
                                    sides=("receipt", "bundle ends at"))
        if heads is None:
            raise CheckpointFailure(f"{label}: the bundle carries no commitment openings (no commitments section), so "
                                    "the history it was refused on cannot be checked")
        if heads[version - 1].hex() != receipt["head"]:
            raise CheckpointFailure(f"{label}: the bundle's history does not pass through the version it was refused "
                                    f"at (an event at or before version {version} differs from what was signed)",
                                    version, recorded=receipt["head"], recomputed=heads[version - 1].hex())
        if record.command_id in accepted:
            raise CheckpointFailure(f"{label}: the deployment signed this command's refusal, yet the chain records it "
                                    f"accepted at version {accepted[record.command_id]} (a command id is decided once)",
                                    accepted[record.command_id])
        checked.append((receipt, record, raw))
    return checked
