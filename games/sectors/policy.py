"""A simple legal-move policy for the colony's owner: random but always legal, for benchmarks, demos and property tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from almanac.events.manifest import Dice
from almanac.games.sectors.commands import Build, Demolish, EndSeason, Explore, MovePeople
from almanac.games.sectors.data import BUILDING_NAMES, SECTOR_TYPES
from almanac.games.sectors.rules import is_over, neighbours, refusal
from almanac.games.sectors.state import ColonyState

# Out of 100: how often the policy tries each kind of command first. Ending the season is the
# most common so that games move on; demolishing is rare so that colonies keep what they build.
END_SEASON_BELOW = 30
BUILD_BELOW = 60
EXPLORE_BELOW = 75
MOVE_BELOW = 95


def choose_command(state: ColonyState, player: str, dice: Dice) -> Any | None:
    """A command the rules will accept from ``player``, chosen with ``dice``; None when they may not act.

    The same state and the same dice always give the same command. When the kind of command drawn
    has no legal instance (nothing affordable, nothing to explore), the next kind is tried, and
    ending the season, always legal while the game runs, is the last resort.
    """
    if player != state.owner or is_over(state):
        return None
    roll = dice.randbelow(100)
    if roll < END_SEASON_BELOW:
        return EndSeason()
    tries: list[Callable[[ColonyState, Dice], Any | None]] = [_build, _explore, _move, _demolish]
    first = 0 if roll < BUILD_BELOW else 1 if roll < EXPLORE_BELOW else 2 if roll < MOVE_BELOW else 3
    for attempt in tries[first:] + tries[:first]:
        command = attempt(state, dice)
        if command is not None:
            return command
    return EndSeason()


def legal_builds(state: ColonyState) -> list[Build]:
    return [
        command
        for row, column, _ in state.explored()
        for name in BUILDING_NAMES
        if refusal(state, command := Build(row=row, column=column, building=name)) is None
    ]


def legal_explorations(state: ColonyState) -> list[Explore]:
    targets = []
    for position, sector in enumerate(state.sectors):
        if sector is not None:
            continue
        row, column = divmod(position, state.columns)
        if any(state.sector(r, c) is not None for r, c in neighbours(state, row, column)):
            targets.append(Explore(row=row, column=column))
    return targets


def _build(state: ColonyState, dice: Dice) -> Build | None:
    builds = legal_builds(state)
    return dice.choice(builds) if builds else None


def _explore(state: ColonyState, dice: Dice) -> Explore | None:
    targets = legal_explorations(state)
    return dice.choice(targets) if targets else None


def _move(state: ColonyState, dice: Dice) -> MovePeople | None:
    explored = state.explored()
    sources = [(row, column, sector) for row, column, sector in explored if sector.population >= 2]
    if not sources or len(explored) < 2:
        return None
    from_row, from_column, source = dice.choice(sources)
    targets = [
        (row, column, sector) for row, column, sector in explored if (row, column) != (from_row, from_column)
    ]
    to_row, to_column, target = dice.choice(targets)
    cap = SECTOR_TYPES[target.type].population_cap
    # Never more than half the source, so that a move does not empty a working sector.
    most = source.population // 2
    if cap is not None:
        most = min(most, cap - target.population)
    if most < 1:
        return None
    command = MovePeople(
        from_row=from_row,
        from_column=from_column,
        to_row=to_row,
        to_column=to_column,
        count=dice.randint(1, most),
    )
    return command if refusal(state, command) is None else None


def _demolish(state: ColonyState, dice: Dice) -> Demolish | None:
    built = [(row, column, sector) for row, column, sector in state.explored() if sector.buildings]
    if not built:
        return None
    row, column, sector = dice.choice(built)
    position = dice.randbelow(len(sector.buildings))
    return Demolish(row=row, column=column, position=position, building=sector.buildings[position])
