"""What the kernel knows of a rule-set: its manifest (RuleSet) and the read models, audit views and bench game it declares.

Kept apart from ``manifest.py`` (the public API a game imports, which also re-exports the room's types)
so that the registry can name ``RuleSet`` without importing the room module that imports the registry.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from almanac.events.decider import Decider
from almanac.events.dice import Dice
from almanac.events.envelope import Envelope
from almanac.events.fingerprint import (
    PRESENTATION_FUNCTIONS,
    Revision,
    hashes_module,
    package_fingerprint,
    revision_note,
    revisions_beside,
)

if TYPE_CHECKING:  # a read model's row function takes the room's state; only its type is named here
    from almanac.events.room import RoomState

# A bot: what ``player`` does next in ``state`` (None: nothing to do now). ``dice`` is the bot's own
# randomness (never the room's), ``now_ms`` the server time the command will carry.
Policy = Callable[[Any, str, Dice, int], Any]



@dataclass(frozen=True, kw_only=True)
class Deadline:
    """A moment the rules name in a room's state, after which a seat may send a timeout command.

    The clock (services/clock.py) sends ``command`` (a command body, as a client would) as ``player`` once
    ``due_ms`` of server time has passed, under a command id derived from the room, ``key`` and ``player``,
    so that however many clocks try, the room decides it once. ``key`` names the deadline within its room
    ("season:4"); the rules still decide the command like any other (a deadline read from stale state is
    refused by them).
    """

    key: str
    due_ms: int
    player: str
    command: dict[str, Any]
    # The seats whose move the deadline waits for (realm: the cities that have not ended their turn): the players
    # a ``deadline_soon`` webhook warns (services/notifier.py). None: every seat of the room.
    concerns: tuple[str, ...] | None = None


# A rule-set's deadlines: (game state, seated players) -> the deadlines pending in that state (pure; the
# clock sends the earliest). Rules: the room decides with them which seats missed a deadline and which are
# handed to a bot (room.deadline_missed, room.seat_to_bot), so they are defined where the fingerprint hashes.
Deadlines = Callable[[Any, tuple[str, ...]], tuple[Deadline, ...]]

# The manifest's fields the room decides with besides the Decider (events/room.py): ``deadlines`` (which seats
# missed one, which go to a bot) and ``seat_bot`` (a create asking for seat bots is refused without one). Each
# must be defined in a module the version's fingerprint hashes, never in the manifest module or a bot's, so
# editing it changes the fingerprint (``RuleSet`` refuses it otherwise).
DECIDED_WITH = ("deadlines", "seat_bot")

# Read models the core itself keeps under these names; a rule-set's read models take other names.
CORE_READ_MODELS = ("rooms", "leaderboards")
_MODEL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True, kw_only=True)
class ReadModel:
    """A read model a rule-set adds: rows the projector keeps for its rooms, rebuildable from the log.

    Exactly one of ``room_row`` (one row per room, a function of the room's state after each batch;
    None = no row) and ``event_rows`` (rows per event, a ledger kept in log order; it sees every event
    of the room, the room's own ``room.*`` events included). Readers filter by
    ``room`` and by the row fields in ``filters`` (fields of ``row_type`` when it is declared), get rows sorted by ``order_by``, and a CLI table shows
    ``columns``. ``auditors_only`` when the rows carry what players may not see. ``row_type``: the msgspec
    Struct (or a tuple of tagged Structs, one of which) a row is, as builtins, for the API documents' read-model
    schema; None: the rows are documented as open objects. Presentation, not rules.
    """

    name: str
    description: str
    room_row: Callable[[RoomState], dict[str, Any] | None] | None = None
    event_rows: Callable[[Envelope, Any], list[dict[str, Any]]] | None = None
    order_by: tuple[str, ...] = ("room",)
    filters: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    auditors_only: bool = False
    row_type: type | tuple[type, ...] | None = None

    def __post_init__(self) -> None:
        if (self.room_row is None) == (self.event_rows is None):
            raise ValueError(f"read model {self.name!r}: give exactly one of room_row and event_rows")
        if not _MODEL_NAME.match(self.name) or self.name in CORE_READ_MODELS:
            raise ValueError(f"read model name {self.name!r}: lower_case, not one of {CORE_READ_MODELS}")
        types = self.row_type if isinstance(self.row_type, tuple) else (self.row_type,)
        for row in types:  # a filter is a field of every row (a request filtering on another is refused 422)
            missing = [f for f in self.filters if row is not None and f not in getattr(row, "__struct_fields__", ())]
            if missing:
                raise ValueError(f"read model {self.name!r}: filters {missing} are not fields of its row type "
                                 f"{getattr(row, '__name__', row)!r}")


@dataclass(frozen=True, kw_only=True)
class AuditView:
    """One thing an auditor can follow through a room's log (``almanac audit ROOM VIEW ID``).

    ``steps(events, id)`` takes the room's (envelope, event) pairs in version order and returns the
    thing's steps, each a dict of builtins with at least ``version`` (of its event) and ``text`` (one
    sentence); an empty list when the room has no such thing. ``ids(events)`` lists the ids there are.
    ``step_types``: the msgspec Structs a step is one of (as builtins), for the API documents' audit story
    schema; none declared: the story is documented as open objects. Presentation, not rules.
    """

    name: str
    description: str
    steps: Callable[[list[tuple[Envelope, Any]], str], list[dict[str, Any]]]
    ids: Callable[[list[tuple[Envelope, Any]]], list[str]]
    step_types: tuple[type, ...] = ()


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


def _refuse_a_decider_made_outside(name: str, decider: Any, hashed: str) -> None:
    """The Decider is the rules: its class is defined, and an instance holding state of its own (what its class's
    methods read: ``self.secrets`` over the class's) is made, in a module the fingerprint hashes; else a manifest
    module (outside the fingerprint) could subclass it or build it otherwise and decide unseen."""
    where = type(decider).__module__
    if not hashes_module(hashed, where):
        raise ValueError(f"manifest {name!r}: its Decider's class {type(decider).__name__} is defined in {where}, "
                         f"which its fingerprint (over {hashed}) does not hash; define it in a module of its rules")
    if not getattr(decider, "__dict__", None):
        return  # nothing of its own: it decides as its class (hashed) says, however it was made
    holders = [module for module_name, module in list(sys.modules.items())
               if module is not None and hashes_module(hashed, module_name)
               and any(value is decider for value in vars(module).values())]
    if not holders:
        raise ValueError(f"manifest {name!r}: its Decider holds state of its own ({sorted(vars(decider))}) and is "
                         f"not made in a module its fingerprint (over {hashed}) hashes; make it there "
                         "(``DECIDER = ...`` beside its class)")


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
    computed here, at import: a hash over the rules' code and tables in the package ``source`` names
    (default: the package of the Decider's class; events/fingerprint.py says which files are rules),
    recorded in ``room.created``. ``revisions``: every fingerprint this version's code has had, read
    from ``fingerprints.toml`` beside the Decider (none for a game that keeps no list), so a room's
    recorded fingerprint names the code it was played under (``played_under``).

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
    revisions: tuple[Revision, ...] = field(init=False, default=())
    policy: Policy | None = None
    bench: BenchScenario | None = None
    read_models: tuple[ReadModel, ...] = ()
    audit_views: tuple[AuditView, ...] = ()
    rulebook: str = ""
    examples: tuple[str, ...] = ()
    # How the console draws a version of this game: an ES module shipped beside the rule-set's code,
    # named "package:file.js" (e.g. "almanac.games.board:picture.js"). It exports a default Preact
    # component ({picture, before, html}) and may export pictureOf(at) and AuditStep ({step, html}).
    # None: the console shows the state tree only. Presentation, not rules: not in the fingerprint (neither
    # is anything else the manifest module says: descriptions, read models; what the room decides with,
    # DECIDED_WITH, the manifest only names from a hashed module).
    console_picture: str = ""
    deadlines: Deadlines | None = None
    demo_moves: int = 30
    shared_challenge: bool = False
    # The values a command field may take where the rules know them, as "kind.field" -> values (for a map
    # field such as a load: its keys). The rules check them when they decide; this publishes them, so the
    # OpenAPI and AsyncAPI documents list them as enums and typed clients offer them (services/gateway/
    # game_schemas.py). Presentation like the rest of the manifest module: not in the fingerprint.
    allowed_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # What an event tells the players, for webhooks (services/notifier.py): event -> (kind, player) pairs,
    # player None for everyone seated (realm: a new season is everyone's turn; an offer is its host's).
    # The room's own events (room.ended) are noticed by the notifier for every rule-set.
    notices: Callable[[Any], Sequence[tuple[str, str | None]]] | None = None
    # The type of what ``view(state, player)`` returns (a msgspec Struct), for the API documents' view schema;
    # None: the view is documented as the game's own object. tests/gateway/test_typed_schemas.py holds real views
    # to it.
    view_type: type | None = None
    # A bot for a seat (services/bots.py): what ``player`` does next given only the seat's view (the dict
    # ``view(state, player)`` returns, never the state), so it cannot read what the seat may not see. Same
    # signature as ``policy`` with the view in place of the state. Whether there is one is a rule (a create
    # asking for seat bots is refused without), so it is defined in a hashed module (DECIDED_WITH); how it plays
    # is a player's business (the built-in games' ``bot.py``, outside the fingerprint).
    seat_bot: Policy | None = None
    # The type of what the Decider's ``resources(state)`` returns (a msgspec Struct, as builtins), for the API
    # documents' resources schema; None: documented as the game's own object. tests/gateway/test_typed_schemas.py
    # holds real resources to it.
    resources_type: type | None = None
    # How a seat's view reads in the API's answers (``shown_view``): the Decider's view with what the API shows
    # otherwise, such as realm's "" for nothing (no owner, no terms named) as null. Presentation, like the rest of
    # the manifest module: outside the fingerprint, and the rules' own view (the golden logs digest it, the seat
    # bots read it) stays as it is. None: the view as the Decider gives it. ``view_type`` describes what it gives.
    present_view: Callable[[Any], Any] | None = None
    # Whether a room of this recorded setup (``room.created``'s) ranks on the rule-set's leaderboard: False for a
    # setup that departs from the standard game (a stock, a position or a length a creator chose), whose scores
    # do not compare with the others'; those rooms are played and shown as ever, never ranked. None: every room
    # ranks. Presentation like the rest of the manifest module: outside the fingerprint.
    ranks: Callable[[Any], bool] | None = None

    def shown_view(self, game: Any, player: str) -> Any:
        """What ``player`` sees of ``game`` in the API's answers: the Decider's view, as ``present_view`` shows it."""
        view = self.decider.view(game, player)
        return view if self.present_view is None else self.present_view(view)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.decider.name)
        if self.name != self.decider.name:
            raise ValueError(f"manifest {self.name!r} wraps the Decider named {self.decider.name!r}")
        if "@" in self.name or self.version < 1:
            raise ValueError(f"manifest {self.name!r}: a name without '@' and a version of at least 1")
        object.__setattr__(self, "fingerprint", package_fingerprint(self.source or type(self.decider).__module__))
        object.__setattr__(self, "revisions", revisions_beside(type(self.decider).__module__))
        hashed = self.source or type(self.decider).__module__
        _refuse_a_decider_made_outside(self.name, self.decider, hashed)
        for name in DECIDED_WITH:
            value = getattr(self, name)
            where = getattr(value, "__module__", None) or repr(value)
            if value is not None and not hashes_module(hashed, where):
                raise ValueError(f"manifest {self.name!r}: the room decides with its {name}, defined in {where}, "
                                 f"which its fingerprint (over {hashed}) does not hash; define it in a module of "
                                 "its rules (not manifest.py, policy.py or bot.py)")
            # a hashed module's presentation functions are cut out of the fingerprint (events/fingerprint.py)
            if value is not None and getattr(value, "__name__", "") in PRESENTATION_FUNCTIONS:
                raise ValueError(f"manifest {self.name!r}: the room decides with its {name}, {where}."
                                 f"{value.__name__}, a name the fingerprint cuts out as presentation; name it otherwise")
        views = [view.name for view in self.audit_views]
        if len(set(views)) != len(views):
            raise ValueError(f"manifest {self.name!r} names an audit view twice: {views}")

    @property
    def ref(self) -> str:
        """``name@version``, as people and requests name this exact version."""
        return f"{self.name}@{self.version}"

    def audit_view(self, name: str) -> AuditView | None:
        return next((view for view in self.audit_views if view.name == name), None)

    def revision(self, fingerprint: str) -> Revision | None:
        """The listed revision of this version's code that has ``fingerprint`` (None: not on the list)."""
        return next((revision for revision in self.revisions if revision.fingerprint == fingerprint), None)

    def played_under(self, fingerprint: str) -> str:
        """One sentence naming the code a room that recorded ``fingerprint`` was played under."""
        return revision_note(self.ref, fingerprint, self.revisions)
