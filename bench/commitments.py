"""`almanac bench commitments`: the commitment head per event, scheme v2 against v1, for every rule-set.

The gateway computes ``head_v`` for every new event it signs a checkpoint for (services.checkpoints), on the
command's answer path. Scheme v1 hashes the stored event once; scheme v2 (docs/bundle-format.md section 6)
commits to every audience's view, so it decodes the event and redacts it per audience. Each rule-set's bench
scenario is played on the engine's write path (no Redis) and its stored envelopes timed through
``commitments.heads``: v1 (the baseline, same run), v2 as it is now, and v2 as it first landed (kept below,
``first_views``, so a change to the v2 path is measured against it in the same run; every head must be equal).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rich.table import Table

from almanac.bench.common import output_console
from almanac.bench.dispute_bundles import ROOM, build_room
from almanac.events import codec, commitments as cm, registry
from almanac.events.envelope import Envelope
from almanac.events.shown import Shown, shown_form, shown_to

KEY = bytes(range(32))


def first_views(envelope: Envelope) -> dict[str, bytes]:
    """``commitments.views`` as scheme v2 first landed: every audience decoded, redacted and encoded on its own."""
    event = codec.decode_event(envelope)
    decider = registry.stored(envelope.ruleset).decider
    result = {cm.FULL: cm.event_body(envelope),
              cm.PUBLIC: cm.view_bytes(envelope, shown_form(envelope, decider.redact(event, cm.PUBLIC)))}
    seats = {envelope.player} if envelope.player else set()
    for secret in decider.secrets.get(type(event), ()):
        seats.update(secret.seen_by(event))
    for seat in sorted(seats - {cm.PUBLIC, cm.FULL}):
        seen = cm.view_bytes(envelope, shown_form(envelope, decider.redact(event, seat)))
        if seen != result[cm.PUBLIC]:
            result[seat] = seen
    return result


def first_heads(key: bytes, envelopes: list[Envelope]) -> list[bytes]:
    """``commitments.heads(key, envelopes, SCHEME_V2)`` computed the first way (a fresh HMAC per leaf)."""
    result, head = [], cm.HEAD_0
    for envelope in envelopes:
        leaves = {label: cm.leaf(label, cm.hmac.new(key, cm._SALT_V2 + envelope.version.to_bytes(8, "big")
                                                     + label.encode(), cm.hashlib.sha256).digest(), view)
                  for label, view in first_views(envelope).items()}
        head = cm.next_head(head, cm.root(leaves), cm.SCHEME_V2)
        result.append(head)
    return result


def answer_separately(key: bytes, envelopes: list[Envelope]) -> list[bytes]:
    """The gateway's answer path as it was before ``events.shown``: each event decoded and redacted for the player
    it answers (``player_event``), then decoded and redacted again per audience for its checkpoint's v2 views."""
    result = []
    for envelope in envelopes:
        shown_to(envelope, envelope.player)
        result.append(cm.root(_leaves_alone(key, envelope)))
    return result


def _leaves_alone(key: bytes, envelope: Envelope) -> dict[str, bytes]:
    return cm.leaves_of(key, envelope)  # (a Shown of its own: the event decoded and redacted again)


def answer_shared(key: bytes, envelopes: list[Envelope]) -> list[bytes]:
    """The gateway's answer path now (services.gateway.api_rooms._shown_and_signed): one ``Shown`` per event makes
    the player's answer and the checkpoint's v2 views (decoded once, the player's redaction reused)."""
    result = []
    for envelope in envelopes:
        shown = Shown(envelope)
        shown.form(envelope.player)
        result.append(cm.event_commitment(key, envelope, cm.SCHEME_V2, shown))
    return result


def decode_all(key: bytes, envelopes: list[Envelope]) -> list[Any]:
    """A reference: every event decoded once (what any reader of the event pays), nothing hashed."""
    return [codec.decode_event(envelope) for envelope in envelopes]


def per_event_us(functions: list[Any], envelopes: list[Envelope], seconds: float) -> list[float]:
    """CPU microseconds per event of each ``function(KEY, envelopes)``: the functions run in turn, round after
    round, for about ``seconds`` in all, and each keeps its best round (the machine may be busy: alternating puts
    every function under the same load, CPU time leaves out the time other processes hold the core)."""
    best = [float("inf")] * len(functions)
    spent = 0.0
    while spent < seconds or float("inf") in best:
        for index, function in enumerate(functions):
            start = time.process_time()
            function(KEY, envelopes)
            elapsed = time.process_time() - start
            best[index], spent = min(best[index], elapsed), spent + elapsed
    return [round_time / len(envelopes) * 1e6 for round_time in best]


def audiences(envelopes: list[Envelope]) -> float:
    return sum(len(cm.views(envelope)) for envelope in envelopes) / len(envelopes)


def main(events: int = 400, seconds: float = 1.0) -> None:
    console = output_console(minimum=140)
    table = Table("rule-set", "events", "views/event", "v1 us/event", "v2 now us/event", "x v1",
                  "v2 first us/event", "x v1", "now / first", "decode only us/event",
                  "answer+v2 separate us/event", "answer+v2 shared us/event", "shared / separate")
    for name in registry.names():
        if registry.manifest(name).bench is None:
            continue
        envelopes = asyncio.run(_room(events, name))
        now_heads = cm.heads(KEY, envelopes, cm.SCHEME_V2)
        if now_heads != first_heads(KEY, envelopes):
            raise SystemExit(f"{name}: scheme v2 heads differ from the first implementation's: a hashed byte changed")
        if answer_separately(KEY, envelopes) != answer_shared(KEY, envelopes):
            raise SystemExit(f"{name}: a shared Shown gives other v2 commitments than a fresh one")
        v1, v2, first, decode, separate, shared = per_event_us(
            [lambda key, log: cm.heads(key, log, cm.SCHEME), lambda key, log: cm.heads(key, log, cm.SCHEME_V2),
             first_heads, decode_all, answer_separately, answer_shared], envelopes, seconds)
        table.add_row(name, f"{len(envelopes):,}", f"{audiences(envelopes):.2f}", f"{v1:.1f}", f"{v2:.1f}",
                      f"{v2 / v1:.1f}", f"{first:.1f}", f"{first / v1:.1f}", f"{v2 / first:.2f}", f"{decode:.1f}",
                      f"{separate:.1f}", f"{shared:.1f}", f"{shared / separate:.2f}")
    console.print(f"[bold]bench commitments[/]: head per event (commitments.heads over each rule-set's bench game, "
                  f"up to {events} events, played on the engine's write path; no Redis); CPU time, best round of ~{seconds} s of alternating rounds; "
                  "v1 is the same-run baseline; every v2 head checked equal to the first implementation's; "
                  "answer+v2: an accepted command's answer for its player plus its checkpoint's v2 commitment, "
                  "each event decoded and redacted apart (before events.shown) or from one shared Shown (now)")
    console.print(table)


async def _room(events: int, name: str) -> list[Envelope]:
    store = await build_room(events, name)
    return await store.read(ROOM)
