"""`almanac bench rules sectors`: seasons per second for a full 8x8 colony with buildings, and replay events/s."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from almanac.events import codec, room as room_rules, step
from almanac.events.decider import Context
from almanac.events.dice import Dice
from almanac.events.envelope import Envelope
from almanac.events.sectors.commands import EndSeason
from almanac.services.bench.common import seal_log

SEED = b"bench rules sectors secret seed!"
ROOM = "sectors-bench"
PLAYER = "bench"
SIDE = 8
# Each colony plays a default-length game (10 years, 40 seasons) and a new one starts: a colony run
# for centuries saturates at the ledger's ceiling, which is not a game anyone plays.
YEARS = 10

# Every sector explored and built up, types in a repeating pattern so each row mixes all three.
PATTERN = ("prairie", "forest", "mountain", "prairie")
BUILDINGS = {
    "prairie": ["farm", "farm", "kitchen", "factory"],
    "forest": ["lumber_camp", "sawmill", "farm"],
    "mountain": ["mine", "mint", "factory"],
}
POPULATION = {"prairie": 300, "forest": 150, "mountain": 80}


def full_colony_options() -> dict[str, Any]:
    sectors = []
    for row in range(SIDE):
        for column in range(SIDE):
            kind = PATTERN[(row + column) % len(PATTERN)]
            sectors.append(
                {
                    "row": row,
                    "column": column,
                    "type": kind,
                    "population": POPULATION[kind],
                    "buildings": BUILDINGS[kind],
                }
            )
    stock = {"food": 20_000, "wood": 5_000, "gold": 2_000, "lumber": 500, "coins": 200}
    return {"years": YEARS, "setup": {"rows": SIDE, "columns": SIDE, "stock": stock, "sectors": sectors}}


def _context(version: int) -> Context:
    return Context(room=ROOM, player=PLAYER, now_ms=version, version=version, dice=Dice(SEED, ROOM, version))


def _apply(state: Any, command: Any, log: list[Any]) -> Any:
    version = (state.version if state is not None else 0) + 1
    for event in room_rules.decide(state, command, _context(version)):
        state = room_rules.evolve(state, event, ROOM, version)
        log.append(event)
        version += 1
    return state


def play_seasons(seconds: float) -> tuple[list[list[Any]], list[Any], int, int, float]:
    """Whole colonies played season by season for about ``seconds``: (logs, last state, seasons, events, time)."""
    logs: list[list[Any]] = []
    seasons = season_events = 0
    state: Any = None
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        log: list[Any] = []
        state = _apply(None, room_rules.CreateRoom(ruleset="sectors", options=full_colony_options()), log)
        state = _apply(state, room_rules.JoinRoom(), log)
        opening = len(log)
        while not state.ended:
            state = _apply(state, EndSeason(), log)
            seasons += 1
        # The room's own closing event is not a season's
        season_events += len(log) - opening - 1
        logs.append(log)
    return logs, state, seasons, season_events, time.perf_counter() - start


def fold(log: list[Any]) -> Any:
    state = None
    for version, event in enumerate(log, start=1):
        state = room_rules.evolve(state, event, ROOM, version)
    return state


def replay(stored: list[Envelope]) -> Any:
    """Decode every envelope and fold it into the room state, as a reader catching up does."""
    return step.replay(stored)


def decode_only(stored: list[Envelope]) -> int:
    for envelope in stored:
        codec.decode_event(envelope)
    return len(stored)


def raw_decode(stored: list[Envelope]) -> int:
    """The baseline: msgspec decoding the same payloads into plain dicts and lists, no types, no rules."""
    decode = msgspec.msgpack.decode
    for envelope in stored:
        decode(envelope.payload)
    return len(stored)


def main(seconds: float = 4.0) -> None:
    console = Console(width=120)
    sectors = full_colony_options()["setup"]["sectors"]
    buildings = sum(len(sector["buildings"]) for sector in sectors)
    console.print(
        f"[bold]bench rules sectors[/]: full {SIDE}x{SIDE} colonies ({len(sectors)} explored sectors, {buildings} "
        f"buildings) played for {YEARS} years each; pure rules, no Redis; baselines run in the same process"
    )

    logs, last, seasons, season_events, play_time = play_seasons(seconds)
    folded = None
    fold_start = time.perf_counter()
    for log in logs:
        folded = fold(log)
    fold_time = time.perf_counter() - fold_start
    assert folded == last, "folding the log must give the state the commands produced"

    stored = [seal_log(ROOM, "sectors", log) for log in logs]
    replay_start = time.perf_counter()
    for envelope_log in stored:
        replayed = replay(envelope_log)
    replay_time = time.perf_counter() - replay_start
    assert replayed == last, "replaying the stored log must give the state the commands produced"
    decode_start = time.perf_counter()
    for envelope_log in stored:
        decode_only(envelope_log)
    decode_time = time.perf_counter() - decode_start
    raw_start = time.perf_counter()
    for envelope_log in stored:
        raw_decode(envelope_log)
    raw_time = time.perf_counter() - raw_start

    events = sum(len(log) for log in stored)
    play_rate = seasons / play_time
    fold_rate = seasons / fold_time
    replay_rate = events / replay_time
    decode_rate = events / decode_time
    raw_rate = events / raw_time
    payload_bytes = sum(len(envelope.payload) for log in stored for envelope in log)

    table = Table("path", "figure", "x baseline")
    table.add_row("seasons played (decide + evolve, room path)", f"{play_rate:,.1f} seasons/s", "")
    table.add_row(
        "seasons folded (evolve only)", f"{fold_rate:,.1f} seasons/s", f"{fold_rate / play_rate:.2f} x played"
    )
    table.add_row("  as events", f"{events / fold_time:,.0f} events/s", "")
    table.add_row("replay (decode + evolve)", f"{replay_rate:,.0f} events/s", f"{replay_rate / raw_rate:.3f}")
    table.add_row(
        "  typed decode alone (codec.decode_event)",
        f"{decode_rate:,.0f} events/s",
        f"{decode_rate / raw_rate:.3f}",
    )
    table.add_row("  baseline: raw msgspec decode of the same payloads", f"{raw_rate:,.0f} events/s", "1")
    console.print(table)
    game = last.game
    console.print(
        f"{len(logs)} colonies, {seasons:,} seasons, {events:,} events ({season_events / seasons:.0f} per season, "
        f"{payload_bytes / events:.0f} payload bytes per event); a colony ends with "
        f"{game.stock.victory_points} victory points and "
        f"{sum(sector.population for _, _, sector in game.explored()):,} people"
    )


if __name__ == "__main__":
    main()
