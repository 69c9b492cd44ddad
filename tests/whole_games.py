"""The smallest whole game of each built-in rule-set, as the packaged clients' stories play them to their end."""

from __future__ import annotations

from typing import Any

from almanac.client import Client

# The smallest whole game each built-in rule-set allows (games/*/RULES.md): realm and sectors for one year (realm
# with two cities: a season ends once both have ended their turn), board and claim as they come.
GAMES: dict[str, dict[str, Any]] = {
    "board": {},
    "claim": {},
    "realm": {"players": ["alice", "bob"], "years": 1},
    "sectors": {"years": 1},
}
# A claim is proved up no sooner than 48 h after its staking (games/claim/RULES.md): its owner plays on through a
# gateway whose command stamps read 49 h ahead (tests/clock_ahead.py).
CLAIM_AHEAD_MS = 49 * 3_600_000
# Rounds the claim's owner plays on the day she stakes it, before the two days pass.
CLAIM_FIRST_DAY = 4
# Far more rounds than the smallest games take (board about 20 moves, a year of realm about 40, of sectors about
# 15): a bot that stalls fails the story instead of hanging it.
ROUNDS = 300


def ended_by_its_rules(client: Client, room: str, auditor: str, ruleset: str) -> None:
    """The room's last command was a move of the game, and the rules ended the room with it (nobody's end_room):
    its room.ended says the game is over and shares the command of the rule-set's last event."""
    latest = client.events(room, token=auditor)["latest_version"]
    last_move, ended = client.events(room, token=auditor, from_version=latest - 1)["events"][-2:]
    assert (ended["type"], ended["event"]["reason"]) == ("room.ended", "the game is over"), ended
    assert last_move["type"].startswith(f"{ruleset}.") and last_move["command_id"] == ended["command_id"], last_move
    assert client.room(room)["over"] is True
