"""`almanac bench forensics-tools`: explain, bisect, diff and fork on a 10,000-event realm room, against folding
the room once (read + decode + fold) in the same run."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rich.table import Table

from almanac.bench.common import output_console
from almanac.events.step import replay
from almanac.services import bootstrap
from almanac.services.forensics import investigate as ft
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore

PLAYERS = ("alice", "bob")


async def build_room(store: RedisEventStore, room: str, events: int, snapshot_every: int) -> int:
    """A realm@1 room of alice and bob mining gold season after season until it has ``events`` versions."""
    service = RoomService(store, snapshot_every=snapshot_every)
    sent = 0

    async def send(player: str, body: dict[str, Any]) -> Any:
        nonlocal sent
        sent += 1
        return await service.handle(CommandRecord(command_id=f"{room}-{sent}", room=room, player=player,
                                                  server_time_ms=1_000 * sent, body=body))

    await send("alice", {"kind": "create_room", "ruleset": "realm@1",
                         "options": {"players": list(PLAYERS), "villages": 1, "years": 1_000}})
    for player in PLAYERS:
        await send(player, {"kind": "join_room"})
    while await store.latest_version(room) < events:
        for player in PLAYERS:
            outcome = await send(player, {"kind": "mine", "ore": "gold"})
            if not outcome.accepted:
                for seat in PLAYERS:
                    await send(seat, {"kind": "end_turn"})
    return sent


async def _timed(work: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await work()
    return result, time.perf_counter() - start


async def run(url: str, events: int, snapshot_every: int) -> list[tuple[str, float, str]]:
    prefix = f"bench-ft-{secrets.token_hex(3)}"
    runtime = bootstrap.runtime(bootstrap.settings(shard_count=16), bootstrap.Role.TOOL, url, prefix)
    client, store = runtime.client, runtime.store
    loader = runtime.loader(0)  # the process's reader, as the CLI's and the gateway's forensics use
    room = "bench-realm"
    try:
        commands, build_s = await _timed(lambda: build_room(store, room, events, snapshot_every))
        latest = await store.latest_version(room)

        async def fold_once() -> Any:
            return replay(await store.read(room))

        final, fold_s = await _timed(fold_once)
        season = final.game.season_index
        rows = [(f"build: {commands} commands through RoomService ({latest} versions)", build_s,
                 f"{latest / build_s:,.0f} events/s"),
                ("baseline: fold the room once (read + decode + fold)", fold_s, f"{latest / fold_s:,.0f} events/s")]
        explained, seconds = await _timed(lambda: ft.explain(loader, room, "cities.alice.stock.stone"))
        rows.append((f"explain cities.alice.stock.stone ({len(explained['changes'])} changes)", seconds, ""))
        explained, seconds = await _timed(lambda: ft.explain(loader, room, "scores.bob"))
        rows.append((f"explain scores.bob ({len(explained['changes'])} changes)", seconds, ""))
        where = f"season_index >= {max(1, season * 7 // 10)}"
        found, seconds = await _timed(lambda: ft.bisect_where(loader, room, where))
        rows.append((f"bisect --where '{where}' (binary: v{found['version']}, {found['probes']} probes, "
                     f"snapshots every {snapshot_every})", seconds, ""))
        linear, seconds = await _timed(lambda: ft.bisect_where(loader, room, where, linear=True))
        assert linear["version"] == found["version"], (linear, found)
        rows.append((f"bisect --where --linear (v{linear['version']})", seconds, ""))
        against, seconds = await _timed(lambda: ft.bisect_against(loader, room, "realm@2"))
        rows.append((f"bisect --against realm@2 (diverges at v{against['version']})", seconds, ""))
        same, seconds = await _timed(lambda: ft.bisect_against(loader, room, "realm@1"))
        rows.append((f"bisect --against realm@1 (no divergence: {same['commands_redecided']} commands re-decided)",
                     seconds, f"{latest / seconds:,.0f} events/s"))
        # Only an ended room may be forked (a live room's fork would show its players' hidden views).
        service = RoomService(store, snapshot_every=snapshot_every)
        ended = await service.handle(CommandRecord(command_id="bench-end", room=room, player=PLAYERS[0],
                                                   server_time_ms=10**12, body={"kind": "end_room"}))
        assert ended.accepted, ended.error
        forked, seconds = await _timed(lambda: ft.fork(loader, room, latest // 2, None, "bench", 1))
        rows.append((f"fork at v{latest // 2}", seconds, ""))
        differences, seconds = await _timed(lambda: ft.diff(loader, room, forked["room"]))
        rows.append((f"diff room vs its fork ({len(differences['differences'])} differences)", seconds, ""))
        return rows
    finally:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1_000):
            await client.delete(key)
        await client.aclose()


def main(url: str, events: int = 10_000, snapshot_every: int = 100) -> None:
    rows = asyncio.run(run(url, events, snapshot_every))
    fold_s = rows[1][1]
    table = Table(title=f"forensics tools on a {events:,}-event realm room (same-run baseline: one fold)")
    for column in ("what", "seconds", "x one fold", "rate"):
        table.add_column(column, overflow="fold")
    for label, seconds, rate in rows:
        table.add_row(label, f"{seconds:.3f}", f"{seconds / fold_s:.2f}", rate)
    output_console(minimum=160).print(table)
