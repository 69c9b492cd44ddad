"""realm@2's one changed rule: in mining, each skull cancels one star (version 1: any skull finds only stone).

The balance question version 1 left open (docs/rules/realm.md, "Version 2"): under version 1 any skull
turns a mining try into a stone find, and a gold try rolls eight dice, so gold is found on about 21% of
gold tries (measured: docs/measured-facts.md). Version 2 reads the seed's "if you roll a skull you
only find stone at a -50% disadvantage" as a cost, not a veto: each skull cancels one star, and the
try then resolves like any other (the ore, a lesser ore, a blank's stone, or nothing), which finds
gold on about 49% of gold tries. Everything else is version 1's code, imported, not copied.
"""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.manifest import Context
from almanac.games.realm.v1 import commands as realm_commands, data, rules
from almanac.games.realm.v1.state import RealmState

# Stars one skull cancels in a mining try (version 1: any skull means "only stone, at -50%").
SKULL_CANCELS_STARS = 1


def resolve_mining(ore: str, faces: tuple[str, ...], moons: str, use_saved: int, lesser_ore: str) -> rules.MiningResult:
    """What a mining try finds under version 2: stars less one per skull, then version 1's steps 3 to 6."""
    skulls = rules.count(faces, data.SKULL)
    without_skulls = tuple(face for face in faces if face != data.SKULL)
    # Version 1's resolution of the same dice with the skulls taken out, then the skulls' cost in stars.
    counted = rules.resolve_mining(ore, without_skulls, moons, use_saved, "none")
    stars = max(0, counted.stars - SKULL_CANCELS_STARS * skulls)

    def result(outcome: str, found: str, amount: int) -> rules.MiningResult:
        return rules.MiningResult(stars=stars, saved_gained=counted.saved_gained, outcome=outcome, found=found,
                                  amount=amount)

    if stars >= data.MINING_MINIMUM_STARS[ore]:
        return result("found", ore, rules.mining_yield(ore, stars))
    if lesser_ore != "none":
        reachable = [
            lesser
            for lesser in data.ORES[: data.ORES.index(ore)]
            if stars >= data.MINING_MINIMUM_STARS[lesser] and lesser_ore in ("best", lesser)
        ]
        if reachable:
            amount = rules.round_down_hundreds(rules.mining_yield(reachable[-1], stars) * data.LESSER_ORE_KEEP)
            return result("lesser_ore", reachable[-1], amount)
    if rules.count(faces, data.BLANK):
        return result("blank_stone", "stone", rules.round_down_hundreds(data.MINING_UNIT * data.BLANK_STONE_KEEP))
    return result("nothing", "", 0)


def decide_mine(state: RealmState, command: realm_commands.Mine, ctx: Context) -> list[Any]:
    """Version 1's checks and roll, resolved by version 2's mining (the dice are the same draws)."""
    (mined,) = rules.decide_mine(state, command, ctx)
    found = resolve_mining(command.ore, mined.dice, command.moons, command.use_saved, command.lesser_ore)
    return [msgspec.structs.replace(mined, stars=found.stars, saved_gained=found.saved_gained,
                                    outcome=found.outcome, found=found.found, amount=found.amount)]


DECIDE = {**rules.DECIDE, realm_commands.Mine: decide_mine}
