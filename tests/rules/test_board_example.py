"""The scenario file examples/board.jsonl plays through the kernel: one refusal, a complete game."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from test_board_support import Game

from events import codec
from events.board import DECIDER
from events.dice import Dice
from events.errors import RuleError
from events.room import CreateRoom, challenge_seed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "board.jsonl"


def test_the_example_scenario_is_a_complete_challenge_game_with_one_refused_command():
    lines = [
        json.loads(line)
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header, moves = lines[0], lines[1:]
    assert header["ruleset"] == "board" and header["challenge"]
    game = Game(room_id=header["room"], player=header["player"], seed=challenge_seed(header["challenge"]))
    plain_context = game.context

    def challenge_context(dice=None, player=None):  # challenge rooms draw with the salt "challenge"
        ctx = plain_context(dice, player)
        return msgspec.structs.replace(ctx, dice=Dice(game.seed, "challenge", ctx.version))

    game.context = challenge_context
    game.play(CreateRoom(ruleset="board", options=header["options"], challenge=header["challenge"]))
    refusals = []
    for move in moves:
        command = codec.decode_command(game.state.ruleset, move["command"])
        try:
            game.play(command, player=move["player"])
        except RuleError as error:
            refusals.append(error.code)
    assert refusals == ["board.overlaps_mountain"]
    assert game.state.ended and game.game.over and game.game.time >= 28
    assert DECIDER.scores(game.game) == {"bea": 6}
    with pytest.raises(RuleError):
        game.play(codec.decode_command("board", {"kind": "skip_element"}))
