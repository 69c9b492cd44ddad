"""Write tests/golden/<name>@<version>.json: one complete game of every published rule-set version.

    .venv/bin/python -m tests.golden.make          # all versions of the rule-sets in this repository
    .venv/bin/python -m tests.golden.make realm@1  # one version

Each game is played by the manifest's bot policy on the engine's own write path (``RoomService`` on an
in-memory store) from the bench scenario's players and options, with a seed, room id, command ids,
clock and bot dice all derived from the version's name, so running this twice writes the same bytes
(as long as the rules decide the same). The room is ended so its seed is revealed, and the file is
``almanac export``'s format, which ``almanac verify --file`` and ``import`` read.

Regenerate only when the lead agrees that an existing version's decisions were wrong; a rule change
is otherwise a new version (docs/architecture.md, "Rule-set versions").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from almanac.events import registry
from almanac.events.dice import PLAYER_ENTROPY, Dice
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.export_store import export_document
from almanac.storage.memory_store import MemoryEventStore

HERE = Path(__file__).resolve().parent
# A golden game is small: at most this many commands (then the room is ended by its creator).
MAX_COMMANDS = 300
# Small games that still end by themselves: creation options instead of the bench scenario's, per rule-set.
SMALL_GAME: dict[str, dict[str, Any]] = {
    "sectors": {"years": 1, "rows": 4, "columns": 4},
    "realm": {"players": ["alice", "bob"], "villages": 1, "years": 4},
    # board@2's golden game plays under a turn limit (board.turn_began events); without one it is board@1's
    "board@2": {"turn_limit_s": 60},
}
# A player with nothing to do this many times in a row: the game is stuck (the policy is at fault).
STUCK_AFTER = 200


def published() -> list[Any]:
    """Every version of every rule-set this repository publishes (plugins and tests' rule-sets aside)."""
    return [m for m in registry.all_manifests()
            if type(m.decider).__module__.startswith("almanac.games.") and m.policy is not None and m.bench]


def path_for(manifest: Any) -> Path:
    return HERE / f"{manifest.ref}.json"


async def play(manifest: Any) -> dict[str, Any]:
    """One game of ``manifest`` played to its end on the engine's write path; its export document."""
    scenario = manifest.bench
    ref, players = manifest.ref, scenario.players
    room = f"golden-{manifest.name}-v{manifest.version}"
    store = MemoryEventStore()
    await store.save_seed(room, hashlib.sha256(f"almanac golden|{ref}".encode()).digest())
    service = RoomService(store)
    chooser = Dice(b"almanac golden policy dice 32 by", ref, 0)
    now = scenario.start_ms
    sent = 0

    async def send(player: str, body: dict[str, Any]) -> None:
        nonlocal sent, now
        sent += 1
        now += scenario.step_ms or 1_000
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{sent}", room=room, player=player,
                                                     server_time_ms=now, body=body))
        if sent == 1 and not outcome.accepted:
            raise RuntimeError(f"{ref}: the golden room was not created: {outcome.error}")

    options = SMALL_GAME.get(manifest.ref, SMALL_GAME.get(manifest.name, scenario.options))
    players = tuple(options.get("players", players))
    await send(players[0], {"kind": "create_room", "ruleset": ref, "options": options})
    for player in players:
        # Deterministic nonces (scheme-2 dice), like the seed: the same version always makes the same log.
        nonce = hashlib.sha256(f"almanac golden nonce|{ref}|{player}".encode()).digest()
        state, _ = await service.load(room)
        join: dict[str, Any] = {"kind": "join_room"}
        if state is not None and state.dice_scheme == PLAYER_ENTROPY:
            join["nonce_commitment"] = await store.save_nonce(room, nonce)
        await send(player, join)
    idle = 0
    while True:
        state, _ = await service.load(room)
        if state.ended or sent >= MAX_COMMANDS:
            break
        player = players[chooser.randbelow(len(players))]
        command = manifest.policy(state.game, player, chooser, now + (scenario.step_ms or 1_000))
        if command is None:
            idle += 1
            if idle > STUCK_AFTER:
                raise RuntimeError(f"{ref}: no player had anything to do {STUCK_AFTER} times in a row")
            continue
        idle = 0
        await send(player, {"kind": type(command).__struct_config__.tag, **_fields(command)})
    if not state.ended:
        await send(players[0], {"kind": "end_room", "reason": "the golden game is long enough"})
    last = (await store.read(room))[-1]
    return await export_document(store, room, last.server_time_ms)


def _fields(command: Any) -> dict[str, Any]:
    from almanac.events import codec  # noqa: PLC0415

    body = codec.encode_command(command)
    body.pop("kind", None)
    return body


def write(manifest: Any) -> Path:
    document = asyncio.run(play(manifest))
    path = path_for(manifest)
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    return path


def chosen(argv: list[str]) -> list[Any]:
    """The published versions a command line names (``realm@1 board@1``), or every one for none."""
    found = [m for m in published() if not argv or m.ref in argv]
    if argv and len(found) != len(argv):
        raise SystemExit(f"unknown versions; published: {', '.join(m.ref for m in published())}")
    return found


def main(argv: list[str]) -> None:
    for manifest in chosen(argv):
        path = write(manifest)
        events = len(json.loads(path.read_text())["events"])  # export_document's readable form (format 2)
        print(f"{path.relative_to(HERE.parent.parent)}: {events} events ({manifest.fingerprint[:19]})")


if __name__ == "__main__":
    main(sys.argv[1:])
