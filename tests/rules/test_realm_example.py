"""The scenario file examples/realm.jsonl plays through the kernel: a full trade, one refusal, a complete year."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from game_modules import game_module
from test_realm_support import Game, of_type

from almanac.events.errors import RuleError

audit = game_module("realm@1", "audit")
realm_events = game_module("realm@1", "events")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "realm.jsonl"


def play_example(seed_text: str) -> tuple[Game, list[str]]:
    lines = [
        json.loads(line)
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    header, moves = lines[0], lines[1:]
    assert header["ruleset"] == "realm" and header["challenge"] is None
    options = dict(header["options"])
    game = Game(
        players=options.pop("players"),
        room_id=header["room"],
        seed=hashlib.sha256(seed_text.encode()).digest(),
        now_ms=header["time_ms"],
        **options,
    )
    refusals = []
    for move in moves:
        if move["command"]["kind"] == "join_room":
            continue  # the driver seats every player
        try:
            game.send(move["player"], move["command"], now_ms=move["time_ms"])
        except RuleError as error:
            refusals.append(error.code)
    return game, refusals


@pytest.mark.parametrize("seed_text", ["realm example", "another seed", "a third"])
def test_the_example_is_a_complete_year_with_a_full_trade_and_one_refused_command(seed_text: str) -> None:
    game, refusals = play_example(seed_text)
    assert refusals == ["realm.turn_ended"]
    assert game.game.over and game.state.ended
    events = game.game_events()
    story = audit.trade_story(events, "trade-4")
    kinds = [step["type"] for step in story]
    assert kinds[0] == "realm.merchant_sent" and kinds[-1] == "realm.merchant_returned"
    assert kinds.count("realm.trade_rolled") == 2 and "realm.trade_cancelled" not in kinds
    assert of_type(events, realm_events.SeasonEnded)[-1].forced_by == "bob"
