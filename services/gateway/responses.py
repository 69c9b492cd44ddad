"""What each route answers, declared as msgspec Structs: the typed responses of the OpenAPI document.

``RESPONSES`` maps (method, path) to the success status and its body's type; ``api_docs.build_openapi``
puts their schemas into the document, and tests/gateway/test_console_contract.py checks that real
answers convert into these types. Parts a rule-set decides (its state, view, events) are open objects.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.forensics.signers import Seats
from almanac.events.schema import free
from almanac.events.step import CommandRecord
from almanac.services.forensics.verify import VerifyReport
from almanac.services.notifier import NoticeKind, Scope

Json = dict[str, Any]
STATE_VALUE = "StateValue"
# A value read from a room's state at a path the caller names (explain, diff, bisect, ?since): whatever the
# game's state holds there, so any JSON value; api_docs defines the StateValue schema (recursive, no open object).
StateValue = Annotated[Any, msgspec.Meta(extra_json_schema={"$ref": f"#/components/schemas/{STATE_VALUE}"})]


class _Body(msgspec.Struct, kw_only=True):
    pass


class RoomEvent(_Body):
    """One event of a room. A player gets it redacted for them (``hidden`` when it is not theirs to see: only
    the version then); an auditor gets everything stored, with its place in the hash chain and a summary."""

    version: int
    hidden: bool = False
    type: str | None = None
    player: str | None = None
    server_time_ms: int | None = None
    event: Json | None = None
    command_id: str | None = None
    previous_hash: str | None = None
    hash: str | None = None
    summary: str | None = None


class Checkpoint(_Body):
    """The deployment's signature on the room's commitment head at a version (docs/bundle-format.md): keep it;
    ``verify-bundle --checkpoints`` later proves a bundle's history passes through it."""

    room: str
    version: int
    head: str
    kid: str
    sig: str


class RefusalReceipt(_Body):
    """The deployment's signature on a refusal it answered (docs/bundle-format.md section 8): the room at the version
    the command was refused at (``head``: the commitment head a checkpoint there signs), who sent which command
    (``raw``: its stored record, base64 msgpack) and the ``code``. Keep it: ``verify-bundle --receipts`` later proves
    the refusal true, or false when the rules accept the command there."""

    room: str
    version: int
    head: str
    player: str
    command_id: str
    code: str
    raw: str
    kid: str
    sig: str


class LiveEvent(RoomEvent, kw_only=True):
    """One frame of the live feeds (/rooms/{room}/live, /rooms/{room}/watch): the event as the viewer may see it
    (``RoomEvent``), with the room's signed checkpoint at that version (None when the stream lacks a version it
    names). The one type both documents take the frame from: the OpenAPI components (so the TypeScript client's
    ``LiveMessage``) and the AsyncAPI's ``liveEvent`` payload; tests/gateway/test_live_frames.py holds real frames
    to it. A refusal frame is a ``Failure`` (the ``Error`` schema), sent before the close code 4000 + status."""

    checkpoint: Checkpoint | None = None


class CommandAccepted(_Body, kw_only=True):
    command_id: str
    room: str
    accepted: bool
    first_version: int
    version: int
    duplicate: bool
    events: list[RoomEvent]
    checkpoint: Checkpoint | None = None  # the room at ``version``, signed (docs/bundle-format.md)


class RoomJoined(CommandAccepted, kw_only=True):
    player: str
    token: str
    # The seat's key (a joined seat only): keep it; POST /rooms/{room}/seat gives a fresh token for the seat.
    seat_key: str | None = None


# What a refusal says would have been accepted: a list of values, or a bound the rule names (a count, a version,
# {"min": ...}): events/errors.py's RuleError.allowed as the rule-sets fill it.
Allowed = list[str | int] | int | dict[str, int]


