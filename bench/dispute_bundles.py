"""`almanac bench forensics`: dispute bundles of a long room, made and verified offline, against one fold of it.

The room is a realm game played by the manifest's bot policy on the engine's write path
(``RoomService`` on an in-memory store, no Redis) until it has ``events`` events, then ended so its
seed is revealed. Figures, each a function below: folding the room once (the baseline: decode +
evolve of every stored envelope), writing a bundle of the whole room (``--versions 1..N``) and
verifying it offline (chain, readable events, seed, every command re-decided), and the same for one
trade. Another engineer adds explain/bisect/fork figures here: one function per figure.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from rich.table import Table

from almanac.bench.common import SEED, output_console
from almanac.events import codec, registry, step
from almanac.events.dice import Dice
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.memory_store import MemoryEventStore

ROOM = "forensics-bench"


async def build_room(events: int, ruleset: str = "realm") -> MemoryEventStore:
    """A room of at least ``events`` events (or the game's natural end), ended, on the engine's write path."""
    manifest = registry.manifest(ruleset)
    scenario, policy = manifest.bench, manifest.policy
    players = tuple(scenario.players)
    store = MemoryEventStore()
    await store.save_seed(ROOM, SEED)
    service = RoomService(store)
    chooser, sent, now = Dice(SEED, "forensics policy", 0), 0, 0

    async def send(player: str, body: dict[str, Any]) -> None:
        nonlocal sent, now
        sent, now = sent + 1, now + 1_000
        await service.handle(CommandRecord(command_id=f"c{sent}", room=ROOM, player=player, server_time_ms=now,
                                           body=body))

    # The bench scenario's game, made long enough (a year of realm is some 80 events; the room is cut at ``events``).
    options = {**scenario.options, "years": 1_000} if ruleset == "realm" else scenario.options
    await send(players[0], {"kind": "create_room", "ruleset": manifest.ref, "options": options})
    for player in players:
        await send(player, {"kind": "join_room"})
    idle = 0
    while True:
        state, _ = await service.load(ROOM)
        if state.ended or state.version >= events or idle > 200:
            break
        player = players[chooser.randbelow(len(players))]
        command = policy(state.game, player, chooser, now + 1_000)
        if command is None:
            idle += 1
            continue
        idle = 0
        body = codec.encode_command(command)
        await send(player, body)
    if not state.ended:
        await send(players[0], {"kind": "end_room", "reason": "long enough"})
    return store


def fold_once(store: MemoryEventStore) -> tuple[int, float]:
    """Baseline: the room's stored envelopes decoded and folded once (as any reader catching up does)."""
    envelopes = asyncio.run(store.read(ROOM))
    start = time.perf_counter()
    step.replay(envelopes)
    return len(envelopes), time.perf_counter() - start


def export_bundle(store: MemoryEventStore, **subject: Any) -> tuple[dict[str, Any], float]:
    """Writing a bundle (and its JSON text, as the CLI does): the bundle and the seconds it took."""
    start = time.perf_counter()
    bundle = asyncio.run(dispute_bundle(store, ROOM, 0, **subject))
    text = json.dumps(bundle)
    return json.loads(text), time.perf_counter() - start


def verify_offline(bundle: dict[str, Any]) -> float:
    """Verifying a bundle as a stranger does (no store at all, the head known from elsewhere): seconds; raises if
    it does not verify."""
    start = time.perf_counter()
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    elapsed = time.perf_counter() - start
    if not verdict.ok:
        raise RuntimeError(verdict.text())
    return elapsed


def main(events: int = 10_000) -> None:
    console = output_console(minimum=120)
    build_start = time.perf_counter()
    store = asyncio.run(build_room(events))
    built = time.perf_counter() - build_start
    count, fold = fold_once(store)
    whole, whole_export = export_bundle(store, versions=(1, count))
    whole_verify = verify_offline(whole)
    pairs = [(e, codec.decode_event(e)) for e in asyncio.run(store.read(ROOM))]
    trades = registry.stored(pairs[0][0].ruleset).audit_view("trade").ids(pairs)
    table = Table("figure", "events/s", "seconds", "x fold once")
    fold_rate = count / fold
    table.add_row("baseline: fold the room once (decode + evolve)", f"{fold_rate:,.0f}", f"{fold:.3f}", "1")
    for label, seconds in (("bundle export, whole room (versions 1..N)", whole_export),
                           ("offline verification of that bundle (every command re-decided)", whole_verify)):
        table.add_row(label, f"{count / seconds:,.0f}", f"{seconds:.3f}", f"{seconds / fold:.1f}")
    if trades:
        trade, trade_export = export_bundle(store, view="trade", item=trades[len(trades) // 2])
        trade_verify = verify_offline(trade)
        table.add_row(f"bundle export, one trade ({len(trade['events'])} events, {len(trade['commands'])} commands)",
                      f"{count / trade_export:,.0f}", f"{trade_export:.3f}", f"{trade_export / fold:.1f}")
        table.add_row("offline verification of the trade bundle (chain of all N, every command re-decided)",
                      f"{count / trade_verify:,.0f}", f"{trade_verify:.3f}", f"{trade_verify / fold:.1f}")
    console.print(f"[bold]bench forensics[/]: a realm room of {count:,} events ({len(trades)} trades), played on the "
                  f"engine's write path in {built:.1f} s; no Redis; events/s is the room's events over the time taken")
    console.print(table)
    size = len(json.dumps(whole))
    console.print(f"whole-room bundle: {size / 1e6:.1f} MB of JSON, {size / count * 1000 / 1e6:.2f} MB per 1,000 events")
    if trades:
        size = len(json.dumps(trade))
        console.print(f"one trade's bundle: {size / 1e6:.1f} MB of JSON, {size / count * 1000 / 1e6:.2f} MB per 1,000 "
                      "events of the room")
