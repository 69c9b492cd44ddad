"""Audit views: one thing's whole story told from a room's log by its rule-set's audit view (CLI, HTTP, bundles)."""

from __future__ import annotations

import json
from typing import Any

from almanac.events import codec, registry
from almanac.events.envelope import Envelope
from almanac.events.manifest import AuditView
from almanac.events.step import CommandRecord, decode_record
from almanac.services.forensics.errors import ForensicsError
from almanac.storage.base import EventStore

SHOWN_IDS = 20  # the ids a refusal names (a long room follows thousands of trades)


def offered_view(envelopes: list[Envelope], room: str, view: str) -> tuple[AuditView, list[tuple[Envelope, Any]]]:
    """The audit view ``view`` of the room's own rule-set version and the room's (envelope, event) pairs;
    404 ``audit_view_not_found`` naming the views it offers."""
    manifest = registry.stored(envelopes[0].ruleset)  # the room's own version
    offered = manifest.audit_view(view)
    if offered is None:
        names = [v.name for v in manifest.audit_views]
        raise ForensicsError(404, "audit_view_not_found", f"room {room!r} is a {manifest.name} room, which offers no "
                             f"audit view {view!r}; its audit views: {', '.join(names) or 'none'}", "view",
                             allowed=names)
    return offered, [(e, codec.decode_event(e)) for e in envelopes]


def story(envelopes: list[Envelope], room: str, view: str, item: str) -> list[dict[str, Any]]:
    """``item``'s steps as the audit view tells them from the log; 404 ``<view>_not_found`` naming some it knows."""
    offered, pairs = offered_view(envelopes, room, view)
    steps = offered.steps(pairs, item)
    if not steps:
        known = list(offered.ids(pairs))
        shown = ", ".join(known[:SHOWN_IDS]) + (f" and {len(known) - SHOWN_IDS} more" if len(known) > SHOWN_IDS else "")
        raise ForensicsError(404, f"{view}_not_found", f"room {room!r} has no {view} {item!r}; its {view}s: "
                             f"{shown or 'none'}", "item")
    return steps


async def refusals_around(store: EventStore, room: str, item: str, first_ms: int,
                          last_ms: int) -> list[tuple[CommandRecord, dict[str, Any]]]:
    """The refused commands that name ``item`` or were sent while its story ran, with their recorded errors."""
    refused = []
    for data in await store.rejections(room):
        record = decode_record(data)
        if item in json.dumps(record.body) or first_ms <= record.server_time_ms <= last_ms:
            outcome = await store.outcome(room, record.command_id)
            refused.append((record, (outcome.error if outcome else None) or {}))
    return refused