class Failure(_Body):
    """A refusal as the error answers carry it (the ``Error`` schema): a stable code, a sentence, the field at
    fault and the values that would have been accepted, when they apply."""

    code: str
    message: str
    field: str | None = None
    allowed: Allowed | None = None
    # A refusal by the rules that the engine recorded: its signed receipt (a 422 of a command, join or create)
    receipt: RefusalReceipt | None = None


class SeatReclaimed(_Body):
    room: str
    player: str
    token: str
    # Whether this answer took the seat back from its bot (``room.seat_reclaimed`` recorded, at ``version``).
    reclaimed: bool = False
    version: int | None = None
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class RoomCreatedAnswer(RoomJoined, kw_only=True):
    joined: bool
    join_error: Failure | None = None
    # The seats handed to bots (the request's ``bots``): `almanac bots` joins and plays them (docs/bots.md).
    bots: list[str] = []
    # Their move delay (the request's ``bot_delay_ms``; 0: none): each bot waits it after the room's newest event.
    bot_delay_ms: int = 0


class BotSeatAnswer(_Body, kw_only=True):
    """A seat handed to a bot: ``how`` it came to the bot (``empty``: the bot joins it; ``left``: its player left
    it to the bot, the room's ``room.seat_to_bot`` in ``handed``; ``already``: a bot played it already), and
    whether this call added it to the bots' seats (``added``; false when it was there)."""

    room: str
    seat: str
    how: Annotated[str, msgspec.Meta(extra_json_schema={"enum": ["empty", "left", "already"]})]
    added: bool
    handed: CommandAccepted | None = None
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class OutcomePending(_Body):
    code: str
    message: str
    command_id: str
    outcome_url: str


class RoomSummary(_Body):
    room: str
    ruleset: str
    ruleset_version: int  # the rules version the room was created under (it is decided by it forever)
    version: int
    players: list[str]
    seats: list[str]
    created_by: str
    created_at_ms: int
    challenge: str | None
    over: bool
    ended: bool
    end_reason: str
    seed_commitment: str
    picture: str | None  # the URL of the ES module the console draws this room's state with
    audit_views: list[str]  # the audit views the room's rule-set offers (GET /rooms/{room}/audit/{view})
    fork: ForkMark | None  # a sandbox fork: its parent and the parent's version it starts from
    dice_scheme: int  # docs/dice.md: 1 server seed, 2 + players' nonces, 3 + bound to each command, signed seats
    # The room's bot policy (``room.bot_policy``, recorded at creation), or None: without one no player may leave
    # their seat to a bot (POST /rooms/{room}/bots: 422 ``no_bot_policy``).
    bot_policy: BotPolicyMark | None = None
    checkpoint: Checkpoint | None = None  # the room at ``version``, signed (docs/bundle-format.md)


class BotPolicyMark(_Body):
    """A room's bot policy: its players may leave their seats to a bot, and a seat that misses ``after_missed``
    deadlines in a row is handed to one (0: never on missed deadlines)."""

    after_missed: int


class ForkMark(_Body):
    parent: Annotated[str, free("the parent room's id")]
    at: int


class ForkAnswer(_Body):
    """A sandbox fork started: its room id, parent, the parent's version and hash it links to."""

    room: str
    parent: str
    at: int
    parent_hash: str
    ruleset: str
    version: int
    seed_commitment: str
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class EventRow(_Body):
    """An event as forensics shows it (services/forensics/investigate.event_row): where, who, what, and the
    decoded event (an auditor's: nothing hidden)."""

    version: int
    type: str
    player: str
    command_id: str
    server_time_ms: int
    summary: str
    hash: str
    event: Json


class ValueChange(EventRow, kw_only=True):
    """One event that changed a value: where, who, what, and the value before and after."""

    before: StateValue = None
    after: StateValue = None


class PathChange(_Body):
    """One path's value before and after (null where the path has no value on that side)."""

    path: str
    before: StateValue = None
    after: StateValue = None


class RoomAtVersion(_Body):
    room: str
    version: int


