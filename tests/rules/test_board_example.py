"""The scenario file examples/board.jsonl plays through the kernel: one refusal, a complete game."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from game_modules import game_module
from test_board_support import Game

from almanac.events import codec
from almanac.events.errors import RuleError

DECIDER = game_module("board@1", "game").DECIDER

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "board.jsonl"


def test_the_example_scenario_is_a_complete_challenge_game_with_one_refused_command():
    lines = [
        json.loads(line)
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header, moves = lines[0], lines[1:]
    assert header["ruleset"] == "board" and header["challenge"]
    assert moves[0] == {
        "player": header["player"],
        "time_ms": moves[0]["time_ms"],
        "command": {"kind": "join_room"},
    }
    game = Game(room_id=header["room"], player=header["player"])
    game.create(header["options"], challenge=header["challenge"])  # creates and joins, as the first two lines
    refusals = []
    for move in moves[1:]:
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
