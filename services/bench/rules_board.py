"""`almanac bench rules board`: complete games per second with the simple policy, and replay events/s."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from almanac.events import room as room_rules
from almanac.events.board.policy import choose_command
from almanac.events.dice import Dice
from almanac.services.bench.common import (
    SEED,
    apply,
    play_trivial,
    replay_against_trivial,
    timed,
)


def play_game(index: int, player: str = "bench") -> tuple[list[Any], list[Any]]:
    """One complete board game driven by the simple policy: its commands and its events."""
    room = f"board-{index}"
    log: list[Any] = []
    commands: list[Any] = [room_rules.CreateRoom(ruleset="board"), room_rules.JoinRoom()]
    state = apply(None, commands[0], room, player, log)
    state = apply(state, commands[1], room, player, log)
    policy_dice = Dice(SEED, "policy", index)
    while not state.ended:
        command = choose_command(state.game, player, policy_dice)
        commands.append(command)
        state = apply(state, command, room, player, log)
    return commands, log


def decide_recorded(games: list[list[Any]], player: str = "bench") -> int:
    """The recorded commands of each game decided again (rules alone, no policy search)."""
    for index, commands in enumerate(games):
        state, log = None, []
        for command in commands:
            state = apply(state, command, f"board-{index}", player, log)
    return sum(len(commands) for commands in games)


def main(seconds: float = 4.0) -> None:
    console = Console(width=120)
    console.print("[bold]bench rules board[/]: pure rules, no Redis; baselines run in the same process")

    games, commands, events, logs, recorded = 0, 0, 0, [], []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        played, log = play_game(games)
        games += 1
        commands += len(played)
        events += len(log)
        logs.append(log)
        recorded.append(played)
    play_time = time.perf_counter() - start

    _, trivial_time = timed(play_trivial, commands)
    _, rules_time = timed(decide_recorded, recorded)

    replayed, board_replay_rate, trivial_replay_rate = replay_against_trivial("board", logs)

    board_commands_rate = commands / play_time
    trivial_commands_rate = commands / trivial_time

    table = Table("path", "figure", "x baseline")
    table.add_row("complete games (simple policy + rules)", f"{games / play_time:,.1f} games/s", "")
    table.add_row(
        "  their commands (policy + decide + evolve)",
        f"{board_commands_rate:,.0f} commands/s",
        f"{board_commands_rate / trivial_commands_rate:.3f}",
    )
    table.add_row(
        "  the same commands, rules alone (no policy)",
        f"{commands / rules_time:,.0f} commands/s",
        f"{commands / rules_time / trivial_commands_rate:.3f}",
    )
    table.add_row(
        "  baseline: trivial rule-set, same room path", f"{trivial_commands_rate:,.0f} commands/s", "1"
    )
    table.add_row(
        "replay (decode + evolve)",
        f"{board_replay_rate:,.0f} events/s",
        f"{board_replay_rate / trivial_replay_rate:.3f}",
    )
    table.add_row("  baseline: trivial rule-set replay", f"{trivial_replay_rate:,.0f} events/s", "1")
    console.print(table)
    console.print(
        f"{games} games, {commands:,} commands, {events:,} events ({events / games:.1f} per game); "
        f"replayed {replayed:,} board and as many trivial events"
    )


if __name__ == "__main__":
    main()
