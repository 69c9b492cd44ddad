"""What a reader is shown of an event: the one function the gateway's answers and live feed, the notifier's webhooks
and the v2 commitments (``events.commitments.views``) all take it from, so a view committed to is, by construction,
the event as that reader was sent it.

A reader is a seat (a player id) or ``""``: nobody's seat, so every secret is hidden (the public, and the
commitments' ``PUBLIC`` audience). What they are shown is the rule-set's redaction of the event for them (its
declared secrets, ``events.disclosure``), as ``shown_form`` lays it out; None from the rule-set means they learn only
that the version exists. Pure: nothing here reads a clock, draws randomness or does I/O.
"""

from __future__ import annotations

from typing import Any

from almanac.events import codec, registry
from almanac.events.envelope import Envelope

PUBLIC = ""  # the reader with no seat (every secret hidden); the commitments' audience label of the public part


def shown_form(envelope: Envelope, redaction: Any) -> dict[str, Any]:
    """The event as a reader receives it, given the rule-set's redaction of it for them: no hashes and no command
    id (a hash could confirm a guess of a hidden value); ``{"version", "hidden": true}`` when the redaction is None
    (the version still advances, so a live client can resume after it)."""
    if redaction is None:
        return {"version": envelope.version, "hidden": True}
    return {"version": envelope.version, "type": envelope.type, "player": envelope.player,
            "server_time_ms": envelope.server_time_ms, "event": codec.to_builtins(redaction)}


class Shown:
    """One event and what each reader is shown of it, each worked out once: the event decoded once (or handed in,
    decoded already), the rule-set's redaction once per reader, the shown form once per distinct redaction (a
    rule-set returns the same object to every reader who sees the event alike). One answer's events, the live
    feed's and the commitment views of its checkpoint share one ``Shown`` per event, so none is redone."""

    __slots__ = ("_forms", "_redactions", "decider", "envelope", "event")

    def __init__(self, envelope: Envelope, event: Any = None) -> None:
        self.envelope = envelope
        self.event = codec.decode_event(envelope) if event is None else event
        self.decider = registry.stored(envelope.ruleset).decider
        self._redactions: dict[str, Any] = {}
        self._forms: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(redaction) -> (it, held alive; its form)

    def redaction(self, reader: str) -> Any:
        """The rule-set's redaction of the event for ``reader`` (a seat, or ``""`` for nobody's)."""
        try:
            return self._redactions[reader]
        except KeyError:
            redacted = self._redactions[reader] = self.decider.redact(self.event, reader)
            return redacted

    def kept_form(self, reader: str) -> dict[str, Any]:
        """``reader``'s shown form, shared by every reader shown the same redaction: read it, never change it."""
        redacted = self.redaction(reader)
        known = self._forms.get(id(redacted))
        if known is None:
            known = self._forms[id(redacted)] = (redacted, shown_form(self.envelope, redacted))
        return known[1]

    def form(self, reader: str) -> dict[str, Any]:
        """The event as ``reader`` receives it (``shown_form``): a dict of the caller's own (a feed adds to it)."""
        return dict(self.kept_form(reader))


def shown_to(envelope: Envelope, reader: str, event: Any = None) -> dict[str, Any]:
    """The event as ``reader`` receives it (``""``: nobody's seat), for a caller with one reader (``Shown`` for
    several); ``event``: the envelope's event decoded already, when the caller has it."""
    return Shown(envelope, event).form(reader)
