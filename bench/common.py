"""What the rule benchmarks share: deciding commands on the room path, sealing logs, replay, timing."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console

from almanac.events import registry, room as room_rules, step
from almanac.events.decider import Context
from almanac.events.dice import Dice
from almanac.events.envelope import Envelope
from almanac.services.terminal import output_width

SEED = b"almanac benchmark secret seed 32"


def output_console(minimum: int = 0) -> Console:
    """A console for a benchmark's figures, as wide as the CLI's output (the terminal, COLUMNS, or unwrapped when
    piped: a table sent to a file or ``tee`` is never cut at 80 columns); at least ``minimum`` columns wide."""
    width = output_width()
    return Console(width=max(width if width is not None else Console().width, minimum))


def apply(state: Any, command: Any, room: str, player: str, log: list[Any], now_ms: int | None = None) -> Any:
    """Decide ``command`` on the room path and fold its events into ``state``, recording them in ``log``.

    Rules only (no codec, no sealing): the rule benchmarks measure the rules; sealing and replay from
    the stored bytes are ``seal_log`` and ``replay`` (the one ``events.step.replay``)."""
    version = (state.version if state is not None else 0) + 1
    ctx = Context(room=room, player=player, now_ms=version if now_ms is None else now_ms, version=version,
                  dice=Dice(SEED, room, version))
    for event in room_rules.decide(state, command, ctx):
        state = room_rules.evolve(state, event, room, version)
        log.append(event)
        version += 1
    return state


def play_trivial(commands: int, player: str = "bench") -> int:
    """The baseline: the same room path with the trivial rule-set (one counter event per command)."""
    from almanac.bench.trivial import TRIVIAL, Add  # noqa: PLC0415 - registered only when benchmarking

    registry.register(TRIVIAL)
    log: list[Any] = []
    state = apply(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), "trivial", player, log)
    state = apply(state, room_rules.JoinRoom(), "trivial", player, log)
    for _ in range(commands):
        state = apply(state, Add(amount=1), "trivial", player, log)
    return len(log)


def seal_log(room: str, ruleset: str, events: list[Any], player: str = "bench") -> list[Envelope]:
    """The events as the stored, hash-chained envelopes of one room."""
    return step.seal_events(room, ruleset, events, player)


def replay(logs: list[list[Envelope]]) -> int:
    """Decode every envelope and fold it into the room state, as a reader catching up does; events folded."""
    count = 0
    for log in logs:
        step.replay(log)
        count += len(log)
    return count


def timed(function: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def trivial_log(events: int, room: str = "trivial") -> list[Envelope]:
    """A created trivial room followed by additions, ``events`` envelopes in all: the replay baseline."""
    from almanac.bench.trivial import TRIVIAL, Added  # noqa: PLC0415 - registered only when benchmarking

    registry.register(TRIVIAL)
    log: list[Any] = []
    apply(None, room_rules.CreateRoom(ruleset=TRIVIAL.name), room, "bench", log)
    log += [Added(amount=1) for _ in range(events - 1)]
    return seal_log(room, TRIVIAL.name, log)