class PathDifference(_Body):
    """A path whose value differs between two rooms: its value in each (null where a room lacks the path)."""

    path: str
    a: StateValue = None
    b: StateValue = None


class RoomDiff(_Body):
    """Where two rooms' states differ: each differing path with its value in each room (None: absent there)."""

    a: RoomAtVersion
    b: RoomAtVersion
    note: str
    differences: list[PathDifference]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class ExplainedFork(_Body, kw_only=True):
    """A fork starts from its parent's value: explain the parent for the changes before ``at``."""

    parent: str
    at: int
    value_at_fork: StateValue = None
    note: str


class Explanation(_Body):
    room: str
    path: str
    at: int
    value: StateValue
    changes: list[ValueChange]
    folded: int
    fork: ExplainedFork | None = None
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class RefusedUnder(_Body):
    """Bisect against another rule version: the command the room accepted is refused under it, so."""

    refused: Failure


class BisectAnswer(_Body):
    """``where``: the first version a predicate holds (``found``, ``event``, ``values``); ``against``: the first
    version another rule version decides differently (``diverged``, ``recorded``, ``other``)."""

    room: str
    latest: int
    version: int | None
    note: str
    where: str | None = None
    method: str | None = None
    found: bool | None = None
    probes: int | None = None
    event: EventRow | None = None
    values: list[PathChange] | None = None
    ruleset: str | None = None
    against: str | None = None
    diverged: bool | None = None
    commands_redecided: int | None = None
    # against: the recorded events of the first command decided differently (a list when the other version
    # refuses it) and what the other version decides instead (its event, or its refusal)
    recorded: list[EventRow] | EventRow | None = None
    other: Annotated[Any, msgspec.Meta(extra_json_schema={"anyOf": [
        {"$ref": "#/components/schemas/EventRow"}, {"$ref": "#/components/schemas/RefusedUnder"},
        {"type": "null"}]})] = None  # EventRow | RefusedUnder | None (msgspec unions untagged Structs not)
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class RoomListing(_Body, kw_only=True):
    """A room as the listings show it (projections/read_model_rows.room_listing): the summary without scores."""

    room: str
    ruleset: str
    ruleset_version: int = 1
    version: int
    players: list[str]
    created_by: str
    created_at_ms: int
    challenge: str | None = None
    over: bool
    ended: bool
    updated_at_ms: int
    fork: ForkMark | None = None


class RoomList(_Body):
    rooms: list[RoomListing]
    source: str
    next_cursor: str | None  # the next page's cursor (?cursor=); None: this was the last page


class RulesetEntry(_Body):
    ruleset: str
    version: int  # the default version: what a new room of the bare name gets (never simply the newest)
    versions: list[str]  # every installed version, as name@version (the others are opt-in by that name)
    fingerprint: str  # the default version's code fingerprint
    # which of that version's listed code revisions runs here (its fingerprints.toml); None: not on its list
    code_revision: int | None
    commands: list[str]


class RulesetList(_Body):
    rulesets: list[RulesetEntry]


class RoomView(RoomSummary, kw_only=True):
    player: str
    view: Json


class RoomScores(_Body):
    room: str
    ruleset: str
    version: int
    scores: dict[str, int]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class RoomResources(RoomScores, kw_only=True):
    resources: Json


class EventPage(_Body):
    room: str
    latest_version: int
    next_version: int
    events: list[RoomEvent]
    checkpoint: Checkpoint | None = None  # the room at the page's last version, signed


class StateAt(_Body):
    room: str
    version: int
    latest_version: int
    state_hash: str
    state: Json
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class RefusedCommand(CommandRecord, kw_only=True):
    """A command the rules refused: its stored record (``body`` as the client sent it) and the rule error it got
    (None when its outcome is no longer stored)."""

    error: Failure | None


