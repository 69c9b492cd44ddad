"""The public API a game builds on: a game package imports ``almanac.events.manifest`` and nothing else of the kernel.

Everything a rule-set needs is here, defined or re-exported: its manifest (``RuleSet`` and what it
declares around the Decider), the Decider's protocol and defaults (``BaseDecider``), the command
context and its dice, refusals, what is hidden, the event envelope, the schema's constrained types
and the room's own events. tests/kernel/test_game_imports.py checks every package under games/ and
examples/ imports only this module of the kernel. The core never names a rule-set; it loops over the
manifests the registry finds (``almanac.rulesets`` entry points).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from almanac.events import disclosure
from almanac.events.codec import to_builtins
from almanac.events.decider import Context, Decider, event_tag
from almanac.events.dice import Dice
from almanac.events.disclosure import HIDDEN, Hidden, Secret, is_hidden, redact
from almanac.events.envelope import Envelope
from almanac.events.errors import RuleError
from almanac.events.room import RoomCreated, RoomState
from almanac.events.ruleset import (
    AuditView,
    BenchScenario,
    Comparison,
    Deadline,
    Policy,
    ReadModel,
    RuleSet,
)
from almanac.events.schema import (
    AMOUNT_CEILING,
    Amount,
    Key,
    Name,
    OptionalKey,
    PlayerName,
    Reason,
    RoomId,
    free,
    one_of,
)

__all__ = [
    "AMOUNT_CEILING",
    "HIDDEN",
    "Amount",
    "AuditView",
    "BaseDecider",
    "BenchScenario",
    "Comparison",
    "Context",
    "Deadline",
    "Decider",
    "Dice",
    "Envelope",
    "Hidden",
    "Key",
    "Name",
    "NoOptions",
    "OptionalKey",
    "PlayerName",
    "Policy",
    "ReadModel",
    "Reason",
    "RoomCreated",
    "RoomId",
    "RoomState",
    "RuleError",
    "RuleSet",
    "Secret",
    "event_tag",
    "free",
    "is_hidden",
    "one_of",
    "redact",
    "to_builtins",
]


class NoOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Creation options (and setup) of a game that has none."""


class BaseDecider:
    """Defaults for the Decider protocol, so a minimal game is ``decide`` + ``evolve`` + ``initial_state``.

    Subclasses set ``name``, ``state_type``, ``command_types`` and ``event_types``. The defaults: no
    options (the setup is the options), never over by itself (a room ends with ``end_room``), anyone
    may join, every player sees the whole state and every event, no scores, no resources, and an
    event's summary is its tag. Override what your game hides or counts.
    """

    name: str = ""
    options_type: type = NoOptions
    setup_type: type = NoOptions
    state_type: type = object
    command_types: tuple[type, ...] = ()
    event_types: tuple[type, ...] = ()
    # What is hidden, as data (events/disclosure.py): event type -> Secret entries. Empty: all public.
    secrets: Mapping[type, tuple[Secret, ...]] = MappingProxyType({})

    def setup(self, options: Any, ctx: Context) -> Any:
        return options

    def initial_state(self, setup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define initial_state(setup)")

    def decide(self, state: Any, command: Any, ctx: Context) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define decide(state, command, ctx)")

    def evolve(self, state: Any, event: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define evolve(state, event)")

    def is_over(self, state: Any) -> bool:
        return False

    def seats(self, state: Any) -> tuple[str, ...]:
        return ()

    def view(self, state: Any, player: str) -> Any:
        return state

    def redact(self, event: Any, player: str) -> Any | None:
        return disclosure.redact(self.secrets, event, player)

    def scores(self, state: Any) -> dict[str, int]:
        return {}

    def public_scores(self, state: Any) -> dict[str, int]:
        # Only right while no score depends on a secret: a game whose scores count hidden amounts overrides it.
        return self.scores(state)

    def resources(self, state: Any) -> dict[str, Any]:
        return {}

    def summary(self, event: Any) -> str:
        return event_tag(event)
