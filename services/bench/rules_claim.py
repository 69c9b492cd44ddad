"""`almanac bench rules claim`: claims seeded per second and replay events/s, against same-run baselines."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table

from almanac.events import room as room_rules
from almanac.events.claim.policy import choose_command
from almanac.events.claim.seeding import Lcg, lcg_seed, seed_parcels
from almanac.events.dice import Dice
from almanac.services.bench.common import SEED, apply, replay_against_trivial

T0 = 1_700_000_000_000
STEP_MS = 20 * 60_000  # the policy acts every 20 minutes of server time
DRAWS_PER_CLAIM = 61 * 3  # three draws for each parcel outside the meadow


def seed_claims(count: int) -> int:
    """The seed's map generation alone, one claim per creation second."""
    for second in range(count):
        seed_parcels(T0 + second * 1000)
    return count


def bare_lcg(count: int) -> int:
    """Baseline: the same number of LCG draws (183 per claim) in a plain loop, nothing built."""
    for second in range(count):
        rng = Lcg(lcg_seed(T0 + second * 1000))
        for _ in range(DRAWS_PER_CLAIM):
            rng.rand()
    return count


def stake_claims(count: int) -> int:
    """Staking through the room: CreateRoom -> setup (seeding) -> room.created -> initial state."""
    for index in range(count):
        apply(None, room_rules.CreateRoom(ruleset="claim"), f"claim-{index}", "bench", [], now_ms=T0 + index * 1000)
    return count


def play_game(index: int, player: str = "bench") -> list[Any]:
    """One claim from staking to proving up, driven by the simple policy: its events."""
    room, log, now = f"claim-{index}", [], T0 + index * 1000
    state = apply(None, room_rules.CreateRoom(ruleset="claim"), room, player, log, now_ms=now)
    state = apply(state, room_rules.JoinRoom(), room, player, log, now_ms=now)
    policy_dice = Dice(SEED, "policy", index)
    while not state.ended:
        now += STEP_MS
        command = choose_command(state.game, player, now, policy_dice)
        state = apply(state, command, room, player, log, now_ms=now)
    return log


def _rate(count: int, function: Any, seconds: float) -> float:
    """Calls of ``function(count)`` repeated for about ``seconds``: items per second."""
    done, start = 0, time.perf_counter()
    while True:
        done += function(count)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def main(seconds: float = 3.0) -> None:
    console = Console(width=120)
    console.print("[bold]bench rules claim[/]: pure rules, no Redis; baselines run in the same process")

    seeded = _rate(200, seed_claims, seconds)
    lcg = _rate(200, bare_lcg, seconds / 2)
    staked = _rate(100, stake_claims, seconds / 2)

    logs, events, start = [], 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        log = play_game(len(logs))
        logs.append(log)
        events += len(log)
    play_time = time.perf_counter() - start

    replayed, replay_rate, trivial_rate = replay_against_trivial("claim", logs)

    table = Table("path", "figure", "x baseline")
    table.add_row(
        "claims seeded (64 parcels, 183 LCG draws)", f"{seeded:,.0f} claims/s", f"{seeded / lcg:.3f}"
    )
    table.add_row(
        "  staked through the room (create + setup + evolve)",
        f"{staked:,.0f} claims/s",
        f"{staked / lcg:.3f}",
    )
    table.add_row("  baseline: 183 bare LCG draws per claim", f"{lcg:,.0f} claims/s", "1")
    table.add_row(
        "replay (decode + evolve)", f"{replay_rate:,.0f} events/s", f"{replay_rate / trivial_rate:.3f}"
    )
    table.add_row("  baseline: trivial rule-set replay", f"{trivial_rate:,.0f} events/s", "1")
    table.add_row(
        "complete claims (policy + rules, staked to proved up)", f"{len(logs) / play_time:,.1f} games/s", ""
    )
    console.print(table)
    console.print(
        f"{len(logs)} games, {events:,} events ({events / len(logs):.1f} per game); "
        f"replayed {replayed:,} claim and as many trivial events"
    )


if __name__ == "__main__":
    main()
