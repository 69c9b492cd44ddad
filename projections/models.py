"""Pure projection functions: a room's state and new events in, one read model's rows out."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events import registry
from almanac.events.codec import to_builtins
from almanac.events.envelope import Envelope
from almanac.events.room import RoomState

# The read models by name, as `almanac projections rebuild NAME` knows them.
READ_MODELS: tuple[str, ...] = ("rooms", "leaderboards", "claims", "trades")

CLAIM_RULESET = "claim"


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
    claim: dict[str, Any] | None = None
    trade_rows: list[dict[str, Any]] = []


def room_summary(state: RoomState, updated_at_ms: int) -> dict[str, Any]:
    """Per-room read model: who plays, how far the room is, its scores and resources."""
    decider = registry.get(state.ruleset)
    return {
        "room": state.room,
        "ruleset": state.ruleset,
        "version": state.version,
        "players": list(state.players),
        "scores": dict(decider.public_scores(state.game)),
        "resources": to_builtins(decider.resources(state.game)),
        "over": bool(decider.is_over(state.game)),
        "ended": state.ended,
        "end_reason": state.end_reason,
        "challenge": state.challenge,
        "created_by": state.created_by,
        "created_at_ms": state.created_at_ms,
        "updated_at_ms": updated_at_ms,
    }


def room_listing(summary: dict[str, Any]) -> dict[str, Any]:
    """Room listing row: the summary without the heavy parts (scores, resources)."""
    return {k: v for k, v in summary.items() if k not in ("scores", "resources", "end_reason")}


def leaderboard_scores(state: RoomState) -> dict[str, int]:
    """This room's contribution to its rule-set's leaderboard: each seated player's current public score."""
    return {player: int(score) for player, score in registry.get(state.ruleset).public_scores(state.game).items()}


def claim_entry(state: RoomState) -> dict[str, Any] | None:
    """Claim registry row for a claim room: owner, block and the parcels they hold; None for other rule-sets."""
    if state.ruleset != CLAIM_RULESET:
        return None
    game = state.game
    # The claim's view is public (anyone may walk a claim) and names every parcel.
    view = registry.get(state.ruleset).view(game, game.owner)
    parcels = [
        {
            "name": parcel.get("name"),
            "zone": parcel.get("zone"),
            "species": parcel.get("species"),
            "building": parcel.get("building"),
        }
        for parcel in view.get("parcels", [])
    ]
    return {
        "room": state.room,
        "owner": game.owner,
        "block": game.block,
        "created_at_ms": state.created_at_ms,
        "proved_up_ms": view.get("proved_up_ms"),
        "score": view.get("score"),
        "parcel_count": len(parcels),
        "timbered_parcels": sum(1 for p in parcels if p["species"]),
        "buildings": sorted(p["building"] for p in parcels if p["building"]),
        "parcels": parcels,
    }


def trade_rows(envelope: Envelope, event: Any) -> list[dict[str, Any]]:
    """Trade ledger rows: one per event that carries a trade id, with everything that event records."""
    trade_id = getattr(event, "trade_id", None)
    if trade_id is None:
        return []
    tag_field = event.__struct_config__.tag_field
    detail = {k: v for k, v in to_builtins(event).items() if k != tag_field}
    return [
        {
            "room": envelope.room,
            "version": envelope.version,
            "trade": trade_id,
            "type": envelope.type,
            "player": envelope.player,
            "time_ms": envelope.server_time_ms,
            "summary": registry.get(envelope.ruleset).summary(event),
            # Dice, stars, phantom goods, transfers, holdings after: whatever the step's event names.
            "detail": detail,
        }
    ]


def project_room(
    before: RoomState | None, after: RoomState, events: list[tuple[Envelope, Any]]
) -> RoomUpdate:
    """The read-model update for a room that went from ``before`` to ``after`` through ``events``.

    State-derived models depend only on ``after``, so any batching of the same events (live or a
    rebuild) ends in the same rows.
    """
    updated_at_ms = events[-1][0].server_time_ms if events else after.created_at_ms
    summary = room_summary(after, updated_at_ms)
    scores = leaderboard_scores(after)
    previous = leaderboard_scores(before) if before is not None else {}
    rows: list[dict[str, Any]] = []
    for envelope, event in events:
        rows.extend(trade_rows(envelope, event))
    return RoomUpdate(
        room=after.room,
        ruleset=after.ruleset,
        version=after.version,
        summary=summary,
        listing=room_listing(summary),
        scores=scores,
        dropped_players=tuple(sorted(set(previous) - set(scores))),
        claim=claim_entry(after),
        trade_rows=rows,
    )
