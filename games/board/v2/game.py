"""board@2's Decider: board@1's (``games/board/v1/game.py``) with the turn limit of ``rules.py``."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Context, RuleError
from almanac.games.board.v1.commands import PlaceElement, SkipElement
from almanac.games.board.v1.events import EVENT_TYPES
from almanac.games.board.v1.game import BoardDecider as BoardDeciderV1
from almanac.games.board.v2.rules import (
    DECIDE,
    EVOLVE,
    BoardOptionsV2,
    BoardSetupV2,
    BoardStateV2,
    TimeOut,
    TurnBegan,
    TurnTimedOut,
    initial_state,
    turn_due_ms,
)


class BoardDecider(BoardDeciderV1):
    """board@1's Decider with an opt-in turn limit and its ``time_out`` command."""

    options_type = BoardOptionsV2
    setup_type = BoardSetupV2
    state_type = BoardStateV2
    command_types: tuple[type, ...] = (PlaceElement, SkipElement, TimeOut)
    event_types: tuple[type, ...] = (*EVENT_TYPES, TurnBegan, TurnTimedOut)

    def setup(self, options: BoardOptionsV2, ctx: Context) -> BoardSetupV2:  # type: ignore[override]
        """board@1's setup (same dice, same draws), the limit, and the room's creation time."""
        first = super().setup(options, ctx)
        return BoardSetupV2(player=first.player, mountain_bonus=first.mountain_bonus,
                            extended_pool=first.extended_pool, deck=first.deck, missions=first.missions,
                            turn_limit_s=options.turn_limit_s, started_ms=ctx.now_ms)

    def initial_state(self, setup: BoardSetupV2) -> BoardStateV2:  # type: ignore[override]
        return initial_state(setup, super().initial_state(setup))

    def decide(self, state: BoardStateV2, command: Any, ctx: Context) -> list[Any]:  # type: ignore[override]
        handler = DECIDE.get(type(command))
        if handler is None:
            raise RuleError("unknown_command",
                            f"the board does not know the command {type(command).__name__}; "
                            "use place_element, skip_element or time_out",
                            field="kind", allowed=["place_element", "skip_element", "time_out"])
        if state.over:
            raise RuleError("game_over", "the game is over; no more moves are accepted")
        return handler(state, command, ctx)

    def evolve(self, state: BoardStateV2, event: Any) -> BoardStateV2:  # type: ignore[override]
        return EVOLVE[type(event)](state, event)

    def view(self, state: BoardStateV2, player: str) -> dict[str, Any]:  # type: ignore[override]
        """board@1's view, the turn limit and when the current turn's time is up (server time)."""
        return {**super().view(state, player), "turn_limit_s": state.turn_limit_s,
                "turn_due_ms": turn_due_ms(state)}

    def resources(self, state: BoardStateV2) -> dict[str, Any]:  # type: ignore[override]
        return {**super().resources(state), "timed_out": state.timed_out}

    def summary(self, event: Any) -> str:
        if isinstance(event, TurnTimedOut):
            return f"turn {event.turn} timed out: element {event.element} skipped; time {event.time_after}"
        if isinstance(event, TurnBegan):
            return f"turn {event.turn} began"
        return super().summary(event)


DECIDER = BoardDecider()
