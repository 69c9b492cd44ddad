"""A tiny rule-set for kernel and store tests: a shared counter that players add to and roll dice for."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.decider import Context
from almanac.events.errors import RuleError


class CounterOptions(msgspec.Struct, frozen=True, kw_only=True):
    start: int = 0
    limit: int = 1_000_000_000
    seats: tuple[str, ...] = ()


class CounterSetup(msgspec.Struct, frozen=True, kw_only=True):
    start: int
    limit: int
    seats: tuple[str, ...]
    lucky_number: int


class Add(msgspec.Struct, frozen=True, kw_only=True, tag="add", tag_field="kind", forbid_unknown_fields=True):
    amount: Annotated[int, msgspec.Meta(ge=-1_000_000, le=1_000_000)]


class Roll(msgspec.Struct, frozen=True, kw_only=True, tag="roll", tag_field="kind", forbid_unknown_fields=True):
    dice: Annotated[int, msgspec.Meta(ge=0, le=100)] = 1


class Added(msgspec.Struct, frozen=True, kw_only=True, tag="counter.added"):
    amount: int


class Rolled(msgspec.Struct, frozen=True, kw_only=True, tag="counter.rolled"):
    faces: tuple[int, ...]


class CounterState(msgspec.Struct, frozen=True, kw_only=True):
    total: int
    limit: int
    seats: tuple[str, ...]
    lucky_number: int
    rolls: tuple[int, ...] = ()
    by_player: dict[str, int] = {}


class CounterDecider:
    name = "counter"
    options_type = CounterOptions
    setup_type = CounterSetup
    state_type = CounterState
    command_types = (Add, Roll)
    event_types = (Added, Rolled)
    secrets: dict[type, tuple] = {}  # nothing is hidden

    def setup(self, options: CounterOptions, ctx: Context) -> CounterSetup:
        return CounterSetup(start=options.start, limit=options.limit, seats=options.seats, lucky_number=ctx.dice.randbelow(100))

    def initial_state(self, setup: CounterSetup) -> CounterState:
        return CounterState(total=setup.start, limit=setup.limit, seats=setup.seats, lucky_number=setup.lucky_number)

    def decide(self, state: CounterState, command: Any, ctx: Context) -> list[Any]:
        if isinstance(command, Add):
            if command.amount <= 0:
                raise RuleError("counter.amount_not_positive", f"amount must be at least 1, got {command.amount}", field="amount")
            return [Added(amount=command.amount)]
        if isinstance(command, Roll):
            return [Rolled(faces=ctx.dice.d6(command.dice))]
        raise RuleError("unknown_command", f"unknown command {command!r}")

    def evolve(self, state: CounterState, event: Any) -> CounterState:
        if isinstance(event, Added):
            return msgspec.structs.replace(state, total=state.total + event.amount)
        if isinstance(event, Rolled):
            return msgspec.structs.replace(state, rolls=state.rolls + event.faces)
        return state

    def is_over(self, state: CounterState) -> bool:
        return state.total >= state.limit

    def seats(self, state: CounterState) -> tuple[str, ...]:
        return state.seats

    def view(self, state: CounterState, player: str) -> Any:
        return {"total": state.total, "rolls": list(state.rolls)}

    def redact(self, event: Any, player: str) -> Any:
        return event

    def scores(self, state: CounterState) -> dict[str, int]:
        return {seat: state.total for seat in state.seats}

    def public_scores(self, state: Any) -> dict[str, int]:
        return self.scores(state)  # nothing is hidden

    def resources(self, state: CounterState) -> dict[str, Any]:
        return {"total": state.total}

    def summary(self, event: Any) -> str:
        return f"{type(event).__name__} {msgspec.to_builtins(event)}"


COUNTER = CounterDecider()
