"""The dice duel's rules: its command, its events (stored forever), its state and the Decider."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.manifest import BaseDecider, Context, RuleError, Secret


class DuelOptions(msgspec.Struct, frozen=True, kw_only=True):
    players: tuple[str, str] = ("alice", "bob")
    rounds: int = 3


# --- the command (imperative) -------------------------------------------------------------------


class Roll(msgspec.Struct, frozen=True, kw_only=True, tag="roll", tag_field="kind"):
    """Roll your two dice for this round; the other player sees only that you rolled."""


# --- the events (past tense, the stored format) -------------------------------------------------


class Rolled(msgspec.Struct, frozen=True, kw_only=True, tag="dice_duel.rolled"):
    player: str
    round: int
    faces: tuple[int, ...]  # the two dice; the other player gets {"hidden": true} (see DuelDecider.secrets)


class RoundWon(msgspec.Struct, frozen=True, kw_only=True, tag="dice_duel.round_won"):
    round: int
    totals: dict[str, int]  # both players' totals, public from now on
    winner: str  # "" on a tie


# --- the state ----------------------------------------------------------------------------------


class DuelState(msgspec.Struct, frozen=True, kw_only=True):
    players: tuple[str, str]
    rounds: int
    round: int = 1
    rolls: dict[str, tuple[int, ...]] = {}  # this round's rolls, hidden until both are in
    wins: dict[str, int] = {}


# --- the Decider: decide + evolve + initial state, and what the duel hides and counts ----------


class DuelDecider(BaseDecider):
    name = "dice_duel"
    options_type = DuelOptions
    setup_type = DuelOptions
    state_type = DuelState
    command_types = (Roll,)
    event_types = (Rolled, RoundWon)
    # A roll's faces are the roller's alone until the round is won (RoundWon publishes the totals).
    secrets = {Rolled: (Secret(("faces",), seen_by=lambda event: (event.player,)),)}

    def initial_state(self, setup: DuelOptions) -> DuelState:
        return DuelState(players=setup.players, rounds=setup.rounds, wins={p: 0 for p in setup.players})

    def decide(self, state: DuelState, command: Any, ctx: Context) -> list[Any]:
        if ctx.player in state.rolls:
            raise RuleError("dice_duel.already_rolled", f"{ctx.player} rolled in round {state.round} already; "
                            "wait for the other player", field="kind")
        # Every random outcome is drawn from the room's dice and written into the event.
        rolled = Rolled(player=ctx.player, round=state.round, faces=ctx.dice.d6(2))
        if len(state.rolls) == 0:
            return [rolled]
        totals = {player: sum(faces) for player, faces in state.rolls.items()}
        totals[ctx.player] = sum(rolled.faces)
        best = max(totals.values())
        leaders = [player for player in state.players if totals[player] == best]
        return [rolled, RoundWon(round=state.round, totals=totals, winner=leaders[0] if len(leaders) == 1 else "")]

    def evolve(self, state: DuelState, event: Any) -> DuelState:
        if isinstance(event, Rolled):
            return msgspec.structs.replace(state, rolls={**state.rolls, event.player: event.faces})
        wins = dict(state.wins)
        if event.winner:
            wins[event.winner] += 1
        return msgspec.structs.replace(state, round=state.round + 1, rolls={}, wins=wins)

    def is_over(self, state: DuelState) -> bool:
        return state.round > state.rounds

    def seats(self, state: DuelState) -> tuple[str, ...]:
        return state.players

    def view(self, state: DuelState, player: str) -> dict[str, Any]:
        return {"round": state.round, "rounds": state.rounds, "wins": dict(state.wins),
                "my_roll": list(state.rolls.get(player, ())), "rolled": sorted(state.rolls)}

    def scores(self, state: DuelState) -> dict[str, int]:
        return dict(state.wins)

    def summary(self, event: Any) -> str:
        if isinstance(event, Rolled):
            return f"{event.player} rolled for round {event.round}"
        return f"round {event.round}: " + (f"{event.winner} wins" if event.winner else "a tie")


DECIDER = DuelDecider()
