"""`almanac bench rules realm`: actions per second over random legal play, and replay events/s, against a baseline."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from events import codec, registry, room as room_rules
from events.decider import Context
from events.dice import Dice
from events.envelope import GENESIS_HASH, Envelope
from events.hashing import seal
from events.realm.policy import choose_command

SEED = b"bench rules realm secret seed 32"
PLAYERS = ("alice", "bob", "carol")
OPTIONS = {"players": list(PLAYERS), "villages": 2, "years": 3}


def _context(room: str, version: int, player: str) -> Context:
    return Context(room=room, player=player, now_ms=version, version=version, dice=Dice(SEED, room, version))


def _apply(state: Any, command: Any, room: str, player: str, log: list[Any]) -> Any:
    version = (state.version if state is not None else 0) + 1
    for event in room_rules.decide(state, command, _context(room, version, player)):
        state = room_rules.evolve(state, event, room, version)
        log.append(event)
        version += 1
    return state


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
        state = _apply(state, command, room, player, log)
    chooser = Dice(SEED, "policy", index)
    rules_time = 0.0
    while not state.ended:
        player = PLAYERS[chooser.randbelow(len(PLAYERS))]
        command = choose_command(state.game, player, chooser)
        if command is None:
            continue
        commands.append((player, command))
        start = time.perf_counter()
        state = _apply(state, command, room, player, log)
        rules_time += time.perf_counter() - start
    return commands, log, rules_time


def play_trivial(commands: int) -> int:
    """The baseline: the same room path with the trivial rule-set (one counter event per command)."""
    from services.bench.trivial import TRIVIAL, Add  # noqa: PLC0415

    registry.register(TRIVIAL)
    log: list[Any] = []
    state = _apply(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), "trivial", "bench", log)
    state = _apply(state, room_rules.JoinRoom(), "trivial", "bench", log)
    for _ in range(commands):
        state = _apply(state, Add(amount=1), "trivial", "bench", log)
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

    _, trivial_time = _timed(play_trivial, commands)
    stored = [envelopes(f"realm-{i}", "realm", log) for i, log in enumerate(logs)]
    from services.bench.trivial import TRIVIAL  # noqa: PLC0415

    trivial_log = [
        room_rules.decide(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), _context("t", 1, "bench"))[0]
    ]
    trivial_log += [TRIVIAL.event_types[0](amount=1) for _ in range(events - 1)]
    trivial_stored = [envelopes("trivial", TRIVIAL.name, trivial_log)]
    replayed, replay_time = _timed(replay, stored)
    trivial_replayed, trivial_replay_time = _timed(replay, trivial_stored)

    played_rate = commands / play_time
    rules_rate = commands / rules_time
    trivial_rate = commands / trivial_time
    replay_rate = replayed / replay_time
    trivial_replay_rate = trivial_replayed / trivial_replay_time

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
        f"replayed {replayed:,} realm and {trivial_replayed:,} trivial events"
    )


if __name__ == "__main__":
    main()
