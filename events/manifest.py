"""A rule-set's manifest: its Decider and everything the core offers around it (bots, bench, read models, audits).

This module, with the names it re-exports, is the public API a rule-set package builds on: a game
outside this repository imports only ``almanac.events.manifest``. The core never names a rule-set;
it loops over the manifests the registry finds (``almanac.rulesets`` entry points).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec

from almanac.events import disclosure
from almanac.events.decider import Context, Decider, event_tag
from almanac.events.dice import Dice
from almanac.events.disclosure import HIDDEN, Hidden, Secret
from almanac.events.envelope import Envelope
from almanac.events.errors import RuleError
from almanac.events.fingerprint import package_fingerprint
from almanac.events.room import RoomState

__all__ = [
    "AuditView",
    "BaseDecider",
    "BenchScenario",
    "Comparison",
    "Context",
    "Decider",
    "Dice",
    "Envelope",
    "HIDDEN",
    "Hidden",
    "NoOptions",
    "Policy",
    "ReadModel",
    "RoomState",
    "RuleError",
    "RuleSet",
    "Secret",
]

# A bot: what ``player`` does next in ``state`` (None: nothing to do now). ``dice`` is the bot's own
# randomness (never the room's), ``now_ms`` the server time the command will carry.
Policy = Callable[[Any, str, Dice, int], Any]

# Read models the core itself keeps under these names; a rule-set's read models take other names.
CORE_READ_MODELS = ("rooms", "leaderboards")
_MODEL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


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


@dataclass(frozen=True, kw_only=True)
class ReadModel:
    """A read model a rule-set adds: rows the projector keeps for its rooms, rebuildable from the log.

    Exactly one of ``room_row`` (one row per room, a function of the room's state after each batch;
    None = no row) and ``event_rows`` (rows per event, a ledger kept in log order; it sees every event
    of the room, the room's own ``room.*`` events included). Readers filter by
    ``room`` and by the row fields in ``filters``, get rows sorted by ``order_by``, and a CLI table shows
    ``columns``. ``auditors_only`` when the rows carry what players may not see.
    """

    name: str
    description: str
    room_row: Callable[[RoomState], dict[str, Any] | None] | None = None
    event_rows: Callable[[Envelope, Any], list[dict[str, Any]]] | None = None
    order_by: tuple[str, ...] = ("room",)
    filters: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    auditors_only: bool = False

    def __post_init__(self) -> None:
        if (self.room_row is None) == (self.event_rows is None):
            raise ValueError(f"read model {self.name!r}: give exactly one of room_row and event_rows")
        if not _MODEL_NAME.match(self.name) or self.name in CORE_READ_MODELS:
            raise ValueError(f"read model name {self.name!r}: lower_case, not one of {CORE_READ_MODELS}")


@dataclass(frozen=True, kw_only=True)
class AuditView:
    """One thing an auditor can follow through a room's log (``almanac audit ROOM VIEW ID``).

    ``steps(events, id)`` takes the room's (envelope, event) pairs in version order and returns the
    thing's steps, each a dict of builtins with at least ``version`` (of its event) and ``text`` (one
    sentence); an empty list when the room has no such thing. ``ids(events)`` lists the ids there are.
    """

    name: str
    description: str
    steps: Callable[[list[tuple[Envelope, Any]], str], list[dict[str, Any]]]
    ids: Callable[[list[tuple[Envelope, Any]]], list[str]]


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """A rule-set's own figure for the benchmark: ``work(n)`` against ``baseline(n)``, both doing n items."""

    label: str
    unit: str
    work: Callable[[int], int]
    baseline_label: str
    baseline: Callable[[int], int]
    batch: int = 100


@dataclass(frozen=True, kw_only=True)
class BenchScenario:
    """The game ``almanac bench rules NAME`` plays over and over on the room path, with no Redis.

    ``players[0]`` creates a room with ``options`` and every player joins; then a player (drawn by
    the bench's dice when there are several) asks ``policy`` (the manifest's when None) for a command,
    until the room ends. Server time starts at ``start_ms`` and moves ``step_ms`` a command (0: the
    time is the version). ``comparisons`` add figures of the rule-set's own.
    """

    description: str
    options: dict[str, Any] = field(default_factory=dict)
    players: tuple[str, ...] = ("bench",)
    policy: Policy | None = None
    start_ms: int = 0
    step_ms: int = 0
    seconds: int = 4
    comparisons: tuple[Comparison, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RuleSet:
    """A rule-set as the core knows it. Published through the ``almanac.rulesets`` entry-point group:

        [project.entry-points."almanac.rulesets"]
        my_game = "my_game.manifest:MANIFEST"

    ``demo_moves`` bounds the demo's game. ``shared_challenge``: rooms of one public challenge deal
    alike, so the demo's players share one (their scores compare) and the e2e bench can replay one
    scripted game in every room. ``rulebook`` and ``examples`` are paths
    relative to the distribution's root (the docs and the ``almanac sim`` scenarios).

    ``version``: the rules' version, published as ``name@version`` (``realm@2``). Rooms record the
    version they were created under and are decided and folded by it forever; a rule change is a new
    version beside the old one (docs/architecture.md, "Rule-set versions"). ``fingerprint`` is
    computed here, at import: a hash over the source and tables of the package ``source`` names
    (default: the package of the Decider's class), recorded in ``room.created``.

    ``default``: this is the version a bare name means (``realm`` is realm@1). A choice, never "the
    newest": a rule-set installed in several versions marks exactly one (the registry refuses none or
    two); one installed alone is its own default. The four seed games mark the version that plays
    their seed as written; a variant that departs from a seed is opt-in by its full name.
    """

    decider: Decider
    name: str = ""
    version: int = 1
    default: bool = False
    source: str = ""
    fingerprint: str = field(init=False, default="")
    policy: Policy | None = None
    bench: BenchScenario | None = None
    read_models: tuple[ReadModel, ...] = ()
    audit_views: tuple[AuditView, ...] = ()
    rulebook: str = ""
    examples: tuple[str, ...] = ()
    # How the console draws a version of this game: an ES module shipped beside the rule-set's code,
    # named "package:file.js" (e.g. "almanac.events.board:picture.js"). It exports a default Preact
    # component ({picture, before, html}) and may export pictureOf(at) and AuditStep ({step, html}).
    # None: the console shows the state tree only. Presentation, not rules: not in the fingerprint.
    console_picture: str = ""
    demo_moves: int = 30
    shared_challenge: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.decider.name)
        if self.name != self.decider.name:
            raise ValueError(f"manifest {self.name!r} wraps the Decider named {self.decider.name!r}")
        if "@" in self.name or self.version < 1:
            raise ValueError(f"manifest {self.name!r}: a name without '@' and a version of at least 1")
        object.__setattr__(self, "fingerprint", package_fingerprint(self.source or type(self.decider).__module__))
        views = [view.name for view in self.audit_views]
        if len(set(views)) != len(views):
            raise ValueError(f"manifest {self.name!r} names an audit view twice: {views}")

    @property
    def ref(self) -> str:
        """``name@version``, as people and requests name this exact version."""
        return f"{self.name}@{self.version}"

    def audit_view(self, name: str) -> AuditView | None:
        return next((view for view in self.audit_views if view.name == name), None)
