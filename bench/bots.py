"""`almanac bench bots`: a seat bot's decision time per move, from the seat's view, against the full-state policy.

For every installed rule-set with a seat bot, the bots play rooms through the room step in memory (no Redis): at
each move the seat bot decides from the seat's view (``services.bots.decide_for``: the view the API would give the
seat, rebuilt into what the policy reads, then the policy), and the baseline, measured on the same states in the
same run, is the rule-set's policy handed the full state (what the demo and the bench played with, and what a bot
must not read). Printed: moves timed, microseconds per move for each, and the ratio.
"""

from __future__ import annotations

import time

from rich.table import Table

from almanac.bench.common import output_console
from almanac.events import registry
from almanac.events.dice import Dice
from almanac.events.errors import RuleError
from almanac.events.testing import RoomDriver
from almanac.services.bots import decide_for

SEED = b"almanac bench bots seed 32 bytes"
SEATS = {"realm": ("alice", "bob", "carol")}
OPTIONS = {"realm": {"players": ["alice", "bob", "carol"]}}


def _room(ref: str, name: str, seats: tuple[str, ...]) -> RoomDriver:
    driver = RoomDriver(f"bench-bots-{name}", SEED, 1_000)
    driver.send(seats[0], {"kind": "create_room", "ruleset": ref, "options": OPTIONS.get(name, {})})
    for seat in seats:
        driver.send(seat, {"kind": "join_room"})
    return driver


def measure(ref: str, moves: int) -> tuple[int, float, float]:
    """(moves timed, seat bot µs per move, full-state policy µs per move) over rooms played by the seat bots."""
    manifest = registry.manifest(ref)
    name = manifest.name
    seats = SEATS.get(name, ("alice",))
    bot_s = policy_s = 0.0
    timed = 0
    while timed < moves:
        driver = _room(ref, name, seats)
        idle = 0
        while timed < moves and idle < 3 and not manifest.decider.is_over(driver.state.game):
            acted = False
            for seat in seats:
                driver.now_ms += 60_000
                state = driver.state
                started = time.perf_counter()
                body = decide_for(state, seat, 0, driver.now_ms, key=b"bench bots")
                bot_s += time.perf_counter() - started
                started = time.perf_counter()
                manifest.policy(state.game, seat, Dice(SEED, seat, state.version), driver.now_ms)
                policy_s += time.perf_counter() - started
                timed += 1
                if body is None:
                    continue
                acted = True
                try:
                    driver.send(seat, body)
                except RuleError:
                    pass
            if not acted:
                idle += 1
                driver.now_ms += 3_600_000
                if name == "realm":
                    driver.send(seats[0], {"kind": "end_season"})
    return timed, bot_s / timed * 1e6, policy_s / timed * 1e6


def main(moves: int) -> None:
    console = output_console()
    table = Table(title=f"seat bots: decision time per move ({moves} moves each, in memory)")
    for column in ("rule-set", "moves", "seat bot (view) µs", "policy (state) µs", "ratio"):
        table.add_column(column, justify="right" if column != "rule-set" else "left")
    for manifest in sorted(registry.all_manifests(), key=lambda m: m.ref):
        if manifest.seat_bot is None or manifest.policy is None:
            continue
        timed, bot_us, policy_us = measure(manifest.ref, moves)
        table.add_row(manifest.ref, str(timed), f"{bot_us:,.0f}", f"{policy_us:,.0f}", f"{bot_us / policy_us:.2f}x")
    console.print(table)