class Rejections(_Body):
    room: str
    rejections: list[RefusedCommand]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class AuditIds(_Body):
    room: str
    view: str
    ids: list[str]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class AuditStory(_Body):
    room: str
    view: str
    item: str
    story: list[Json]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class LeaderboardEntry(_Body):
    rank: int
    player: str
    score: int
    room: str


class Leaderboard(_Body):
    ruleset: str
    leaderboard: list[LeaderboardEntry]


class ReadModelRows(_Body):
    model: str
    room: str | None
    where: dict[str, str]
    rows: list[Json]


class RedisHealth(_Body, kw_only=True):
    ok: bool
    ping_ms: float | None = None  # when it answered
    error: str | None = None  # the error's class name when it did not


class EngineBeat(_Body, kw_only=True):
    """An engine's heartbeat (services/engine/shard_engine.py) as /health reads it: its age and whether it is ready."""

    name: str
    pid: int
    shards_owned: list[int]
    shards_held: list[int]
    started_at_ms: int
    time_ms: int
    consumed_ms: int  # the end of its last completed consume round (epoch ms)
    redis_error_ms: int  # its last Redis failure (epoch ms; 0: none)
    age_s: float  # since its heartbeat was written, by Redis' clock (its life less what is left of it)
    ready: bool


class MissingProcess(_Body):
    """A registered engine or projector whose heartbeat expired, not yet gone long enough to be forgotten
    (storage.process_registry)."""

    name: str
    missing_ms: int  # since a gateway first found its heartbeat expired (by Redis' clock)


class EngineHealth(_Body):
    """The live engines and whether together they hold every shard and have worked since the last Redis outage; the
    registered ones missing their heartbeat."""

    ok: bool
    ready: bool
    reasons: list[str]
    engines: list[EngineBeat]
    shards_held: int
    shard_count: int
    store_outage_ms: int
    missing: list[MissingProcess]  # died (a clean stop leaves the set): listed only, their shards count above


class ProjectorBeat(_Body, kw_only=True):
    """A projector's heartbeat (projections/projector.py publish_status) with its running figures."""

    name: str
    pid: int
    host: str
    shards: list[int]
    started_at_ms: int
    at_ms: int
    stats: dict[str, float | str]  # events_applied, batches, conflicts, events_per_s, last_batch_at_ms, ...


class ShardLag(_Body):
    shard: int
    checkpoint: str  # the last feed entry applied
    head: str  # the feed's last entry
    caught_up: bool
    lag_ms: int


class ProjectorHealth(_Body):
    """The read side (projections/read_model_queries.py status): live and missing projectors, each shard's lag."""

    ok: bool  # live projectors whose heartbeats name every shard (a missing one changes nothing by itself)
    alive: bool
    projectors: list[ProjectorBeat]
    missing: list[MissingProcess]
    max_lag_ms: int
    caught_up: bool
    shards: list[ShardLag]


class OutcomeSubscription(_Body):
    subscribed: bool
    node: str | None


class Health(_Body):
    status: str  # ok | degraded (200); not_ready | down (503)
    ready: bool  # commands can be taken now
    reasons: list[str]  # why not ready (empty when ready)
    redis: RedisHealth
    engine: EngineHealth | None = None
    projector: ProjectorHealth | None = None
    outcomes: OutcomeSubscription | None = None  # the outcome subscription; degraded while it is down


class RulesetSchema(_Body):
    ruleset: str
    commands: list[Json]
    options: Json
    defs: Json = msgspec.field(name="$defs")


class DeadLetterCount(_Body):
    total: int
    by_shard: dict[str, int]  # shard -> entries, shards with any only


class SystemStatus(_Body, kw_only=True):
    time_ms: int
    engine: EngineHealth
    projector: ProjectorHealth
    commands_total: int  # accepted by the engines
    commands_decided: int | None = None  # accepted and refused: auditors only (GET /status)
    dead_letters: DeadLetterCount


class ActiveRoom(RoomListing, kw_only=True):
    """A listed room with its latest stored version, its last event's time and how far the read models lag."""

    latest_version: int
    last_activity_ms: int | None
    projector_lag_versions: int


