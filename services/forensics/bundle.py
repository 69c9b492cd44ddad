"""Dispute bundles: one self-contained JSON file proving a slice of a room's history (docs/forensics.md).

``dispute_bundle`` reads a room from any store and writes the bundle that
``almanac.events.forensics.bundle_check`` verifies offline: the slice's events readable with their hashes, the
commands that decided them and the refusals in range, the seed commitment (and the seed once the
room has ended), and the whole chain in compact form up to the head at export time with every command
record of it, so that every command from ``room.created`` to the head is decided again (the events before
and after the slice included). ``bundle_json`` writes it with its audience on the first line.
"""

from __future__ import annotations

import json
from typing import Any

from almanac.events import codec, commitments, readable, registry
from almanac.events.errors import RuleError
from almanac.events.forensics.bundle_check import (
    BUNDLE_FORMAT,
    BUNDLE_FORMAT_VERSION,
    CHAIN_ABOUT,
    audience,
    copied_as,
    seed_entry,
)
from almanac.events.forensics.redecide import command_spans
from almanac.events.step import decode_record
from almanac.services.checkpoints import Checkpointer
from almanac.services.forensics.audit import story
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.pauses import pause_now_and_then
from almanac.services.forensics.verify import as_origin, raw_envelopes


async def dispute_bundle(store: Any, room: str, exported_at_ms: int, *, view: str | None = None,
                         item: str | None = None, versions: tuple[int, int] | None = None,
                         checkpointer: Checkpointer | None = None) -> dict[str, Any]:
    """The bundle of one audit view's item (``view``, ``item``) or of a version range (``versions``).

    With ``checkpointer`` (the deployment's keys and commitment secret) it also carries the room key that opens
    every commitment, the server's checkpoint of its head and the key set (docs/bundle-format.md section 4)."""
    if not await store.latest_version(room):
        raise ForensicsError(404, "room_not_found", f"room {room!r} does not exist", "room")
    copy = room
    # A copy's dice were salted with its origin's id: its bundle is the origin's history (events.copies).
    store, room, origin = await as_origin(store, room)
    raw = await raw_envelopes(store, room)
    envelopes = []
    for index, (version, data) in enumerate(raw):
        await pause_now_and_then(index)  # a heavy read: where its client's leaving stops it (services.forensics.pauses)
        envelopes.append(codec.decode_envelope(data, room, version))
    head = len(envelopes)
    if envelopes[0].type == "room.forked":
        # A bundle is checked offline from genesis; a fork's chain and state start at its parent's version.
        forked = codec.decode_event(envelopes[0])
        raise ForensicsError(422, "fork_not_supported", f"room {copy!r} is a sandbox fork of {forked.parent!r} at version "
                           f"{forked.at}: a bundle proves a room's history from its first version, so ask for "
                           f"the parent's bundle (versions of {forked.parent!r})", "room")
    created = codec.decode_event(envelopes[0])
    if (view is None) == (versions is None):
        raise ForensicsError(422, "subject_required", "name either an audit view and item or a version range", "view")
    if view is not None:
        steps = story(envelopes, room, view, item or "")
        wanted = sorted({int(step["version"]) for step in steps})
        subject: dict[str, Any] = {"kind": "audit_view", "view": view, "item": item,
                                   "story": codec.to_builtins(steps)}
    else:
        first, last = versions  # type: ignore[misc]
        if not 1 <= first <= last <= head:
            raise ForensicsError(422, "bad_range", f"versions {first}..{last}: the room has versions 1..{head}", "versions")
        wanted = list(range(first, last + 1))
        subject = {"kind": "versions", "from": first, "to": last}

    # The commands whose events the slice holds, with their spans, and the refusals between them.
    spans = command_spans(await store.commands(room), head)
    wanted_set = set(wanted)
    chosen = [span for span in spans if any(v in wanted_set for v in range(span[0], span[1] + 1))]
    low, high = (chosen[0][0], chosen[-1][1]) if chosen else (wanted[0], wanted[-1])
    refusals = []
    for data in await store.rejections(room):
        record = decode_record(data)
        at = record.refused_at_version
        if at is not None and low - 1 <= at <= high:
            outcome = await store.outcome(room, record.command_id)
            refusals.append({**readable.record_entry(data), "raw": readable.b64(data),
                             "error": (outcome.error if outcome is not None else None) or {}})

    try:
        fingerprint_here = registry.at(created.ruleset, created.ruleset_version).fingerprint
    except RuleError:
        fingerprint_here = ""
    return {
        "audience": audience_of(room, created, ended=any(e.type == "room.ended" for e in envelopes)),
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_FORMAT_VERSION,
        "room": room,
        "exported_at_ms": exported_at_ms,
        "exported_at": readable.utc_text(exported_at_ms),
        "ruleset": {"name": created.ruleset, "version": created.ruleset_version,
                    "ref": f"{created.ruleset}@{created.ruleset_version}",
                    "fingerprint": created.fingerprint, "fingerprint_of_exporter": fingerprint_here},
        "subject": subject,
        **({"copied_as": copied_as(copy)} if origin else {}),
        "head": {"version": head, "hash": envelopes[-1].hash},
        "seed": seed_entry(created, envelopes),
        # The stored bytes are in the chain once (its envelopes and command records): the readable entries
        # carry no second copy (an event's ``payload``, a command's ``raw``); the verifier checks them against it.
        "events": [_without(readable.event_entry(raw[v - 1][1], room, v), "payload") for v in wanted],
        "commands": [{"first_version": first, "last_version": last, **readable.record_entry(data)}
                     for first, last, data in chosen],
        "refusals": refusals,
        "chain": {
            "about": CHAIN_ABOUT,
            "envelopes": [readable.b64(data) for _, data in raw],
            "commands": [[first, readable.b64(data)] for first, _, data in spans],
        },
        **(await commitment_sections(checkpointer, room, envelopes, await checkpointer.scheme(store, room))
           if checkpointer is not None else {}),
    }


