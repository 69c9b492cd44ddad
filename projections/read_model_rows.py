"""Pure projection functions: a room's state and new events in, one read model's rows out."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events import registry, room as room_rules
from almanac.events.codec import to_builtins
from almanac.events.envelope import Envelope
from almanac.events.room import RoomState

# The read models the core keeps for every room; rule-sets add theirs through their manifests.
CORE_MODELS: tuple[str, ...] = ("rooms", "leaderboards")


def model_names() -> tuple[str, ...]:
    """Every read model by name, as `almanac projections rebuild NAME` knows them: the core's, then the rule-sets'."""
    return CORE_MODELS + tuple(sorted(registry.read_models()))


class RoomUpdate(msgspec.Struct, kw_only=True):
    """Everything the read models learn from one room moving from ``before`` to ``after``."""

    room: str
    ruleset: str
    version: int
    summary: dict[str, Any]
    listing: dict[str, Any]
    scores: dict[str, int]
    # Players who had a leaderboard entry for this room before and no longer score in it.
    dropped_players: tuple[str, ...] = ()
    # ``scores`` are the room's scores before the update too (the projector then need not write them again).
    scores_unchanged: bool = False
    # The rule-set's read models: model name -> the room's row (per-room models) ...
    rows: dict[str, dict[str, Any]] = {}
    # ... or model name -> (version, row) of each new event's rows (ledgers).
    ledgers: dict[str, list[tuple[int, dict[str, Any]]]] = {}


def room_summary(state: RoomState, updated_at_ms: int) -> dict[str, Any]:
    """Per-room read model: who plays, how far the room is, its scores and resources."""
    decider = room_rules.decider_of(state)
    return {
        **room_rules.describe(state),
        "scores": dict(decider.public_scores(state.game)),
        "resources": to_builtins(decider.resources(state.game)),
        "updated_at_ms": updated_at_ms,
        # A sandbox fork names its parent and the parent's version it starts from (None: a real room).
        "fork": fork_mark(state),
    }


def fork_mark(state: RoomState) -> dict[str, Any] | None:
    """``{parent, at}`` for a sandbox fork, None for a real room: every read model shows it."""
    return None if state.fork is None else {"parent": state.fork.parent, "at": state.fork.at}


def room_listing(summary: dict[str, Any]) -> dict[str, Any]:
    """Room listing row: the summary without the heavy parts (scores, resources)."""
    return {k: v for k, v in summary.items() if k not in ("scores", "resources", "end_reason")}


def leaderboard_scores(state: RoomState, created: room_rules.RoomCreated | None = None) -> dict[str, int]:
    """This room's contribution to its rule-set's leaderboard: each seated player's current public score, once
    every seat is taken (a seat nobody took is a starting score and, in realm, a city nobody defends). None from a
    sandbox fork (what-if games never rank), a challenge room (its public seed makes every roll predictable by
    design, docs/dice.md), nor a room whose creation ``created`` (its ``room.created``, when known) set up otherwise
    than the standard game (its manifest's ``ranks``): their scores do not compare."""
    if state.fork is not None or state.challenge is not None:
        return {}
    ranks = room_rules.manifest_of(state).ranks
    if created is not None and ranks is not None and not ranks(created.setup):
        return {}
    decider = room_rules.decider_of(state)
    seated = set(state.players)
    if not seated.issuperset(decider.seats(state.game)):
        return {}
    return {player: int(score) for player, score in decider.public_scores(state.game).items() if player in seated}


def created_in(events: list[tuple[Envelope, Any]]) -> room_rules.RoomCreated | None:
    """The room's ``room.created`` when ``events`` hold its version 1."""
    return next((event for envelope, event in events
                 if envelope.version == 1 and isinstance(event, room_rules.RoomCreated)), None)


def project_room(
    before: RoomState | None, after: RoomState, events: list[tuple[Envelope, Any]],
    created: room_rules.RoomCreated | None = None,
) -> RoomUpdate:
    """The read-model update for a room that went from ``before`` to ``after`` through ``events``; ``created``: the
    room's ``room.created`` (found in ``events`` when they start the room; the projector reads it otherwise).

    State-derived models depend only on ``after`` and the room's creation, so any batching of the same events (live
    or a rebuild) ends in the same rows.
    """
    updated_at_ms = events[-1][0].server_time_ms if events else after.created_at_ms
    summary = room_summary(after, updated_at_ms)
    created = created or created_in(events)
    scores = leaderboard_scores(after, created)
    # A fork's ``before`` at its version 1 is its parent's state: never the fork's own entries. (Entries written
    # before a room was judged as it is now, e.g. by an earlier release, are in ``previous`` and leave.)
    previous = leaderboard_scores(before) if before is not None and before.room == after.room else {}
    rows: dict[str, dict[str, Any]] = {}
    ledgers: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for model in room_rules.manifest_of(after).read_models:
        if model.room_row is not None:
            row = model.room_row(after)
            if row is not None:
                rows[model.name] = row
        else:
            found = [(envelope.version, row) for envelope, event in events for row in model.event_rows(envelope, event)]
            if found:
                ledgers[model.name] = found
    mark = fork_mark(after)
    if mark is not None:  # a fork's rows say so in every model, the rule-sets' too
        rows = {name: {**row, "fork": mark} for name, row in rows.items()}
        ledgers = {name: [(v, {**row, "fork": mark}) for v, row in found] for name, found in ledgers.items()}
    return RoomUpdate(
        room=after.room,
        ruleset=after.ruleset,
        version=after.version,
        summary=summary,
        listing=room_listing(summary),
        scores=scores,
        dropped_players=tuple(sorted(set(previous) - set(scores))),
        scores_unchanged=before is not None and before.room == after.room and previous == scores,
        rows=rows,
        ledgers=ledgers,
    )
