"""`almanac bench signing`: commands/s and CPU per command of signed seats against unsigned seats, same run.

Both arms play the same game end to end over HTTP (gateway -> engine -> Redis -> answer) on one stack of our own:
realm rooms with command-bound dice (``dice_scheme`` 3), two seats each, played by closed-loop clients to the game's
end with the same scripted cycle (both seats gather food, then both end the turn). The only difference is the seats:
in the signed arm each join registers an Ed25519 key (signed by it, ``events.signing.join_bytes``) and every command
carries the seat's signature over the version it saw (``client.signing.PlayerKey``, signed inline by the load
generator, as a player's client does), which the engine checks; the unsigned arm sends the same commands with their
command ids and no signature, as the Python client does for an unsigned seat. Windows alternate (unsigned, signed;
then signed, unsigned; ...) on the same stack so drift and other work on the machine fall on both arms alike.

Figures per window: accepted commands per second, the stack's CPU per accepted command (engine-deciding gateway,
projector, Redis: /proc), the load generator's CPU per command apart (signing is the client's cost), and the ratio
signed / unsigned of each adjacent pair of windows; the summary gives the median and the range of the pairs.
"""

from __future__ import annotations

import asyncio
import math
import os
import secrets
import statistics
import tempfile
import time
from typing import Any

import msgspec
from rich.table import Table

from almanac.bench.common import output_console
from almanac.bench.e2e import _run_loop, cpu_seconds
from almanac.client.aio import AsyncClient
from almanac.client.command_sender import CommandSender
from almanac.client.signing import PlayerKey, newest_version
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack

console = output_console()
SEATS = ("p", "q")
# One season of the cycle: both seats gather (one action each), then both end the turn (the season ends). Every
# command of it is legal whatever the dice drew, from the first season to the last (the game ends after 12).
CYCLE = (("p", {"kind": "get_food", "method": "hunt"}), ("q", {"kind": "get_food", "method": "hunt"}),
         ("p", {"kind": "end_turn"}), ("q", {"kind": "end_turn"}))
SEASONS = 12
ARMS = ("unsigned", "signed")


class Room(msgspec.Struct):
    room: str
    tokens: dict[str, str]
    keys: dict[str, PlayerKey] | None  # None: unsigned seats
    seen: int = 0  # the newest room version the seats' answers showed (what the next signed command covers)


async def _open_room(client: AsyncClient, tag: str, signed: bool) -> Room:
    """A realm room (dice scheme 3) with both seats joined; with keys registered by signed joins when ``signed``."""
    room = f"sign-{tag}-{secrets.token_hex(4)}"
    keys = {seat: PlayerKey.generate() for seat in SEATS} if signed else None
    creator = await client.create_room("realm", "p", room=room, dice_scheme=3, options={"players": list(SEATS)},
                                       player_key=keys and keys["p"])
    if not creator.answer.get("joined"):
        raise RuntimeError(f"creating a room did not join it: {str(creator.answer)[:300]}")
    joiner = await client.join(room, "q", player_key=keys and keys["q"])
    return Room(room, {"p": creator.token, "q": joiner.token}, keys,
                max(creator.seen_version, joiner.seen_version))


def _body(room: Room, seat: str, command: dict[str, Any], number: int) -> bytes:
    """The request a seat sends: the command with its id; a signed seat adds the version it saw and its signature."""
    client_id = f"c{number}-{secrets.token_hex(6)}"
    if room.keys is None:
        return CommandSender.body(command, client_id)
    return CommandSender.signed_command_body(room.keys[seat], room.room, seat, command, client_id, room.seen)