class RoomActivity(_Body):
    rooms: list[ActiveRoom]
    next_cursor: str | None  # the next page's cursor (?cursor=); None: this was the last page


class RoomAt(_Body):
    """A player gets ``player`` and ``view``; an auditor ``state`` and every seat's ``views``."""

    room: str
    version: int
    latest_version: int
    summary: RoomSummary
    scores: dict[str, int]
    player: str | None = None
    view: Json | None = None
    state: Json | None = None
    views: dict[str, Json] | None = None
    # With ?since=N: what changed from version N in the same tree, one row per differing leaf
    # ({path, before, after}, null where a side lacks the path; events.forensics.tree_diff.change_rows)
    since: int | None = None
    changes: list[PathChange] | None = None
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class Series(_Body):
    """Scores per player at every version (public); auditors also get numeric resources."""

    room: str
    versions: list[int]
    scores: dict[str, list[int | None]]
    resources: dict[str, list[int | None]]
    checkpoint: Checkpoint | None = None  # the room at its head when answered, signed (docs/bundle-format.md)


class AsyncApiDocument(_Body):
    asyncapi: str
    info: Json
    servers: Json
    channels: Json
    operations: Json = {}
    components: Json = {}


class BundleAudience(_Body):
    """Who may read a bundle (events/forensics/bundle_check.audience): its first line."""

    who: str  # "anyone" | "auditors"
    hidden_values: bool
    note: str


class BundleRuleset(_Body):
    """The rules the room was created under, and the fingerprint of the exporter's installed copy ("" if none)."""

    name: str
    version: int
    ref: str  # name@version
    fingerprint: str
    fingerprint_of_exporter: str


class AuditViewSubject(_Body, tag_field="kind", tag="audit_view"):
    """A bundle of one audit view's item: its story (the rule-set's audit rows) as of the export."""

    view: str
    item: str | None
    story: list[Json]


class VersionsSubject(_Body, tag_field="kind", tag="versions"):
    """A bundle of a version range."""

    from_: int = msgspec.field(name="from")
    to: int


class CopiedAs(_Body):
    """The copy (import --as) the bundle was exported from: the bundle is its origin's history."""

    room: str
    note: str


class BundleHead(_Body):
    version: int
    hash: str


class BundleSeed(_Body, kw_only=True):
    """What the chain says of the room's dice (events/forensics/bundle_check.seed_entry)."""

    status: str  # "challenge" | "revealed" | "not_revealed"
    commitment: str
    challenge: str | None = None  # a challenge room's public seed
    revealed: str | None  # the seed (hex) once the room has ended
    note: str


class _StoredEvent(_Body, kw_only=True):
    """A stored envelope's fields as they are (events/readable.ENTRY_FIELDS)."""

    version: int
    ruleset: str
    type: str
    command_id: str
    player: str
    server_time_ms: int
    previous_hash: str
    hash: str


class BundleEventEntry(_StoredEvent, kw_only=True):
    """A readable event of the slice (events/readable.event_entry without its payload: the chain has its bytes)."""

    time: str  # server_time_ms as ISO-8601 UTC
    event: Json | None = None  # decoded (the rule-set's event; api_docs types it); absent when it cannot be
    summary: str | None = None
    event_error: str | None = None  # why the event could not be decoded here
    raw: str | None = None  # the stored bytes (base64) when re-encoding the fields would not give them back


class BundleCommand(_Body, kw_only=True):
    """A command of the slice with the versions it wrote (events/readable.record_entry)."""

    first_version: int
    last_version: int
    command: CommandRecord  # the stored record as JSON: its ``body`` is the client's command as sent
    time: str
    raw: str | None = None


class RefusalReason(_Body, kw_only=True):
    """The rule error a refused command got ({} when its outcome is no longer stored)."""

    code: str | None = None
    message: str | None = None
    field: str | None = None
    allowed: Allowed | None = None


