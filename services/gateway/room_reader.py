"""The gateway's read path over the event store: latest room state (cached, caught up from the tail) and event rendering."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import msgspec

from almanac.events import codec, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.room import RoomState
from almanac.events.shown import Shown
from almanac.projections.read_model_rows import fork_mark
from almanac.services.gateway.errors import ApiError
from almanac.storage.loader import RoomLoader

# Latest room states the gateway's loader keeps (each caught up from its stream's tail before use).
READER_CACHE = 5_000
# Rooms whose rule-set this gateway remembers (a room's never changes): the oldest is forgotten first, and
# read again from its first event if it plays on.
RULESETS_KNOWN = 100_000


class RoomReader:
    """Not a writer: the cache is only a starting point, always caught up from the stream before use."""

    def __init__(self, loader: RoomLoader) -> None:
        """``loader``: the gateway's one room loader (``bootstrap.Runtime.loader(READER_CACHE)``)."""
        self.loader = loader
        self.store = loader.store  # the runtime's Redis store
        self._rulesets: OrderedDict[str, str] = OrderedDict()

    async def ruleset_of(self, room: str) -> str | None:
        """The room's rules as its envelopes name them (``realm`` = version 1, ``realm@2``; it never changes),
        None when the room does not exist."""
        known = self._rulesets.get(room)
        if known is not None:
            return known
        first = await self.store.read(room, 1, 1)
        if not first:
            return None
        self.remember_ruleset(room, first[0].ruleset)
        return first[0].ruleset

    def remember_ruleset(self, room: str, ruleset: str) -> None:
        """``room`` plays by ``ruleset`` (as its envelopes name it), as a read found it: bounded, oldest first."""
        rulesets = self._rulesets
        if room not in rulesets and len(rulesets) >= RULESETS_KNOWN:
            # OrderedDict: a plain dict's first key is found by scanning past every key deleted before it
            # (measured: 72 us a new room on average, 11 ms at worst, once 100,000 were known).
            rulesets.popitem(last=False)
        rulesets[room] = ruleset

    async def latest(self, room: str) -> RoomState | None:
        state, _ = await self.loader.latest(room)
        if state is not None:
            self.remember_ruleset(room, room_rules.stored_ref(state))
        return state

    async def at_version(self, room: str, version: int) -> RoomState | None:
        state, _ = await self.loader.load(room, version)
        return state


class Viewer(msgspec.Struct, frozen=True, kw_only=True):
    """Who reads: the one place that decides what a read shows (every read route and the live feed ask it).

    The public (no token) and every player see the rule-set's public scores and events redacted for them;
    a player also sees their own view. Only an auditor sees the complete scores, states and events.
    """

    player: str = ""  # "" for the public: nobody's seat, so every secret is hidden from it
    auditor: bool = False

    def event(self, envelope: Envelope, shown: Shown | None = None) -> dict[str, Any]:
        """The event as this reader receives it (``shown``: the event's ``events.shown.Shown``, when the caller
        holds one: it is not decoded or redacted again)."""
        if self.auditor:
            return auditor_event(envelope, shown.event if shown is not None else None)
        return (shown if shown is not None else Shown(envelope)).form(self.player)

    def scores(self, state: RoomState) -> dict[str, int]:
        """Complete scores for an auditor; for everyone else the public ones (a player's own complete score
        is in their view)."""
        decider = room_rules.decider_of(state)
        return dict(decider.scores(state.game) if self.auditor else decider.public_scores(state.game))

    def whose_view(self, player: str | None) -> str:
        """The seat whose view a read asking for ``player`` shows: an auditor names any, a player only their own."""
        if self.auditor:
            if player is None:
                raise ApiError(422, "player_required", "an auditor names the player whose view to show", "player")
            return player
        if player is not None and player != self.player:
            raise ApiError(403, "other_seat", f"this token shows {self.player!r}'s view only", "player")
        return self.player

    def view(self, state: RoomState, player: str | None = None) -> Any:
        """The view of ``whose_view(player)`` (the rule-set's view: hidden information left out)."""
        return codec.to_builtins(room_rules.manifest_of(state).shown_view(state.game, self.whose_view(player)))


PUBLIC = Viewer()


def auditor_event(envelope: Envelope, event: Any = None) -> dict[str, Any]:
    """Everything stored about an event, decoded (``event``: decoded already), with its place in the hash chain."""
    if event is None:
        event = codec.decode_event(envelope)
    try:
        summary = room_rules.summarize_recorded(envelope.ruleset, event, envelope.command_id)
    except Exception:  # a summary is a courtesy; a rule-set bug there must not hide the event
        summary = envelope.type
    return {
        "version": envelope.version,
        "type": envelope.type,
        "player": envelope.player,
        "server_time_ms": envelope.server_time_ms,
        "command_id": envelope.command_id,
        "previous_hash": envelope.previous_hash,
        "hash": envelope.hash,
        "summary": summary,
        "event": codec.to_builtins(event),
    }


def room_summary(state: RoomState) -> dict[str, Any]:
    manifest = room_rules.manifest_of(state)
    return {
        **room_rules.describe(state),
        "seats": list(manifest.decider.seats(state.game)),
        "seed_commitment": state.seed_commitment,
        # What the console draws the room with and the audit views it offers (auditors), by the room's version.
        "picture": f"/rulesets/{manifest.ref}/picture.js" if manifest.console_picture else None,
        "audit_views": [view.name for view in manifest.audit_views],
        "fork": fork_mark(state),
        "dice_scheme": state.dice_scheme,
        # The room's bot policy (``room.bot_policy``), or None: only with one may a player leave their seat to a bot.
        "bot_policy": {"after_missed": state.bot_after_missed} if room_rules.has_bot_policy(state) else None,
    }
