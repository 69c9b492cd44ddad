"""Fork and what-if, diff, explain a value, bisect: forensics over a room's log, shared by the CLI and the gateway.

Every state comes from the loader the caller hands in (its process's: ``bootstrap.Runtime.loader``, whose
store is the log read) or one fold of the room's envelopes (a fork folds onto its parent's state at the fork
version, through that loader). Only exact versions are loaded, so a reader's cache is never trusted for a
latest state here. Nothing here knows a rule-set: paths and predicates are generic
(``events.forensics.state_paths``).
"""

from __future__ import annotations

import secrets
from typing import Any

from almanac.events import codec, registry, room as room_rules
from almanac.events.dice import seed_commitment
from almanac.events.envelope import Envelope
from almanac.events.errors import RuleError, RulesNotInstalledError
from almanac.events.forensics.redecide import (
    command_spans,
    redecide_each,
    revealed_nonces,
)
from almanac.events.forensics.state_paths import (
    MISSING,
    Path,
    PathError,
    Predicate,
    children_at,
    parse_path,
    parse_predicate,
    shown,
    state_tree,
    value_at,
)
from almanac.events.forensics.tree_diff import Change, json_value, tree_diff
from almanac.events.room import RoomState
from almanac.events.step import CommandRecord, advance
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.pauses import YIELD_EVERY as YIELD_EVERY, pause_now_and_then
from almanac.services.forensics.verify import room_seed
from almanac.services.room_service import RoomService
from almanac.storage.base import EventStore
from almanac.storage.loader import RoomLoader

MAX_ROOM_ID = 64


def event_row(envelope: Envelope, event: Any = None) -> dict[str, Any]:
    """An event as forensics shows it: where, who, what (summary) and the decoded event."""
    event = codec.decode_event(envelope) if event is None else event
    try:
        summary = room_rules.summarize_event(envelope.ruleset, event)
    except Exception:  # a summary is a courtesy; a rule-set bug there must not hide the event
        summary = envelope.type
    return {"version": envelope.version, "type": envelope.type, "player": envelope.player,
            "command_id": envelope.command_id, "server_time_ms": envelope.server_time_ms, "summary": summary,
            "hash": envelope.hash, "event": codec.to_builtins(event)}


async def _envelopes(store: EventStore, room: str, field: str = "room") -> list[Envelope]:
    envelopes = await store.read(room)
    if not envelopes:
        raise ForensicsError(404, "room_not_found", f"room {room!r} not found (it has no events)", field)
    return envelopes


def _check_at(at: int | None, latest: int, room: str, field: str = "at") -> int:
    if at is None:
        return latest
    if not 1 <= at <= latest:
        raise ForensicsError(422, "version_out_of_range", f"room {room!r} has versions 1 to {latest}; "
                             f"{field} {at} is outside them", field)
    return at


# --- fork ---------------------------------------------------------------------------------------


def fork_id(parent: str, at: int) -> str:
    """A fresh fork room id: ``PARENT-fAT-XXXXXX`` (shortened to fit a room id)."""
    tail = f"-f{at}-{secrets.token_hex(3)}"
    return parent[: MAX_ROOM_ID - len(tail)] + tail


async def fork(loader: RoomLoader, parent: str, at: int, new_room: str | None, by: str, now_ms: int) -> dict[str, Any]:
    """Start a sandbox fork of ``parent`` at version ``at`` (its history by reference) through the engine's
    write path; the fork's answer: its room id, parent, version and the link hash."""
    new_room = new_room or fork_id(parent, at)
    record = CommandRecord(command_id=f"fork-{secrets.token_hex(12)}", room=new_room, player=by,
                           server_time_ms=now_ms, body={"kind": "fork_room", "parent": parent, "at": at})
    # The write path's own loader (a writer trusts its cache; this one caches nothing), not the reader's.
    outcome = await RoomService(loader.store, snapshot_every=0, cache_size=0).fork(record)
    if not outcome.accepted:
        error = outcome.error or {}
        status = {"room_not_found": 404, "room_exists": 409, "ruleset_not_installed": 409}.get(error.get("code", ""), 422)
        raise ForensicsError(status, error.get("code", "fork_refused"), error.get("message", "fork refused"),
                             error.get("field"), error.get("allowed"))
    forked = codec.decode_event(outcome.envelopes[0])
    return {"room": new_room, "parent": parent, "at": at, "parent_hash": forked.parent_hash,
            "ruleset": f"{forked.ruleset}@{forked.ruleset_version}", "version": 1,
            "seed_commitment": forked.seed_commitment}


