"""board@2's additions to board@1: the turn time limit, the state that records when a turn began, the timeout.

Without ``turn_limit_s`` a board@2 room decides and folds exactly as board@1 (the seed as written): no
``board.turn_began`` event is written and ``time_out`` is refused. With it, every decision that leaves a
turn to play ends with ``board.turn_began`` (the command's server time, ``ctx.now_ms``), and once the
limit has passed ``time_out`` skips the current element (docs/rules/board.md, "Version 2").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from almanac.events.manifest import Context, RuleError
from almanac.games.board.v1 import rules as v1
from almanac.games.board.v1.commands import PlaceElement, SkipElement
from almanac.games.board.v1.data import GAME_LENGTH
from almanac.games.board.v1.state import BoardOptions, BoardSetup, BoardState

# Bounds of the option: shorter than 10 s is no game over a network; a week is "a game that runs for days".
TURN_LIMIT_MIN_S = 10
TURN_LIMIT_MAX_S = 7 * 24 * 3600
TurnLimit = Annotated[int, msgspec.Meta(ge=TURN_LIMIT_MIN_S, le=TURN_LIMIT_MAX_S,
                                        description="seconds a turn may last, 10 .. 604800 (7 days)")]
# Every turn spends at least one unit of the game's time, so a game has at most GAME_LENGTH turns.
TurnNumber = Annotated[int, msgspec.Meta(ge=0, le=GAME_LENGTH - 1, description="the turn the timeout is for")]


class BoardOptionsV2(BoardOptions, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """board@1's options and ``turn_limit_s`` (absent: no limit, the seed's rules)."""

    turn_limit_s: TurnLimit | None = None


class BoardSetupV2(BoardSetup, frozen=True, kw_only=True):
    """board@1's setup, the turn limit and the server time the room was created (the first turn's start)."""

    turn_limit_s: int | None = None
    started_ms: int = 0


class BoardStateV2(BoardState, frozen=True, kw_only=True):
    """board@1's state, the turn limit, when the current turn began (server time) and the turns timed out."""

    turn_limit_s: int | None = None
    turn_started_ms: int = 0
    timed_out: int = 0


class TimeOut(msgspec.Struct, frozen=True, kw_only=True, tag="time_out", tag_field="kind",
              forbid_unknown_fields=True):
    """The turn's time is up: skip the current element (sent by the clock; refused before the limit passed)."""

    turn: TurnNumber


class TurnBegan(msgspec.Struct, frozen=True, kw_only=True, tag="board.turn_began"):
    """A turn began at server time ``at_ms`` (written only in rooms with a turn limit)."""

    turn: int
    at_ms: int


class TurnTimedOut(msgspec.Struct, frozen=True, kw_only=True, tag="board.turn_timed_out"):
    """The turn's limit passed: the current element was skipped; its time still counts."""

    turn: int
    element: int
    time: int
    time_after: int


def turn_number(state: BoardStateV2) -> int:
    """The turn being played: every element placed, skipped or timed out so far."""
    return state.placed + state.skipped + state.timed_out


def turn_due_ms(state: BoardStateV2) -> int | None:
    """When the current turn's limit passes (server time), or None without a limit or after the game."""
    if state.turn_limit_s is None or state.over:
        return None
    return state.turn_started_ms + state.turn_limit_s * 1000


def _with_turn_began(state: BoardStateV2, events: list[Any], ctx: Context) -> list[Any]:
    """``events`` and, in a room with a limit whose game goes on, the next turn's start at the command's time."""
    if state.turn_limit_s is None:
        return events
    after = state
    for event in events:
        after = evolve(after, event)
    if after.over:
        return events
    return [*events, TurnBegan(turn=turn_number(after), at_ms=ctx.now_ms)]


def _v1_decision(handler: Callable[[BoardState, Any, Context], list[Any]]) -> Callable[..., list[Any]]:
    def decide(state: BoardStateV2, command: Any, ctx: Context) -> list[Any]:
        return _with_turn_began(state, handler(state, command, ctx), ctx)

    return decide


def decide_time_out(state: BoardStateV2, command: TimeOut, ctx: Context) -> list[Any]:
    due = turn_due_ms(state)
    if due is None:
        raise RuleError("board.no_turn_limit", "this room has no turn time limit; nothing times out", field="kind")
    current = turn_number(state)
    if command.turn != current:
        raise RuleError("board.not_current_turn", f"turn {command.turn} is not the current turn ({current})",
                        field="turn", allowed=[current])
    if ctx.now_ms < due:
        raise RuleError("board.turn_not_over", f"turn {current} has {due - ctx.now_ms} ms left", field="kind")
    element = v1.current_element(state)
    timed_out = TurnTimedOut(turn=current, element=element.number, time=element.time,
                             time_after=state.time + element.time)
    consequences = v1._consequences(evolve_turn_timed_out(state, timed_out), ctx)  # noqa: SLF001 - v1 is ours
    return _with_turn_began(state, [timed_out, *consequences], ctx)


def evolve_turn_began(state: BoardStateV2, event: TurnBegan) -> BoardStateV2:
    return msgspec.structs.replace(state, turn_started_ms=event.at_ms)


def evolve_turn_timed_out(state: BoardStateV2, event: TurnTimedOut) -> BoardStateV2:
    return msgspec.structs.replace(state, deck=state.deck[1:], time=state.time + event.time,
                                   timed_out=state.timed_out + 1)


def evolve(state: Any, event: Any) -> Any:
    return EVOLVE[type(event)](state, event)


def initial_state(setup: BoardSetupV2, state: BoardState) -> BoardStateV2:
    """board@1's initial state with the limit, the first turn beginning when the room was created."""
    return BoardStateV2(**msgspec.structs.asdict(state), turn_limit_s=setup.turn_limit_s,
                        turn_started_ms=setup.started_ms)


DECIDE: dict[type, Callable[[Any, Any, Context], list[Any]]] = {
    PlaceElement: _v1_decision(v1.decide_place_element),
    SkipElement: _v1_decision(v1.decide_skip_element),
    TimeOut: decide_time_out,
}

EVOLVE: dict[type, Callable[[Any, Any], Any]] = {
    **v1.EVOLVE,
    TurnBegan: evolve_turn_began,
    TurnTimedOut: evolve_turn_timed_out,
}
