"""The Decider protocol every rule-set implements, the context a decision sees, and `fold`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

from almanac.events.dice import Dice


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a decision may know from outside the rules.

    ``now_ms`` is the server's time stamped on the command when it arrived (never the client's);
    ``version`` is the version the first event of this decision will get; ``dice`` is derived from
    the room's secret seed and that version.
    """

    room: str
    player: str
    now_ms: int
    version: int
    dice: Dice
    seed_commitment: str = ""
    # Only read by the room lifecycle, to reveal the seed in the event that ends the room.
    secret_seed_hex: str = ""
    # Scheme-2 rooms only, read by the room lifecycle alone: the (player, nonce) pairs of the seated
    # players the dice were keyed with (revealed when the room ends), and the commitments of every
    # nonce the server holds for the room (a join may commit only to one of those).
    nonces: tuple[tuple[str, bytes], ...] = ()
    known_nonces: Any = frozenset()


@runtime_checkable
class Decider(Protocol):
    """A rule-set: pure functions from commands to events and from events to state.

    Attributes:
        name: the rule-set's registry name, also the prefix of its event tags (``"sectors"``).
        options_type: the Struct of creation options a client may send (validated; defaults allowed).
        setup_type: the fully resolved setup recorded in ``room.created`` (every random draw made).
        state_type: the game state Struct (frozen; snapshots decode into it).
        command_types: the command Structs (``tag_field="kind"``).
        event_types: the event Structs (``tag="<name>.<snake_case>"``), the stored format.
        secrets: what is hidden, as data: per event type, the fields only some players may see
            (``events.disclosure.Secret``); ``redact`` applies it. Everything not declared is public.
    """

    name: str
    options_type: type
    setup_type: type
    state_type: type
    command_types: tuple[type, ...]
    event_types: tuple[type, ...]
    secrets: Mapping[type, tuple[Any, ...]]

    def setup(self, options: Any, ctx: Context) -> Any:
        """Resolve creation options into a setup, drawing any randomness from ``ctx.dice``."""

    def initial_state(self, setup: Any) -> Any:
        """The game state before any event but the room's creation."""

    def decide(self, state: Any, command: Any, ctx: Context) -> list[Any]:
        """The events a command causes; raises ``RuleError`` when the rules refuse it."""

    def evolve(self, state: Any, event: Any) -> Any:
        """The state after one event; never draws, never fails on a recorded event."""

    def is_over(self, state: Any) -> bool: ...

    def seats(self, state: Any) -> tuple[str, ...]:
        """Player ids that may join; empty means anyone may."""

    def view(self, state: Any, player: str) -> Any:
        """What one player may see (builtins or Structs); hidden information left out."""

    def redact(self, event: Any, player: str) -> Any | None:
        """The event as ``player`` may see it (hidden fields set to ``disclosure.HIDDEN``), or None for nothing."""

    def scores(self, state: Any) -> dict[str, int]:
        """Score per player, complete (auditors, the player's own view, the game's end)."""

    def public_scores(self, state: Any) -> dict[str, int]:
        """The scores anyone may see now (leaderboards, ``/scores``): they never change in a way that
        reveals a hidden amount (e.g. a function of the public view, or only once the game is over)."""

    def resources(self, state: Any) -> dict[str, Any]:
        """Resources and holdings, per player or global (builtins)."""

    def summary(self, event: Any) -> str:
        """One line describing an event, for logs and audits."""


def event_tag(event: msgspec.Struct | type[msgspec.Struct]) -> str:
    """The stored type tag of an event Struct or Struct class."""
    return event.__struct_config__.tag  # type: ignore[return-value]


def fold(evolve: Any, events: Iterable[Any], state: Any) -> Any:
    """Apply ``evolve`` to each event in order, starting from ``state``."""
    for event in events:
        state = evolve(state, event)
    return state