# --- folding ------------------------------------------------------------------------------------


async def _fold_steps(loader: RoomLoader, envelopes: list[Envelope]):
    """(envelope, event, state after it) for each envelope, from the room's base (a fork's parent state)."""
    state = await loader.base_of(envelopes[0])
    for index, envelope in enumerate(envelopes):
        await pause_now_and_then(index)
        event = codec.decode_event(envelope)
        state = advance(state, envelope, event)
        yield envelope, event, state


async def state_at(loader: RoomLoader, room: str, version: int) -> RoomState:
    state, _ = await loader.load(room, version)
    assert state is not None
    return state


# --- diff ---------------------------------------------------------------------------------------


async def diff(loader: RoomLoader, room_a: str, room_b: str, at: int | None = None,
               at_b: int | None = None) -> dict[str, Any]:
    """Where two rooms' states differ (seats, scores, game state) at a version of each (default: latest), as JSON:
    a side that lacks a path is null there (``diff_changes`` keeps it ABSENT, for a table)."""
    answer, changes = await diff_changes(loader, room_a, room_b, at, at_b)
    return {**answer, "differences": [{"path": p, "a": json_value(a), "b": json_value(b)} for p, a, b in changes]}


async def diff_changes(loader: RoomLoader, room_a: str, room_b: str, at: int | None = None,
                       at_b: int | None = None) -> tuple[dict[str, Any], list[Change]]:
    """``diff``'s rooms, versions and note, and its changes as ``tree_diff`` gives them (ABSENT kept: a fork
    that seats nobody lacks the parent's seat, it does not seat null)."""
    store = loader.store
    latest_a = await store.latest_version(room_a)
    latest_b = await store.latest_version(room_b)
    for room, latest, field in ((room_a, latest_a, "room_a"), (room_b, latest_b, "room_b")):
        if latest == 0:
            raise ForensicsError(404, "room_not_found", f"room {room!r} not found (it has no events)", field)
    version_a = _check_at(at, latest_a, room_a)
    version_b = _check_at(at_b if at_b is not None else at, latest_b, room_b, "at_b" if at_b is not None else "at")
    state_a, state_b = await state_at(loader, room_a, version_a), await state_at(loader, room_b, version_b)
    if (state_a.ruleset, state_a.ruleset_version) != (state_b.ruleset, state_b.ruleset_version):
        note = (f"different rules: {state_a.ruleset}@{state_a.ruleset_version} and "
                f"{state_b.ruleset}@{state_b.ruleset_version}")
    else:
        note = ""
    changes = tree_diff(state_tree(state_a), state_tree(state_b))
    return ({"a": {"room": room_a, "version": version_a}, "b": {"room": room_b, "version": version_b}, "note": note},
            changes)


# --- explain ------------------------------------------------------------------------------------


async def explain(loader: RoomLoader, room: str, path_text: str, at: int | None = None) -> dict[str, Any]:
    """Every version (up to ``at``) whose event changed the value at the path, with the value before and after,
    by folding the room once and reading the path after each event."""
    try:
        path = parse_path(path_text)
    except PathError as error:
        raise ForensicsError.of(error) from None
    envelopes = await _envelopes(loader.store, room)
    version = _check_at(at, envelopes[-1].version, room)
    base = await loader.base_of(envelopes[0])
    previous = value_at(base, path)
    seen = previous is not MISSING
    changes: list[dict[str, Any]] = []
    state = base
    for index, envelope in enumerate(envelopes[:version]):
        await pause_now_and_then(index)
        event = codec.decode_event(envelope)
        state = advance(state, envelope, event)
        current = value_at(state, path)
        seen = seen or current is not MISSING
        if current is not previous and current != previous:
            changes.append({**event_row(envelope, event), "before": shown(previous), "after": shown(current)})
        previous = current
    if not seen:
        raise path_not_found(room, path, state, version, "path")
    answer = {"room": room, "path": path_text, "at": version, "value": shown(previous),
              "changes": changes, "folded": version}
    if state is not None and state.fork is not None:
        answer["fork"] = {"parent": state.fork.parent, "at": state.fork.at, "value_at_fork": shown(value_at(base, path)),
                          "note": "a fork starts from its parent's value: explain the parent for the changes before"}
    return answer