class BundleRefusal(_Body, kw_only=True):
    """A refused command in the slice's range: its record, its stored bytes (base64) and the error it got."""

    command: CommandRecord
    time: str
    raw: str
    error: RefusalReason


class BundleChain(_Body):
    """Every stored envelope (base64 msgpack, versions 1..head) and every command record with the first version it
    wrote ([first_version, base64 msgpack])."""

    about: str
    envelopes: list[str]
    commands: list[tuple[int, str]]


class BundleCommitments(_Body, kw_only=True):
    """docs/bundle-format.md sections 4 and 6.4: the scheme, the room key (hex) and, for scheme v2, every version's
    views but the whole event's (label -> base64)."""

    scheme: str
    room_key: str | None
    views: list[dict[str, str]] | None = None


class DisputeBundle(_Body, kw_only=True):
    """A dispute bundle (docs/forensics.md, "Dispute bundles"): verify it with `almanac verify-bundle`."""

    audience: BundleAudience
    format: str
    format_version: int
    room: str
    exported_at_ms: int
    exported_at: str
    ruleset: BundleRuleset
    subject: AuditViewSubject | VersionsSubject
    copied_as: CopiedAs | None = None  # the bundle of a copy (import --as) is its origin's history
    head: BundleHead
    seed: BundleSeed
    events: list[BundleEventEntry]
    commands: list[BundleCommand]
    refusals: list[BundleRefusal]
    chain: BundleChain
    # docs/bundle-format.md section 4: the room key opening every commitment, the server's signed head, the keys
    commitments: BundleCommitments | None = None
    checkpoint: Checkpoint | None = None
    keys: KeySet | None = None


class KeyEntry(_Body):
    kid: str
    alg: str
    public_key: str  # raw Ed25519, hex
    status: str  # "active" signs new checkpoints; "retired" still verifies old ones


class KeySet(_Body):
    """The deployment's checkpoint keys (docs/bundle-format.md section 3)."""

    format: str
    format_version: int
    active: str
    keys: list[KeyEntry]


class EnvelopeView(_StoredEvent, kw_only=True):
    """A stored event as a divergence shows it (services/forensics/verify.envelope_view): the envelope's fields with
    its event decoded (``event``), or, when it cannot be, the payload (base64) and why (``event_error``)."""

    room: str
    event: Json | None = None  # the rule-set's event (api_docs types it)
    payload: str | None = None
    event_error: str | None = None


# What a verification's divergence records on each side (services/forensics/verify.py), by its check: a hash, a
# seed or nonce commitment, "accepted" or "not hex" (strings); a time (an integer); a rule error (a Failure);
# the events of a command (an EnvelopeView, a list of them); or nothing (null).
DIVERGENCE_SIDE = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"},
                             {"$ref": "#/components/schemas/Failure"}, {"$ref": "#/components/schemas/EnvelopeView"},
                             {"type": "array", "items": {"$ref": "#/components/schemas/EnvelopeView"}}]}


class Verification(VerifyReport, kw_only=True):
    """The room verified (services/forensics/verify.py), with the checkpoint of its head when answered."""

    checkpoint: Checkpoint | None = None


class PlayerAudience(_Body):
    """Who may read a player bundle: that player (nothing hidden from them is in it)."""

    who: str  # "player"
    player: str
    hidden_values: bool  # false
    note: str


class ViewOpening(_Body):
    """One audience's view of an event, opened: its salt (hex) and its bytes (base64 canonical msgpack)."""

    salt: str
    view: str


class PlayerBundleEvent(_Body):
    """One version: the views opened to the player (label "" the public part, the player's id their own) and every
    other audience's salted leaf hash (label "*" the whole event, other seats' ids)."""

    version: int
    opened: dict[str, ViewOpening]
    leaves: dict[str, str]


