"""`almanac bench rules NAME`: any rule-set's bench scenario (from its manifest) played on the room path, no Redis.

Figures: complete games per second; their commands with the policy and by the rules alone (the
recorded commands decided again), against the trivial rule-set on the same room path; replay
(decode + evolve) against trivial replay and against raw msgspec decoding of the same payloads; and
whatever comparisons the scenario adds. Every game's replayed state must equal the played one.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
from rich.table import Table

from almanac.bench.common import (
    SEED,
    apply,
    output_console,
    play_trivial,
    replay,
    seal_log,
    timed,
    trivial_log,
)
from almanac.events import codec, registry, room as room_rules
from almanac.events.dice import Dice
from almanac.events.manifest import BenchScenario, Comparison

# A game whose players all have nothing to do this many times in a row is stuck: the bench says so.
STUCK_AFTER = 200


class BenchError(Exception):
    """The rule-set cannot be benchmarked (no scenario or policy), or its scenario stalled."""


def play_game(name: str, scenario: BenchScenario, index: int) -> tuple[list[tuple[str, int, Any]], list[Any], Any]:
    """One complete game of the scenario: its (player, time, command) list, its events and its final state."""
    policy = scenario.policy or registry.manifest(name).policy
    if policy is None:
        raise BenchError(f"the {name} rule-set has neither a policy nor a bench policy")
    room, players, log = f"{name}-{index}", scenario.players, []
    now = scenario.start_ms + index * 1000 if scenario.step_ms else None
    commands: list[tuple[str, Any, Any]] = [(players[0], now, room_rules.CreateRoom(ruleset=name,
                                                                                   options=scenario.options))]
    commands += [(player, now, room_rules.JoinRoom()) for player in players]
    state = None
    for player, at, command in commands:
        state = apply(state, command, room, player, log, now_ms=at)
    chooser = Dice(SEED, "chooser", index)
    idle = 0
    while not state.ended:
        player = players[chooser.randbelow(len(players))] if len(players) > 1 else players[0]
        if now is not None:
            now += scenario.step_ms
        command = policy(state.game, player, chooser, now if now is not None else state.version + 1)
        if command is None:
            idle += 1
            if idle > STUCK_AFTER:
                raise BenchError(f"{name}: no player had anything to do {STUCK_AFTER} times in a row")
            continue
        idle = 0
        commands.append((player, now, command))
        state = apply(state, command, room, player, log, now_ms=now)
    return commands, log, state


def decide_recorded(name: str, games: list[list[tuple[str, Any, Any]]]) -> int:
    """The recorded commands of each game decided again: the rules alone, no policy."""
    for index, commands in enumerate(games):
        state, log = None, []
        for player, at, command in commands:
            state = apply(state, command, f"{name}-{index}", player, log, now_ms=at)
    return sum(len(commands) for commands in games)


def raw_decode(logs: list[list[Any]]) -> int:
    """Baseline: msgspec decoding the same payloads into plain dicts and lists, no types, no rules."""
    decode = msgspec.msgpack.decode
    for log in logs:
        for envelope in log:
            decode(envelope.payload)
    return sum(len(log) for log in logs)


def _rate(count: int, function: Any, seconds: float) -> float:
    """Calls of ``function(count)`` repeated for about ``seconds``: items per second."""
    done, start = 0, time.perf_counter()
    while True:
        done += function(count)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def _comparison_rows(table: Table, comparison: Comparison, seconds: float) -> None:
    work = _rate(comparison.batch, comparison.work, seconds)
    baseline = _rate(comparison.batch, comparison.baseline, seconds / 2)
    table.add_row(comparison.label, f"{work:,.0f} {comparison.unit}", f"{work / baseline:.3f}")
    table.add_row(f"  baseline: {comparison.baseline_label}", f"{baseline:,.0f} {comparison.unit}", "1")


def main(name: str, seconds: float | None = None) -> None:
    manifest = registry.manifest(name)
    scenario = manifest.bench
    if scenario is None:
        raise BenchError(f"the {name} rule-set offers no bench scenario (manifest.bench)")
    seconds = scenario.seconds if seconds is None else seconds
    console = output_console(minimum=120)
    console.print(f"[bold]bench rules {name}[/]: {scenario.description}; pure rules, no Redis; "
                  "baselines run in the same process")

    games, recorded, logs, finals = 0, [], [], []
    start = time.perf_counter()
    while games == 0 or time.perf_counter() - start < seconds:
        played, log, state = play_game(name, scenario, games)
        games += 1
        recorded.append(played)
        logs.append(log)
        finals.append(state)
    play_time = time.perf_counter() - start
    commands = sum(len(played) for played in recorded)
    events = sum(len(log) for log in logs)

    _, trivial_time = timed(play_trivial, commands)
    _, rules_time = timed(decide_recorded, name, recorded)
    stored = [seal_log(f"{name}-{index}", name, log) for index, log in enumerate(logs)]
    replay_start = time.perf_counter()
    for index, envelopes in enumerate(stored):
        state = None
        for envelope in envelopes:
            state = room_rules.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
        if state != finals[index]:
            raise BenchError(f"{name}: replaying game {index}'s stored log does not give the state its commands produced")
    replay_rate = events / (time.perf_counter() - replay_start)
    trivial_replayed, trivial_replay_time = timed(replay, [trivial_log(events)])
    trivial_replay_rate = trivial_replayed / trivial_replay_time
    _, raw_time = timed(raw_decode, stored)
    raw_rate = events / raw_time

    played_rate, rules_rate, trivial_rate = commands / play_time, commands / rules_time, commands / trivial_time
    table = Table("path", "figure", "x baseline")
    table.add_row("complete games (policy + rules)", f"{games / play_time:,.2f} games/s", "")
    table.add_row("  their commands (policy + decide + evolve)", f"{played_rate:,.0f} commands/s",
                  f"{played_rate / trivial_rate:.3f}")
    table.add_row("  the same commands, rules alone (no policy)", f"{rules_rate:,.0f} commands/s",
                  f"{rules_rate / trivial_rate:.3f}")
    table.add_row("  baseline: trivial rule-set, same room path", f"{trivial_rate:,.0f} commands/s", "1")
    table.add_row("replay (decode + evolve)", f"{replay_rate:,.0f} events/s", f"{replay_rate / trivial_replay_rate:.3f}")
    table.add_row("  baseline: trivial rule-set replay", f"{trivial_replay_rate:,.0f} events/s", "1")
    table.add_row("  baseline: raw msgspec decode of the same payloads", f"{raw_rate:,.0f} events/s",
                  f"{raw_rate / trivial_replay_rate:.3f}")
    for comparison in scenario.comparisons:
        _comparison_rows(table, comparison, seconds / 2)
    console.print(table)
    payload = sum(len(envelope.payload) for log in stored for envelope in log)
    console.print(f"{games} games, {commands:,} commands, {events:,} events ({events / games:.1f} per game, "
                  f"{payload / max(events, 1):.0f} payload bytes per event); replayed {events:,} {name} events "
                  "and as many trivial events; every replay equals the played state")
