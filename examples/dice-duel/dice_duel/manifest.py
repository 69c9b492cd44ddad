"""The dice duel as Almanac knows it: the Decider, a bot, a bench game, a read model and an audit view."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.manifest import AuditView, BenchScenario, Dice, Envelope, ReadModel, RoomState, RuleSet
from dice_duel.game import DECIDER, DuelState, Roll, Rolled, RoundWon


def policy(state: DuelState, player: str, dice: Dice, now_ms: int) -> Roll | None:
    """The only move there is: roll, unless you rolled this round already."""
    if player not in state.players or player in state.rolls or DECIDER.is_over(state):
        return None
    return Roll()


class DuelRow(msgspec.Struct, frozen=True, kw_only=True):
    """A row of the `duels` read model (its type in the API documents; `winner` is the one field it filters on)."""

    room: str
    players: list[str]
    wins: dict[str, int]
    rounds_played: int
    over: bool
    winner: str = ""  # until the duel is over, and after a tied one (and in rows stored before the field existed)


def duel_row(room: RoomState) -> dict[str, Any]:
    """The `duels` read model: who duels whom, the wins so far (public once a round is revealed), who won."""
    duel: DuelState = room.game
    over = DECIDER.is_over(duel)
    best = max(duel.wins.values(), default=0)
    leaders = [player for player in duel.players if duel.wins.get(player, 0) == best]
    return {"room": room.room, "players": list(duel.players), "wins": dict(duel.wins),
            "rounds_played": duel.round - 1, "over": over, "winner": leaders[0] if over and len(leaders) == 1 else ""}


def round_steps(pairs: list[tuple[Envelope, Any]], round_id: str) -> list[dict[str, Any]]:
    """The `round` audit view: both rolls of one round with their faces, then who won it."""
    steps = []
    for envelope, event in pairs:
        if isinstance(event, Rolled | RoundWon) and str(event.round) == round_id:
            detail = {"faces": list(event.faces)} if isinstance(event, Rolled) else {"totals": event.totals}
            steps.append({"version": envelope.version, "text": DECIDER.summary(event), **detail})
    return steps


def round_ids(pairs: list[tuple[Envelope, Any]]) -> list[str]:
    return [str(event.round) for _, event in pairs if isinstance(event, RoundWon)]


MANIFEST = RuleSet(
    decider=DECIDER,
    policy=policy,
    bench=BenchScenario(description="three-round duels of two bots", options={"players": ["ann", "ben"]},
                        players=("ann", "ben")),
    read_models=(ReadModel(name="duels", description="every duel's players and wins", room_row=duel_row,
                           filters=("winner",), columns=("room", "players", "wins", "rounds_played", "over", "winner"),
                           row_type=DuelRow),),
    audit_views=(AuditView(name="round", description="both rolls of one round and its winner",
                           steps=round_steps, ids=round_ids),),
    rulebook="RULES.md",
    demo_moves=12,
)
