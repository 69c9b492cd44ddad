"""`almanac bench rules realm`: actions per second over random legal play, and replay events/s, against a baseline."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from almanac.events import room as room_rules
from almanac.events.dice import Dice
from almanac.events.realm.policy import choose_command
from almanac.services.bench.common import (
    SEED,
    apply,
    play_trivial,
    replay_against_trivial,
    timed,
)

PLAYERS = ("alice", "bob", "carol")
OPTIONS = {"players": list(PLAYERS), "villages": 2, "years": 3}


def play_game(index: int) -> tuple[list[tuple[str, Any]], list[Any], float]:
    """One complete three-year game of three players and two villages, driven by the random-legal policy.

    Returns the (player, command) pairs, the events, and the seconds spent in the rules alone.
    """
    room = f"realm-{index}"
    log: list[Any] = []
    commands: list[tuple[str, Any]] = [
        (PLAYERS[0], room_rules.CreateRoom(ruleset="realm", options=OPTIONS)),
        *((player, room_rules.JoinRoom()) for player in PLAYERS),
    ]
    state = None
    for player, command in commands:
        state = apply(state, command, room, player, log)
    chooser = Dice(SEED, "policy", index)
    rules_time = 0.0
    while not state.ended:
        player = PLAYERS[chooser.randbelow(len(PLAYERS))]
        command = choose_command(state.game, player, chooser)
        if command is None:
            continue
        commands.append((player, command))
        start = time.perf_counter()
        state = apply(state, command, room, player, log)
        rules_time += time.perf_counter() - start
    return commands, log, rules_time


def main(seconds: float = 5.0) -> None:
    console = Console(width=120)
    console.print(
        "[bold]bench rules realm[/]: pure rules, no Redis; three players, two villages, three years; "
        "the baseline runs in the same process"
    )
    games, commands, events, logs, rules_time = 0, 0, 0, [], 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        played, log, spent = play_game(games)
        games += 1
        commands += len(played)
        events += len(log)
        rules_time += spent
        logs.append(log)
    play_time = time.perf_counter() - start

    _, trivial_time = timed(play_trivial, commands)
    replayed, replay_rate, trivial_replay_rate = replay_against_trivial("realm", logs)

    played_rate = commands / play_time
    rules_rate = commands / rules_time
    trivial_rate = commands / trivial_time

    table = Table("path", "figure", "x baseline")
    table.add_row("complete games (random legal play)", f"{games / play_time:,.2f} games/s", "")
    table.add_row(
        "  actions with the policy's legality probes",
        f"{played_rate:,.0f} actions/s",
        f"{played_rate / trivial_rate:.3f}",
    )
    table.add_row(
        "  actions, rules alone (decide + evolve)",
        f"{rules_rate:,.0f} actions/s",
        f"{rules_rate / trivial_rate:.3f}",
    )
    table.add_row("  baseline: trivial rule-set, same room path", f"{trivial_rate:,.0f} actions/s", "1")
    table.add_row(
        "replay (decode + evolve)", f"{replay_rate:,.0f} events/s", f"{replay_rate / trivial_replay_rate:.3f}"
    )
    table.add_row("  baseline: trivial rule-set replay", f"{trivial_replay_rate:,.0f} events/s", "1")
    console.print(table)
    console.print(
        f"{games} games, {commands:,} commands, {events:,} events ({events / games:.1f} per game); "
        f"replayed {replayed:,} realm and as many trivial events"
    )


if __name__ == "__main__":
    main()
