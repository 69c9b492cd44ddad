"""Player-safe bundles (docs/bundle-format.md section 6): a live room's whole commitment chain as one player may see
it, their view and the public part of every event opened, every other view only as its salted leaf hash."""

from __future__ import annotations

from typing import Any

from almanac.events import commitments as cm, readable
from almanac.events.forensics.player_check import (
    PLAYER_BUNDLE_FORMAT,
    PLAYER_BUNDLE_FORMAT_VERSION,
    PLAYER_BUNDLE_LIMITS,
    player_audience,
)
from almanac.services.checkpoints import Checkpointer
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.pauses import pause_now_and_then


async def player_bundle(store: Any, checkpointer: Checkpointer, room: str, player: str,
                        exported_at_ms: int) -> dict[str, Any]:
    """The bundle ``player`` may hold of ``room``: every version 1..head, each with the public view and (when the
    rules give them one) the player's own view opened (view bytes and salt), and every other audience's leaf hash;
    the server's signed checkpoint on the head and the key set. Only rooms on scheme v2 have one."""
    envelopes = await store.read(room, 1, None)
    if not envelopes:
        raise ForensicsError(404, "room_not_found", f"room {room!r} does not exist", "room")
    scheme = await checkpointer.scheme(store, room)
    if scheme != cm.SCHEME_V2:
        raise ForensicsError(409, "scheme_v1", f"room {room!r} commits to whole events ({scheme}, it predates "
                             f"{cm.SCHEME_V2}): no part of an event can be opened without opening all of it, so no "
                             "player-safe bundle exists for it; ask an auditor, or for a bundle once it has ended",
                             "room")
    key = checkpointer.room_key(room)
    events, head = [], cm.HEAD_0
    for index, envelope in enumerate(envelopes):
        await pause_now_and_then(index)  # a bundle of a long room is a heavy read: where its client's leaving stops it
        views = cm.views(envelope)
        leaves = {label: cm.leaf(label, cm.leaf_salt(key, envelope.version, label), view)
                  for label, view in views.items()}
        opened = {label: {"salt": cm.leaf_salt(key, envelope.version, label).hex(), "view": readable.b64(views[label])}
                  for label in (cm.PUBLIC, player) if label in views}
        events.append({"version": envelope.version, "opened": opened,
                       "leaves": {label: value.hex() for label, value in sorted(leaves.items()) if label not in opened}})
        head = cm.next_head(head, cm.root(leaves), scheme)
    return {
        "audience": player_audience(player),
        "format": PLAYER_BUNDLE_FORMAT,
        "format_version": PLAYER_BUNDLE_FORMAT_VERSION,
        "room": room,
        "player": player,
        "exported_at_ms": exported_at_ms,
        "scheme": scheme,
        "limits": PLAYER_BUNDLE_LIMITS,
        "events": events,
        "checkpoint": checkpointer.ring.sign(room, len(envelopes), head),
        "keys": checkpointer.ring.document,
    }
