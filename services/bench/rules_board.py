"""`almanac bench rules board`: complete games per second with the simple policy, and replay events/s."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from events import codec, registry, room as room_rules
from events.board.policy import choose_command
from events.decider import Context
from events.dice import Dice
from events.envelope import GENESIS_HASH, Envelope
from events.hashing import seal

SEED = b"bench rules board secret seed 32"


def _context(room: str, version: int, player: str) -> Context:
    return Context(room=room, player=player, now_ms=version, version=version, dice=Dice(SEED, room, version))


def _apply(state: Any, command: Any, room: str, player: str, log: list[Any]) -> Any:
    version = (state.version if state is not None else 0) + 1
    for event in room_rules.decide(state, command, _context(room, version, player)):
        state = room_rules.evolve(state, event, room, version)
        log.append(event)
        version += 1
    return state


def play_game(index: int, player: str = "bench") -> tuple[list[Any], list[Any]]:
    """One complete board game driven by the simple policy: its commands and its events."""
    room = f"board-{index}"
    log: list[Any] = []
    commands: list[Any] = [room_rules.CreateRoom(ruleset="board"), room_rules.JoinRoom()]
    state = _apply(None, commands[0], room, player, log)
    state = _apply(state, commands[1], room, player, log)
    policy_dice = Dice(SEED, "policy", index)
    while not state.ended:
        command = choose_command(state.game, player, policy_dice)
        commands.append(command)
        state = _apply(state, command, room, player, log)
    return commands, log


def decide_recorded(games: list[list[Any]], player: str = "bench") -> int:
    """The recorded commands of each game decided again (rules alone, no policy search)."""
    for index, commands in enumerate(games):
        state, log = None, []
        for command in commands:
            state = _apply(state, command, f"board-{index}", player, log)
    return sum(len(commands) for commands in games)


def play_trivial(commands: int, player: str = "bench") -> int:
    """The baseline: the same room path with the trivial rule-set (one counter event per command)."""
    from services.bench.trivial import TRIVIAL, Add  # noqa: PLC0415

    registry.register(TRIVIAL)
    log: list[Any] = []
    state = _apply(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), "trivial", player, log)
    state = _apply(state, room_rules.JoinRoom(), "trivial", player, log)
    for _ in range(commands):
        state = _apply(state, Add(amount=1), "trivial", player, log)
    return len(log)


def envelopes(room: str, ruleset: str, events: list[Any]) -> list[Envelope]:
    result, previous = [], GENESIS_HASH
    for version, event in enumerate(events, start=1):
        event_type, payload = codec.encode_event(event)
        envelope = seal(
            Envelope(
                room=room,
                version=version,
                ruleset=ruleset,
                type=event_type,
                payload=payload,
                command_id=f"c{version}",
                player="bench",
                server_time_ms=version,
                previous_hash=previous,
            )
        )
        previous = envelope.hash
        result.append(envelope)
    return result


def replay(logs: list[list[Envelope]]) -> int:
    """Decode every envelope and fold it into the room state, as a reader catching up does."""
    count = 0
    for log in logs:
        state = None
        for envelope in log:
            state = room_rules.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
        count += len(log)
    return count


def _timed(function: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


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

    _, trivial_time = _timed(play_trivial, commands)
    _, rules_time = _timed(decide_recorded, recorded)

    stored = [envelopes(f"board-{i}", "board", log) for i, log in enumerate(logs)]
    from services.bench.trivial import TRIVIAL  # noqa: PLC0415

    trivial_log = [
        room_rules.decide(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), _context("t", 1, "bench"))[0]
    ]
    trivial_log += [TRIVIAL.event_types[0](amount=1) for _ in range(events - 1)]
    trivial_stored = [envelopes("trivial", TRIVIAL.name, trivial_log)]
    replayed, replay_time = _timed(replay, stored)
    trivial_replayed, trivial_replay_time = _timed(replay, trivial_stored)

    board_commands_rate = commands / play_time
    trivial_commands_rate = commands / trivial_time
    board_replay_rate = replayed / replay_time
    trivial_replay_rate = trivial_replayed / trivial_replay_time

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
        f"replayed {replayed:,} board and {trivial_replayed:,} trivial events"
    )


if __name__ == "__main__":
    main()
