"""The sectors score is a running score: victory points plus the colony's public worth, from the first season."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from game_modules import game_module
from sectors_sandbox import Sandbox

from almanac.events.dice import Dice
from almanac.events.errors import RuleError

DECIDER = game_module("sectors@1", "game").DECIDER
data = game_module("sectors@1", "data")
MANIFEST = game_module("sectors@1", "manifest").MANIFEST


def score(colony) -> int:
    return DECIDER.scores(colony)[colony.owner]


def score_from_view(view: dict) -> int:
    """The documented formula, read off what any player sees (games/sectors/RULES.md, "Scores")."""
    cells = [cell for row in view["grid"] for cell in row if cell["explored"]]
    stock = view["stock"]
    return (
        stock["victory_points"] * 100 + stock["coins"] * 10 + stock["lumber"] * 4
        + sum(cell["population"] for cell in cells) + 10 * sum(len(cell["buildings"]) for cell in cells)
        + 5 * len(cells)
    )


def bot_game(room: str, moves: int = MANIFEST.demo_moves) -> Sandbox:
    """The demo's game: the manifest's bot plays ``moves`` commands (refusals included)."""
    game = Sandbox(player="alice", room_id=room)
    for step in range(moves):
        command = MANIFEST.policy(game.game, "alice", Dice(b"almanac-demo", room, step), 0)
        if command is None:
            break
        try:
            game.play(command, player="alice")
        except RuleError:
            pass
    return game


def test_a_new_colony_already_scores_its_people_and_its_home_sector():
    game = Sandbox({"home_type": "prairie", "home_population": 60}, player="alice")
    assert score(game.game) == 60 + data.SCORE_PER_EXPLORED_SECTOR


def test_a_victory_point_outweighs_everything_that_leads_to_it():
    colony = Sandbox(player="alice").game
    richer = msgspec.structs.replace(colony, stock=msgspec.structs.replace(colony.stock, victory_points=1))
    worked = msgspec.structs.replace(colony, stock=msgspec.structs.replace(colony.stock, coins=2, lumber=5))
    assert score(richer) - score(colony) == 100
    assert score(worked) - score(colony) == 40


def test_the_demos_games_score_and_the_score_is_what_the_public_view_shows():
    games = [bot_game(f"demo-{n}") for n in range(3)]
    scores = [score(game.game) for game in games]
    assert all(value > 50 for value in scores), scores
    assert len(set(scores)) > 1, "the score tells colonies apart"
    for game in games:
        assert score(game.game) == score_from_view(DECIDER.view(game.game, "bob"))


def test_the_public_scores_are_what_the_rulebook_says_and_anyone_can_recount_them_from_a_view():
    doc = (Path(__file__).resolve().parents[2] / "games" / "sectors" / "RULES.md").read_text()
    public = " ".join(doc[doc.index("## What is public"):].split("\n## ")[0].split())
    # The rulebook: "the **public scores** (...) are the running score (`scores`, above)"
    assert re.search(r"the \*\*public scores\*\* \([^)]*\) are the running score \(`scores`", public), public
    for game in [bot_game(f"public-{n}") for n in range(3)]:
        assert DECIDER.public_scores(game.game) == DECIDER.scores(game.game)
        assert DECIDER.public_scores(game.game) == {"alice": score_from_view(DECIDER.view(game.game, "stranger"))}