def path_not_found(room: str, path: Path, state: RoomState | None, version: int, field: str,
                   latest_only: bool = False) -> ForensicsError:
    """The one refusal of a path the room has no value at (explain, bisect): 422 path_not_found, with the names
    that are there where the path stops (``allowed``)."""
    said = (f"has no value at {path.text!r} at its latest version {version} (a linear scan reads every version: "
            "--linear on the CLI, linear=true on the API)"
            if latest_only else f"never had a value at {path.text!r} (up to version {version})")
    return ForensicsError(422, "path_not_found", f"room {room!r} {said}", field, allowed=children_at(state, path))


# --- bisect -------------------------------------------------------------------------------------


def _predicate(where: str) -> Predicate:
    try:
        return parse_predicate(where)
    except PathError as error:
        raise ForensicsError.of(error) from None


async def bisect_where(loader: RoomLoader, room: str, where: str, linear: bool = False) -> dict[str, Any]:
    """The first version at which ``where`` holds, with the event that made it hold.

    Binary search (the default) loads states through the one loader (snapshot + tail) and assumes the
    predicate is false at version 1... true at the latest; for a predicate that flips back and forth it
    finds *a* version v where it is false at v-1 and true at v. ``linear`` folds once and finds the first.
    """
    predicate = _predicate(where)
    store = loader.store
    latest = await store.latest_version(room)
    if latest == 0:
        raise ForensicsError(404, "room_not_found", f"room {room!r} not found (it has no events)", "room")
    probes = 0

    async def holds(version: int) -> bool:
        nonlocal probes
        probes += 1
        state, _ = await loader.load(room, version)
        return predicate.holds(state)

    found: int | None = None
    if linear:
        unseen = list(predicate.paths)  # a misspelt path is refused, not searched for in vain
        async for envelope, _, state in _fold_steps(loader, await store.read(room)):
            probes += 1
            unseen = [p for p in unseen if value_at(state, p) is MISSING]
            if predicate.holds(state):
                found = envelope.version
                break
        if found is None and unseen:
            raise path_not_found(room, unseen[0], state, latest, "where")
        note = "linear: the first version at which it holds"
    else:
        final = await state_at(loader, room, latest)
        probes += 1
        missing = [p for p in predicate.paths if value_at(final, p) is MISSING]
        if missing:  # binary search reads a few versions: a path the latest state lacks is refused
            raise path_not_found(room, missing[0], final, latest, "where", latest_only=True)
        found, note = await _binary_search(predicate.holds(final), holds, latest)
    answer: dict[str, Any] = {"room": room, "where": where, "method": "linear" if linear else "binary",
                              "latest": latest, "found": found is not None, "version": found, "probes": probes,
                              "note": note}
    if found is not None:
        before = await state_at(loader, room, found - 1) if found > 1 else await loader.base_of(
            (await store.read(room, 1, 1))[0])
        after = await state_at(loader, room, found)
        (envelope,) = await store.read(room, found, found)
        answer["event"] = event_row(envelope)
        answer["values"] = [{"path": p.text, "before": shown(value_at(before, p)), "after": shown(value_at(after, p))}
                            for p in predicate.paths]
    return answer


async def _binary_search(holds_at_latest: bool, holds, latest: int) -> tuple[int | None, str]:
    """The first version where ``holds`` (true at the latest), assuming false before and true after it."""
    if not holds_at_latest:
        return None, (f"it does not hold at the latest version {latest}: binary search needs it to hold at the end "
                      "(a linear scan reads every version: --linear on the CLI, linear=true on the API)")
    if await holds(1):
        return 1, "it holds from version 1"
    low, high = 1, latest  # false at low, true at high
    while high - low > 1:
        middle = (low + high) // 2
        if await holds(middle):
            high = middle
        else:
            low = middle
    return high, ("binary: false at the version before, true at this one (the first such version if the predicate, "
                  "once true, stays true; a linear scan finds the very first)")