async def commitment_sections(checkpointer: Checkpointer, room: str, envelopes: list[Any],
                              scheme: str = commitments.SCHEME) -> dict[str, Any]:
    """An auditor bundle's ``commitments`` (the room key), ``checkpoint`` (its head, signed) and ``keys``: the head
    folded a version at a time (``commitments.each_head``) with a pause now and then (a heavy read)."""
    key = checkpointer.room_key(room)
    head = commitments.HEAD_0
    shown: list[dict[str, str]] = []
    folded = commitments.each_head(key, envelopes, scheme)
    for index, envelope in enumerate(envelopes):
        await pause_now_and_then(index)
        head = next(folded)
        if scheme == commitments.SCHEME_V2:
            # Every audience's view but the whole event's (the envelope is its bytes): a verifier without the
            # rule-set's redaction (the console's JavaScript) recomputes the leaves from them; the Python one also
            # re-derives them.
            shown.append({label: readable.b64(view) for label, view in commitments.views(envelope).items()
                          if label != commitments.FULL})
    openings = checkpointer.openings(room, scheme)
    if scheme == commitments.SCHEME_V2:
        openings["views"] = shown
    return {"commitments": openings,
            "checkpoint": checkpointer.ring.sign(room, len(envelopes), head),
            "keys": checkpointer.ring.document}


def _without(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name != key}


def audience_of(room: str, created: Any, ended: bool) -> dict[str, Any]:
    """Who may read a bundle of ``room`` (``bundle_check.audience``), from its ``room.created`` event and whether it
    has ended: the exporter's first line, and who may have ``POST /bundles/verify`` compare it with a held chain."""
    try:
        hides = bool(registry.at(created.ruleset, created.ruleset_version).decider.secrets)
    except RuleError:
        hides = True  # rules unknown here: assume they hide something
    return audience(room, hides, ended)


def bundle_json(bundle: dict[str, Any]) -> str:
    """The bundle as JSON text whose first line says who may read it (its ``audience``, the first key)."""
    rest = {key: value for key, value in bundle.items() if key != "audience"}
    body = json.dumps(rest, indent=1)
    if "audience" not in bundle:
        return body + "\n"
    return '{"audience": ' + json.dumps(bundle["audience"]) + ",\n" + body[1:].lstrip("\n") + "\n"