class PlayerBundle(_Body):
    """A player-safe bundle (docs/bundle-format.md section 6): every event's public part and the player's own view
    opened (salt and view bytes), every other view as a salted leaf hash; `almanac verify-player-bundle` checks it."""

    audience: PlayerAudience
    format: str  # almanac-player-bundle
    format_version: int
    room: str
    player: str
    exported_at_ms: int
    scheme: str  # almanac-commit-v2
    limits: str  # what such a bundle proves and what it cannot
    events: list[PlayerBundleEvent]  # versions 1..head
    checkpoint: Checkpoint
    keys: KeySet


class CheckpointFile(_Body):
    """Signed checkpoints with the key set that checks them (docs/bundle-format.md section 2.1)."""

    format: str
    format_version: int
    keys: KeySet
    checkpoints: list[Checkpoint]


class BundleStep(_Body, kw_only=True):
    """One check of the verifier (events/forensics/bundle_check.Step): passed, failed or skipped, what it proved; a
    failure's two sides, named by ``sides`` (the first the authority, the second what was checked against it)."""

    name: str
    status: str  # "passed" | "failed" | "skipped"
    detail: str
    version: int | None = None
    recorded: Any = None
    recomputed: Any = None
    sides: tuple[str, str]


class BundleVerdict(_Body):
    """The verifier's verdict: every step (passed, failed or skipped) and what it proved, and as text. ``ok`` only
    when ``status`` is VERIFIED; INCOMPLETE names in ``unchecked`` the steps that did not run."""

    ok: bool
    status: str
    room: str
    unchecked: list[str]
    steps: list[BundleStep]
    text: str
    # The room's dice scheme and which seats signed their commands and joins, with the caveats (as the text's "seats"
    # line and `almanac verify-bundle` print them); null when a step failed or the chain could not be read.
    seats: Seats | None = None


class WebhookSubscription(_Body):
    """A subscription: where notices go and which (the secret only in the answer that created it)."""

    id: str
    url: str
    scope: Scope
    room: str | None = None
    player: str | None = None
    kinds: list[NoticeKind] = []
    created_ms: int = 0
    secret: str | None = None


class WebhookSubscriptions(_Body):
    subscriptions: list[WebhookSubscription]


class WebhookDeleted(_Body):
    deleted: str


class NoticeDeadline(_Body):
    """A deadline_soon notice's deadline: its key and due time only (never the command the clock will send)."""

    key: str
    due_ms: int


class WebhookNotice(_Body, kw_only=True):
    """A notice as delivered (services/notifier.py): the event as the subscription's viewer may see it (a room event
    as GET /rooms/{room}/events sends it), or, for deadline_soon, the deadline."""

    delivery_id: str
    kind: NoticeKind
    room: str
    ruleset: str | None
    version: int | None  # None: a deadline_soon notice
    player: str | None  # whom it concerns; None: everyone seated
    subscription: str
    scope: Scope
    viewer: str | None  # whose view the event is shown as (a player subscription's player); None: nobody seated's
    event: RoomEvent | None = None
    deadline: NoticeDeadline | None = None


class DeadDelivery(_Body, kw_only=True):
    """A delivery given up after its attempts (never its subscription's secret)."""

    id: str
    subscription: str
    url: str
    payload: WebhookNotice  # the notice as it would have been delivered (docs/webhooks)
    attempts: int
    appended_ms: int
    enqueued_ms: int
    last_error: str
    dead_ms: int


class WebhookDeadLetters(_Body):
    dead: list[DeadDelivery]


class WebhookLatency(_Body):
    samples: int
    p50: int | None
    p99: int | None


class WebhookStats(_Body):
    enqueued: int
    delivered: int
    failed_attempts: int
    dead: int
    missed_feed_gaps: int  # a notifier found its shards' feeds trimmed past its cursor (ALMANAC_NOTIFIER_HOLD_S)
    pending: int
    dead_letters: int
    latency_ms: WebhookLatency