def _ruleset_ref(against: str) -> tuple[str, int, Any]:
    name, _, version = against.partition("@")
    if not name or not version:
        raise ForensicsError(422, "invalid_ruleset", f"{against!r}: name a rule-set version as NAME@VERSION "
                             "(e.g. realm@2)", "against")
    try:
        parsed_name, parsed_version = registry.parse(against)
        assert parsed_version is not None
        return parsed_name, parsed_version, registry.at(parsed_name, parsed_version)
    except RulesNotInstalledError as error:
        raise ForensicsError(404, "unknown_version", error.message, "against", allowed=error.allowed) from None
    except RuleError as error:
        raise ForensicsError(404 if error.code == "unknown_ruleset" else 422, error.code, error.message, "against",
                             error.allowed) from None


async def _room_seed(store: EventStore, room: str, envelopes: list[Envelope]) -> bytes:
    created = codec.decode_event(envelopes[0])
    seed, source = await room_seed(store, room, created, envelopes)
    if source == "challenge":
        return seed  # type: ignore[return-value]
    if seed is None or seed_commitment(seed) != created.seed_commitment:
        raise ForensicsError(409, "seed_unavailable", f"room {room!r} has no usable seed (not revealed, not stored): "
                             "its dice cannot be drawn again", "room")
    return seed


async def bisect_against(loader: RoomLoader, room: str, against: str) -> dict[str, Any]:
    """Re-decide the room's recorded commands under ``against`` (NAME@VERSION) with the room's own seed, and
    report the first version whose events differ, with both sides (or that none do): ``events.forensics.redecide``, the
    loop verify runs, with its one rule for what is the same event."""
    name, version, manifest = _ruleset_ref(against)
    store = loader.store
    envelopes = await _envelopes(store, room)
    if envelopes[0].type == "room.forked":
        raise ForensicsError(422, "fork_not_supported", f"room {room!r} is a fork: bisect its parent against "
                             f"{against}", "room")
    created = codec.decode_event(envelopes[0])
    if created.ruleset != name:
        raise ForensicsError(422, "other_ruleset", f"room {room!r} plays {created.ruleset}, not {name}", "against",
                             allowed=[f"{created.ruleset}@{v}" for v in registry.versions(created.ruleset)])
    seed = await _room_seed(store, room, envelopes)
    # The players' nonces of a scheme-2 room (docs/dice.md): revealed by its end, else the ones the server holds.
    nonces = revealed_nonces(envelopes)
    nonces = nonces if nonces is not None else await store.load_nonces(room)
    spans = command_spans(await store.commands(room), len(envelopes))
    answer: dict[str, Any] = {"room": room, "ruleset": f"{created.ruleset}@{created.ruleset_version}",
                              "against": manifest.ref, "latest": envelopes[-1].version}
    checked = 0
    for index, wrong in enumerate(redecide_each(envelopes, spans, seed, manifest.ref, nonces=nonces)):
        await pause_now_and_then(index)
        if wrong is None:
            checked += 1
            continue
        found = {**answer, "diverged": True, "version": wrong.version, "commands_redecided": checked}
        if wrong.reason == "undecodable":
            raise ForensicsError(409, "corrupt_command", f"room {room!r}: the command recorded at version "
                                 f"{wrong.version} does not decode ({wrong.detail})", "room")
        if wrong.reason == "repeated":
            raise ForensicsError(409, "corrupt_command", f"room {room!r}: {wrong.detail}", "room")
        if wrong.reason == "refused":
            assert wrong.error is not None and isinstance(wrong.recorded, list)
            return {**found, "recorded": [event_row(e) for e in wrong.recorded],
                    "other": {"refused": wrong.error.to_dict()},
                    "note": f"command {wrong.command_id!r} is refused under {manifest.ref}"}
        theirs, mine = wrong.recorded, wrong.recomputed
        assert not isinstance(theirs, list)
        return {**found, "recorded": None if theirs is None else event_row(theirs),
                "other": None if mine is None else event_row(mine),
                "note": f"command {wrong.command_id!r} decides differently under {manifest.ref}"}
    return {**answer, "diverged": False, "version": None, "commands_redecided": checked,
            "note": f"every recorded command decides the same events under {manifest.ref}"}
