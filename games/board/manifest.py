"""The board rule-set's manifest: its Decider, the simple policy, the demo's shared challenge and the bench game."""

from __future__ import annotations

from almanac.events.manifest import BenchScenario, Dice, RuleSet
from almanac.games.board.game import DECIDER
from almanac.games.board.policy import choose_command


def policy(state: object, player: str, dice: Dice, now_ms: int) -> object:
    return choose_command(state, player, dice)  # type: ignore[arg-type]


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays the seed as written (docs/architecture.md, "Rule-set versions").
    default=True,
    policy=policy,
    bench=BenchScenario(description="complete solo games of the simple policy"),
    console_picture="almanac.games.board:picture.js",
    rulebook="docs/rules/board.md",
    examples=("examples/board.jsonl",),
    demo_moves=40,
    # Board rooms of one public challenge deal the same cards, so the demo's players' scores compare.
    shared_challenge=True,
)
