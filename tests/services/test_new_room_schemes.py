"""Every room created now commits per viewer (scheme almanac-commit-v2), whatever its seed: a challenge room (a public
seed, nothing drawn) and the rooms `almanac sim` plays, as much as a room with a drawn secret seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from almanac.events import commitments as cm
from almanac.events.step import CommandRecord
from almanac.services.cli import sim_commands
from almanac.services.room_service import RoomService
from almanac.storage.memory_store import MemoryEventStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def created(body: dict) -> str | None:
    store = MemoryEventStore()
    outcome = await RoomService(store).handle(CommandRecord(command_id="c", room="r", player="ann",
                                                            server_time_ms=1, body=body))
    assert outcome.accepted, outcome.error
    return await store.load_commit_scheme("r")


async def test_a_challenge_room_commits_per_viewer_like_a_room_with_a_secret_seed():
    assert await created({"kind": "create_room", "ruleset": "board"}) == cm.SCHEME_V2
    assert await created({"kind": "create_room", "ruleset": "board", "challenge": "2026-12-04"}) == cm.SCHEME_V2


@pytest.mark.parametrize("scenario", sorted(p.name for p in EXAMPLES.glob("*.jsonl")))
async def test_a_simulated_room_commits_per_viewer(scenario, monkeypatch):
    stores: list[MemoryEventStore] = []
    monkeypatch.setattr(sim_commands, "MemoryEventStore", lambda: stores.append(MemoryEventStore()) or stores[-1])
    header, moves = sim_commands.load_scenario(EXAMPLES / scenario)
    await sim_commands.run_scenario(header, moves)
    assert await stores[0].load_commit_scheme(header.room) == cm.SCHEME_V2
