"""Helpers shared by the sectors tests (no tests here): explicit colonies, picking events, refusals, stored logs."""

from __future__ import annotations

from typing import Any

import pytest
from sectors_sandbox import Sandbox

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import RuleError
from almanac.events.hashing import seal

# A stock no story runs short of unless it says so.
PLENTY = {"food": 100_000, "wood": 10_000, "gold": 10_000, "lumber": 1_000, "coins": 1_000}


def sector(kind: str, population: int, *buildings: str, row: int = 0, column: int = 0, **more: Any) -> dict:
    """One explored sector of an explicit setup, buildings oldest first."""
    return {
        "row": row,
        "column": column,
        "type": kind,
        "population": population,
        "buildings": list(buildings),
        **more,
    }


def colony(
    *sectors: dict[str, Any], stock: dict[str, int] | None = None, years: int = 100, **setup: Any
) -> Sandbox:
    """A sandbox over an explicit colony (spring of year 1 and a plentiful stock unless told)."""
    explicit = {"stock": PLENTY if stock is None else stock, "sectors": list(sectors), **setup}
    return Sandbox({"setup": explicit, "years": years})


def only(events: list[Any], kind: type, row: int = 0, column: int = 0) -> Any:
    """The one event of ``kind`` about the sector at (row, column)."""
    [event] = [e for e in events if isinstance(e, kind) and (e.row, e.column) == (row, column)]
    return event


def refusal(game: Sandbox, command: Any, **kwargs: Any) -> RuleError:
    """The rules' refusal of ``command``, checking that it recorded and changed nothing."""
    before, logged = game.state, len(game.log)
    with pytest.raises(RuleError) as caught:
        game.play(command, **kwargs)
    assert game.state is before and len(game.log) == logged, "a refused command changes nothing"
    return caught.value


def setup_refusal(options: dict[str, Any]) -> RuleError:
    with pytest.raises(RuleError) as caught:
        Sandbox(options)
    return caught.value


def stored(game: Sandbox) -> list[Envelope]:
    """The sandbox's log as the store keeps it: encoded, enveloped and hash-chained."""
    sealed = []
    previous = GENESIS_HASH
    for version, event in game.log:
        kind, payload = codec.encode_event(event)
        envelope = seal(
            Envelope(
                room=game.room_id,
                version=version,
                ruleset="sectors",
                type=kind,
                payload=payload,
                command_id=f"command-{version}",
                player="owner",
                server_time_ms=version * 1000,
                previous_hash=previous,
            )
        )
        previous = envelope.hash
        sealed.append(envelope)
    return sealed
