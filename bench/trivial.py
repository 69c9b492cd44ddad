"""The trivial rule-set the store benchmark replays: one event kind that adds to a total."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.decider import Context


class TrivialOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class TrivialSetup(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class Add(msgspec.Struct, frozen=True, tag="add", tag_field="kind"):
    amount: int


class Added(msgspec.Struct, frozen=True, tag="trivial.added"):
    amount: int


class TrivialState(msgspec.Struct, frozen=True):
    total: int = 0


class TrivialDecider:
    name = "trivial"
    options_type = TrivialOptions
    setup_type = TrivialSetup
    state_type = TrivialState
    command_types = (Add,)
    event_types = (Added,)
    secrets: dict[type, tuple] = {}  # nothing is hidden

    def setup(self, options: Any, ctx: Context) -> TrivialSetup:
        return TrivialSetup()

    def initial_state(self, setup: Any) -> TrivialState:
        return TrivialState()

    def decide(self, state: TrivialState, command: Any, ctx: Context) -> list[Any]:
        return [Added(amount=command.amount)]

    def evolve(self, state: TrivialState, event: Any) -> TrivialState:
        return TrivialState(total=state.total + event.amount)

    def is_over(self, state: Any) -> bool:
        return False

    def seats(self, state: Any) -> tuple[str, ...]:
        return ()

    def view(self, state: TrivialState, player: str) -> Any:
        return {"total": state.total}

    def redact(self, event: Any, player: str) -> Any:
        return event

    def scores(self, state: Any) -> dict[str, int]:
        return {}

    def public_scores(self, state: Any) -> dict[str, int]:
        return self.scores(state)  # nothing is hidden

    def resources(self, state: TrivialState) -> dict[str, Any]:
        return {"total": state.total}

    def summary(self, event: Any) -> str:
        return f"added {event.amount}"


TRIVIAL = TrivialDecider()