# (method, path) -> (status, body type). Every route of the API has one (a test checks).
RESPONSES: dict[tuple[str, str], tuple[int, type]] = {
    ("post", "/rooms"): (201, RoomCreatedAnswer),
    ("get", "/rooms"): (200, RoomList),
    ("get", "/rulesets"): (200, RulesetList),
    ("get", "/rooms/{room}"): (200, RoomSummary),
    ("post", "/rooms/{room}/join"): (200, RoomJoined),
    ("post", "/rooms/{room}/seat"): (200, SeatReclaimed),
    ("post", "/rooms/{room}/end"): (200, CommandAccepted),
    ("post", "/rooms/{room}/bots"): (200, BotSeatAnswer),
    ("post", "/rooms/{room}/commands"): (200, CommandAccepted),
    ("get", "/rooms/{room}/commands/{command_id}"): (200, CommandAccepted),
    ("get", "/rooms/{room}/view"): (200, RoomView),
    ("get", "/rooms/{room}/scores"): (200, RoomScores),
    ("get", "/rooms/{room}/resources"): (200, RoomResources),
    ("get", "/rooms/{room}/events"): (200, EventPage),
    ("get", "/rooms/{room}/state"): (200, StateAt),
    ("get", "/rooms/{room}/rejections"): (200, Rejections),
    ("get", "/rooms/{room}/audit/{view}"): (200, AuditIds),
    ("get", "/rooms/{room}/audit/{view}/{item}"): (200, AuditStory),
    ("get", "/rooms/{room}/verification"): (200, Verification),
    ("get", "/leaderboards/{ruleset}"): (200, Leaderboard),
    ("get", "/read-models/{model}"): (200, ReadModelRows),
    ("get", "/health"): (200, Health),
    ("get", "/asyncapi"): (200, AsyncApiDocument),
    ("get", "/rulesets/{name}/schema"): (200, RulesetSchema),
    ("get", "/status"): (200, SystemStatus),
    ("get", "/status/rooms"): (200, RoomActivity),
    ("get", "/rooms/{room}/at/{version}"): (200, RoomAt),
    ("get", "/rooms/{room}/series"): (200, Series),
    ("post", "/rooms/{room}/fork"): (201, ForkAnswer),
    ("get", "/rooms/{room}/explain"): (200, Explanation),
    ("get", "/rooms/{room}/diff"): (200, RoomDiff),
    ("get", "/rooms/{room}/bisect"): (200, BisectAnswer),
    ("get", "/rooms/{room}/dispute"): (200, DisputeBundle),
    ("post", "/bundles/verify"): (200, BundleVerdict),
    ("get", "/.well-known/almanac-keys.json"): (200, KeySet),
    ("get", "/rooms/{room}/checkpoints"): (200, CheckpointFile),
    ("get", "/rooms/{room}/player-bundle"): (200, PlayerBundle),
    ("post", "/webhooks"): (201, WebhookSubscription),
    ("get", "/webhooks"): (200, WebhookSubscriptions),
    ("delete", "/webhooks/{subscription}"): (200, WebhookDeleted),
    ("get", "/webhooks/dead"): (200, WebhookDeadLetters),
    ("get", "/webhooks/stats"): (200, WebhookStats),
}
# Types an answer names only through a hand-written schema reference (BisectAnswer.other, DIVERGENCE_SIDE), and the
# live feeds' frame (a WebSocket's, no route's answer): documented too.
ALSO_DOCUMENTED = (EventRow, RefusedUnder, EnvelopeView, Failure, LiveEvent, RefusalReceipt)
# Commands the engine has not answered within the wait: 202 with where to ask later.
PENDING = OutcomePending
PENDING_ROUTES = (("post", "/rooms"), ("post", "/rooms/{room}/join"), ("post", "/rooms/{room}/end"),
                  ("post", "/rooms/{room}/commands"), ("get", "/rooms/{room}/commands/{command_id}"))
TEXT_ROUTES = {("get", "/metrics"): "Prometheus text exposition format"}