async def _play(lean: CommandSender, rooms: list[Room], clients: int) -> dict[str, Any]:
    """Each room played to its game's end by one of ``clients`` closed-loop clients (a seat's next command is sent
    when its last is answered, as a player sends them): accepted commands, refusals by code, elapsed seconds."""
    queue: asyncio.Queue[Room] = asyncio.Queue()
    for room in rooms:
        queue.put_nowait(room)
    accepted = 0
    failures: dict[str, int] = {}

    async def client() -> None:
        nonlocal accepted
        while not queue.empty():
            room = queue.get_nowait()
            for number in range(SEASONS * len(CYCLE)):
                seat, command = CYCLE[number % len(CYCLE)]
                status, payload, _ = await lean.command(room.room, _body(room, seat, command, number),
                                                        room.tokens[seat])
                answer = msgspec.json.decode(payload)
                if status == 200:
                    accepted += 1
                    room.seen = newest_version(answer, room.seen)
                else:
                    code = f"{status} {answer.get('code')}"
                    failures[code] = failures.get(code, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return {"accepted": accepted, "failures": failures, "elapsed": time.perf_counter() - started}


async def _window(url: str, lean: CommandSender, arm: str, rooms: int, clients: int, pids: dict[str, int],
                  tag: str) -> dict[str, Any]:
    async with AsyncClient(url, timeout=30.0) as client:  # rooms opened before the clock
        semaphore = asyncio.Semaphore(8)

        async def one(index: int) -> Room:
            async with semaphore:
                return await _open_room(client, f"{tag}-{index}", arm == "signed")

        opened = await asyncio.gather(*(one(i) for i in range(rooms)))
    await asyncio.sleep(0.5)  # the projector folds the joins before CPU is counted
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    played = await _play(lean, list(opened), clients)
    used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    stack = sum(value for name, value in used.items() if name != "load generator")
    ok = played["accepted"]
    return {"arm": arm, **played, "per_s": ok / played["elapsed"], "stack_cpu_ms": stack / ok * 1000,
            "generator_cpu_ms": used["load generator"] / ok * 1000,
            "process_cpu_ms": {name: value / ok * 1000 for name, value in used.items() if name != "load generator"}}


async def _measure(url: str, pids: dict[str, int], rounds: int, rooms: int, clients: int) -> list[dict[str, Any]]:
    lean = CommandSender([url], clients)
    windows = []
    try:
        for number in range(rounds):
            # Alternate which arm goes first: a pair's two windows are adjacent, and each arm leads half the pairs.
            for arm in (ARMS if number % 2 == 0 else ARMS[::-1]):
                window = await _window(url, lean, arm, rooms, clients, pids, f"{number}-{arm}")
                console.print(f"round {number + 1} {arm:>8}: {window['per_s']:.0f} commands/s, stack "
                              f"{window['stack_cpu_ms']:.2f} ms CPU/command, load generator "
                              f"{window['generator_cpu_ms']:.2f} ms/command, refused {window['failures'] or 'none'}")
                windows.append({**window, "round": number})
    finally:
        await lean.close()
    return windows


def _spread(values: list[float], digits: int = 2) -> str:
    values = [value for value in values if not math.isnan(value)]
    if not values:
        return "n/a (below /proc's 10 ms of CPU resolution)"
    return (f"{statistics.median(values):.{digits}f} (range {min(values):.{digits}f}-{max(values):.{digits}f}, "
            f"n={len(values)})")


def _ratio(value: float, baseline: float) -> float:
    """value / baseline; NaN when the baseline read 0 (a short window can use less CPU than /proc counts)."""
    return value / baseline if baseline else math.nan


def main(settings: Settings, rounds: int = 3, rooms: int = 16, clients: int = 8) -> dict[str, Any]:
    """A stack of our own (Redis, a gateway deciding commands, a projector); ``rounds`` pairs of windows, each
    window ``rooms`` rooms played to the end by ``clients`` clients; print the figures and return them."""
    with tempfile.TemporaryDirectory(prefix="almanac-bench-signing-") as data_dir:
        os.environ.setdefault("ALMANAC_LOG_LEVEL", "warning")
        stack_settings = settings.model_copy(update={"data_dir": data_dir, "http_port": 0, "log_level": "warning"})
        console.print(f"starting Redis, a gateway deciding commands and a projector; {rounds} rounds of an unsigned "
                      f"and a signed window, each {rooms} realm rooms x {SEASONS * len(CYCLE)} commands by {clients} "
                      f"clients ...")
        with Stack(stack_settings, engines=0, gateways=1, say=console.print) as stack:
            stack.start()
            pids = {name: child.pid for name, child in stack.children.items()}
            marker = stack.data_dir / "redis.running"  # written by the embedded Redis: "<pid> <url>"
            if marker.exists():
                pids["redis"] = int(marker.read_text().split()[0])
            pids["load generator"] = os.getpid()
            windows = _run_loop(_measure(stack.urls[0], pids, rounds, rooms, clients))
    by_round = {(w["round"], w["arm"]): w for w in windows}
    ratios = {measure: [_ratio(by_round[(n, "signed")][measure], by_round[(n, "unsigned")][measure])
                        for n in range(rounds)]
              for measure in ("per_s", "stack_cpu_ms", "generator_cpu_ms")}
    table = Table(title=f"signed seats against unsigned seats, end to end: {rounds} alternated pairs of windows, "
                        f"{rooms} realm rooms x {SEASONS * len(CYCLE)} commands each, {clients} closed-loop clients")
    table.add_column("measure")
    table.add_column("unsigned: median (range)", justify="right")
    table.add_column("signed: median (range)", justify="right")
    table.add_column("signed / unsigned, per pair", justify="right")
    for measure, name, digits in (("per_s", "accepted commands/s", 0), ("stack_cpu_ms", "stack CPU ms/command", 3),
                                  ("generator_cpu_ms", "client (load generator) CPU ms/command", 3)):
        table.add_row(name, *(_spread([w[measure] for w in windows if w["arm"] == arm], digits) for arm in ARMS),
                      _spread(ratios[measure], 3))
    console.print(table)
    extra = [by_round[(n, "signed")]["stack_cpu_ms"] - by_round[(n, "unsigned")]["stack_cpu_ms"]
             for n in range(rounds)]
    console.print(f"signing costs the stack {_spread(extra, 3)} ms of CPU per command more (the engine's Ed25519 "
                  f"check and the longer request); the signing client {_spread([by_round[(n, 'signed')]['generator_cpu_ms'] - by_round[(n, 'unsigned')]['generator_cpu_ms'] for n in range(rounds)], 3)} ms more")
    by_process = {name: [by_round[(n, "signed")]["process_cpu_ms"][name] - by_round[(n, "unsigned")]["process_cpu_ms"][name]
                         for n in range(rounds)] for name in windows[0]["process_cpu_ms"]}
    console.print("of which, per process (signed - unsigned, ms of CPU per command): "
                  + "; ".join(f"{name} {_spread(values, 3)}" for name, values in by_process.items()))
    return {"windows": windows, "ratios": ratios, "stack_cpu_ms_extra": extra, "process_cpu_ms_extra": by_process}
