"""Where a whole-room fold gives its event loop back: a heavy read whose client left is cancelled there."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

from almanac.events import room as room_rules
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.forensics.redecide import Redecided, Span, redecide_each

# A fold gives the event loop back every this many events (or re-decided commands): a gateway answering an
# auditor's explain of a long room must keep answering everyone else meanwhile (a 100,000-event fold is seconds of
# CPU), and a heavy read (services.gateway.heavy_reads) is cancelled only at an ``await``: without these a client
# that asked for a 20,000-version /verification and hung up held one of the gateway's two slots to the fold's end.
YIELD_EVERY = 200


async def pause_now_and_then(index: int, every: int = YIELD_EVERY) -> None:
    """Give the loop back once every ``every`` calls (``index`` counts them)."""
    if index % every == every - 1:
        await asyncio.sleep(0)


async def redecide_in_spans(recorded: Sequence[Envelope], spans: Iterable[Span], seed: bytes, ruleset: str, *,
                            nonces: Mapping[str, bytes] | None = None, state: room_rules.RoomState | None = None,
                            folded: int = 0, last_hash: str = GENESIS_HASH) -> Redecided:
    """``events.forensics.redecide.redecide`` (the same answer, arguments as there), its pure per-command generator
    driven from here with a pause every ``YIELD_EVERY`` commands."""
    count = 0
    for index, mismatch in enumerate(redecide_each(recorded, spans, seed, ruleset, nonces=nonces, state=state,
                                                   folded=folded, last_hash=last_hash)):
        if mismatch is not None:
            return Redecided(count, mismatch)
        count += 1
        await pause_now_and_then(index)
    return Redecided(count, None)
