"""The room: lifecycle commands and events (create, join, end) wrapped around a rule-set's game."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import msgspec

from almanac.events import registry
from almanac.events.decider import Context, Decider
from almanac.events.dice import COMMAND_BOUND, NONCE_SCHEMES, SERVER_SEED_ONLY, nonce_commitment
from almanac.events.errors import RuleError
from almanac.events.ruleset import RuleSet
from almanac.events.schema import PlayerName, Reason, RoomId, RulesetRef, Text, boundary_error, free, one_of

# A 32-byte value as 64 lowercase hex digits: a player's nonce or its sha256 commitment.
Hex32 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}(?!\n)$", min_length=64, max_length=64,
                                    description="32 bytes as 64 lowercase hex digits")]

# An Ed25519 public key (32 bytes, lowercase hex) a player registers at join to sign their commands.
PublicKeyHex = Hex32

# The words of the room's own events as the API documents show them (events.schema: schema-only, decoding unchanged).
_Hex = Annotated[str, free("hex digits (a hash, a commitment, a key or a revealed secret)")]
_HexOrNone = Annotated[str, free('hex digits, "" for none')]
_RulesetName = Annotated[str, free("a rule-set's name")]
_Fingerprint = Annotated[str, free('"sha256:" and hex digits, "" for unknown (a room older than fingerprints)')]
# The public seed a room was created from (CreateRoom.challenge): words a person chose, no list bounds them.
_Challenge = Annotated[str, free("the public seed the room was created from")]
_DeadlineKey = Annotated[str, free("the rules' name for the deadline")]
# Why a seat went to a bot (SeatToBot.reason).
SEAT_TO_BOT_REASONS: tuple[str, ...] = ("missed", "left")

SetupT = TypeVar("SetupT")

# How many deadlines in a row a seat may miss before a bot takes it: 1 .. 100 (more is "never", which is absent).
MissedDeadlines = Annotated[int, msgspec.Meta(ge=1, le=100, description="deadlines a seat may miss in a row "
                                                                       "before a bot plays it, 1 .. 100")]


# --- commands ---------------------------------------------------------------------------------


class CreateRoom(msgspec.Struct, frozen=True, kw_only=True, tag="create_room", tag_field="kind",
                 forbid_unknown_fields=True):
    """Create a room of a rule-set. ``options`` are the rule-set's creation options.

    ``ruleset`` names the rules: ``realm`` is its default version (the seed as written), ``realm@2`` that version.

    ``options`` stays a plain object in the command (it is stored as sent); the codec checks it
    against the rule-set's options type before anything acts on it.
    """

    ruleset: RulesetRef
    options: Annotated[dict[str, Any], msgspec.Meta(max_length=64)] = {}
    # A public seed: every room created from the same challenge deals the same cards and dice.
    challenge: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    # The dice construction (events.dice, docs/dice.md). A stored record without it meant 1 (it was
    # the only one); the engine writes 2 into a new secret-seed room's record that names none.
    dice_scheme: Annotated[int, msgspec.Meta(ge=1, le=3, description="1: server seed; 2: + player nonces; "
                                                     "3: + bound to each command, signed seats")] = 1
    # A seat that misses this many of the rules' deadlines in a row is handed to a bot (``room.seat_to_bot``).
    # Absent: never (every room created before it). Recorded as ``room.bot_policy`` after ``room.created``,
    # which stays as it was, so no stored room changes.
    bot_after_missed: MissedDeadlines | None = None
    # The room lets a player leave their seat to a bot (``hand_to_bot``) without handing seats over on missed
    # deadlines (a rule-set without deadlines can have seat bots too): recorded as ``room.bot_policy`` with
    # ``after_missed`` 0. ``bot_after_missed`` implies it. The gateway lets a player leave only in a room that recorded
    # a policy (``no_bot_policy``); the room itself decides ``hand_to_bot`` in every room, as it has since seat bots
    # were published (a log recorded then must decide the same again).
    seat_bots: bool = False


class JoinRoom(msgspec.Struct, frozen=True, kw_only=True, tag="join_room", tag_field="kind",
               forbid_unknown_fields=True):
    """Take a seat in the room as the acting player.

    In a scheme-2 room the join commits to the player's secret nonce: ``nonce_commitment`` is its
    sha256 (the nonce itself went to the server privately, beside the room's seed). A join without
    one is completed by the engine, which draws a nonce for the player and says so
    (``nonce_by_server``).
    """

    nonce_commitment: Hex32 | None = None
    nonce_by_server: bool = False
    # Scheme 3: the player's Ed25519 public key; every later command of this seat must carry a valid signature
    # (events.signing), so nobody holding a token for the seat, the operator included, can act for them.
    public_key: PublicKeyHex | None = None


class RevealNonce(msgspec.Struct, frozen=True, kw_only=True, tag="reveal_nonce", tag_field="kind",
                  forbid_unknown_fields=True):
    """Reveal your own nonce (scheme-2 rooms): optional, checked against your join's commitment.

    The room's end reveals every nonce anyway; a player's own reveal confirms theirs in the log.
    """

    nonce: Hex32


class EndRoom(msgspec.Struct, frozen=True, kw_only=True, tag="end_room", tag_field="kind",
              forbid_unknown_fields=True):
    """End the room and reveal its secret seed."""

    reason: Text = "ended by a player"


class ForkRoom(msgspec.Struct, frozen=True, kw_only=True, tag="fork_room", tag_field="kind",
               forbid_unknown_fields=True):
    """Start a sandbox room from ``parent``'s state at version ``at`` (its history by reference).

    Not a player command: only the fork path (``RoomService.fork``, reached by auditors) decides it,
    handing ``step`` the parent's state and chain hash at ``at``; anywhere else it is refused.
    """

    parent: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    at: Annotated[int, msgspec.Meta(ge=1)]


class HandToBot(msgspec.Struct, frozen=True, kw_only=True, tag="hand_to_bot", tag_field="kind",
                forbid_unknown_fields=True):
    """Leave your own seat to a bot (``room.seat_to_bot``, reason ``left``): it plays on from the seat's view.

    The gateway sends it only for a room that recorded a bot policy at creation (``room.bot_policy``: create's
    ``seat_bots`` or ``bot_after_missed``; elsewhere 422 ``no_bot_policy``, nothing sent). The room decides it in every
    room, as it did when seat bots were published: logs recorded since then (a seat left to a bot in a room with no
    policy) re-decide byte for byte, and no log before could hold it (the command did not decode).

    Only the seat's own player sends it (POST /rooms/{room}/bots with their token); an empty seat is handed to
    a bot without a command (the bot's join is its event).
    """


class ReclaimSeat(msgspec.Struct, frozen=True, kw_only=True, tag="reclaim_seat", tag_field="kind",
                  forbid_unknown_fields=True):
    """Take back your own seat from its bot (``room.seat_reclaimed``): from then on only you play it.

    The gateway sends it as the seat's player when they present their seat key (POST /rooms/{room}/seat) for a
    seat the room handed to a bot (``room.seat_to_bot``); refused (``not_bot_seat``) for any other seat. No log
    recorded before it can hold it (the command did not decode), so every older log re-decides unchanged."""


ROOM_COMMANDS: tuple[type, ...] = (CreateRoom, JoinRoom, EndRoom, RevealNonce, HandToBot, ReclaimSeat)
ROOM_COMMAND_KINDS = frozenset(c.__struct_config__.tag for c in ROOM_COMMANDS)


# --- events -----------------------------------------------------------------------------------


class RoomCreated(msgspec.Struct, Generic[SetupT], frozen=True, kw_only=True, tag="room.created"):
    """A room came to be. ``ruleset`` is the rule-set's name; ``ruleset_version`` the exact version of its
    rules the room is decided and folded by forever, and ``fingerprint`` the hash of that version's code
    and data on the node that created it (``RuleSet.fingerprint``).

    Schema 2 added ``ruleset_version``, ``fingerprint`` and ``schema``; a schema-1 payload (a room
    created before versions existed: no ``schema`` key) is read through the upcaster in
    ``events.codec`` as version 1 with an unknown (empty) fingerprint.
    """

    ruleset: _RulesetName
    setup: SetupT
    seed_commitment: _Hex
    challenge: _Challenge | None
    created_by: PlayerName
    created_at_ms: int
    ruleset_version: int = 1
    fingerprint: _Fingerprint = ""
    # The stored schema of this event (see events.codec.UPCASTERS); stored payloads without it are 1.
    schema: int = 2
    # The dice construction the room draws with forever (events.dice); rooms stored without it: 1.
    dice_scheme: int = SERVER_SEED_ONLY


# omit_defaults: a join or an end without nonces is stored exactly as before nonces existed, so
# re-deciding an old room gives its recorded bytes.
class PlayerJoined(msgspec.Struct, frozen=True, kw_only=True, tag="room.player_joined", omit_defaults=True):
    player: PlayerName
    # Scheme 2: sha256 of the player's secret nonce, committed after the seed commitment was public.
    nonce_commitment: _HexOrNone = ""
    # The player sent no nonce, so the server drew one for them: it adds nothing against the operator.
    nonce_by_server: bool = False
    # Scheme 3: the seat's Ed25519 public key (hex); its commands are signed (events.signing).
    public_key: _HexOrNone = ""


class NonceRevealed(msgspec.Struct, frozen=True, kw_only=True, tag="room.nonce_revealed"):
    """A player revealed their own nonce; it matched their join's commitment."""

    player: PlayerName
    nonce: _Hex


class RoomEnded(msgspec.Struct, frozen=True, kw_only=True, tag="room.ended", omit_defaults=True):
    reason: Reason
    # The secret seed, revealed so that anyone can re-check every roll against the commitment.
    revealed_seed: _Hex
    # Scheme 2: every seated player's nonce (player -> hex, sorted by player), revealed by the server
    # whether or not the player revealed it, so nobody can stall or void the room by keeping quiet.
    revealed_nonces: dict[PlayerName, _Hex] = {}


class RoomForked(msgspec.Struct, frozen=True, kw_only=True, tag="room.forked"):
    """A sandbox room began from ``parent``'s state at version ``at``, whose chain hash was ``parent_hash``.

    The fork's own chain starts from ``parent_hash`` (its version 1 links to the parent's version
    ``at``), so verify can check the link; its dice draw from a new secret committed here, never the
    parent's. The rules are the parent's, by name and version.
    """

    parent: RoomId
    at: int
    parent_hash: _Hex
    ruleset: _RulesetName
    ruleset_version: int
    seed_commitment: _Hex
    forked_by: PlayerName
    forked_at_ms: int


class BotPolicy(msgspec.Struct, frozen=True, kw_only=True, tag="room.bot_policy"):
    """The room has seat bots: a player may leave their seat to a bot (``hand_to_bot``), and a seat that misses
    ``after_missed`` deadlines in a row is handed to one (create's ``bot_after_missed``); ``after_missed`` 0: never
    on missed deadlines (create's ``seat_bots`` alone)."""

    after_missed: int


class DeadlineMissed(msgspec.Struct, frozen=True, kw_only=True, tag="room.deadline_missed"):
    """A deadline of the rules passed and its timeout was decided: ``players`` (the seats it waited for, not
    played by a bot) missed it; written only in rooms with a bot policy."""

    key: _DeadlineKey
    players: tuple[PlayerName, ...]


class SeatActive(msgspec.Struct, frozen=True, kw_only=True, tag="room.seat_active"):
    """A seat that had missed deadlines acted itself: its count of deadlines missed in a row starts again."""

    player: PlayerName


class SeatToBot(msgspec.Struct, frozen=True, kw_only=True, tag="room.seat_to_bot", omit_defaults=True):
    """From now on a bot plays ``player``'s seat: ``reason`` ``missed`` (it missed ``missed`` deadlines in a row,
    the room's policy) or ``left`` (its player handed it over)."""

    player: PlayerName
    reason: Annotated[str, one_of(SEAT_TO_BOT_REASONS)]
    missed: int = 0


class SeatReclaimed(msgspec.Struct, frozen=True, kw_only=True, tag="room.seat_reclaimed"):
    """``player`` took their seat back from its bot (``reclaim_seat``): no bot plays it any more, and its count of
    deadlines missed in a row starts again (the room's policy may hand it over again)."""

    player: PlayerName


SEAT_EVENTS: tuple[type, ...] = (BotPolicy, DeadlineMissed, SeatActive, SeatToBot, SeatReclaimed)


class ForkOf(msgspec.Struct, frozen=True, kw_only=True):
    """Where a fork's history comes from: its parent room, the parent's version and chain hash there."""

    parent: RoomId
    at: int
    parent_hash: _Hex


ROOM_EVENT_TAGS = frozenset({"room.created", "room.player_joined", "room.nonce_revealed", "room.ended",
                             "room.forked", *(t.__struct_config__.tag for t in SEAT_EVENTS)})


def summarize_event(ruleset: str, event: Any) -> str:
    """One human line for any event of a room: the room's own events here, a game's from its rule-set."""
    if isinstance(event, RoomCreated):
        challenge = f" for the challenge {event.challenge!r}" if event.challenge else ""
        return (f"{event.created_by} created the {event.ruleset}@{event.ruleset_version} room{challenge} "
                f"(seed commitment {event.seed_commitment[:12]})")
    if isinstance(event, RoomForked):
        return (f"{event.forked_by} forked {event.parent} at version {event.at} as a sandbox "
                f"({event.ruleset}@{event.ruleset_version}; new seed commitment {event.seed_commitment[:12]})")
    if isinstance(event, PlayerJoined):
        committed = f" (nonce commitment {event.nonce_commitment[:12]}" if event.nonce_commitment else ""
        if committed:
            committed += ", drawn by the server)" if event.nonce_by_server else ")"
        return f"{event.player} joined{committed}"
    if isinstance(event, NonceRevealed):
        return f"{event.player} revealed their nonce {event.nonce[:12]}"
    if isinstance(event, BotPolicy):
        if not event.after_missed:
            return "a player may leave their seat to a bot"
        return f"a seat that misses {event.after_missed} deadlines in a row goes to a bot"
    if isinstance(event, DeadlineMissed):
        return f"{', '.join(event.players) or 'nobody'} missed the deadline {event.key}"
    if isinstance(event, SeatActive):
        return f"{event.player} is playing again"
    if isinstance(event, SeatToBot):
        why = f"missed {event.missed} deadlines in a row" if event.reason == "missed" else "its player left it"
        return f"a bot plays {event.player}'s seat from now on ({why})"
    if isinstance(event, SeatReclaimed):
        return f"{event.player} took their seat back from its bot"
    if isinstance(event, RoomEnded):
        nonces = f" with {len(event.revealed_nonces)} player nonces" if event.revealed_nonces else ""
        return f"room ended: {event.reason}; seed {event.revealed_seed[:12]} revealed{nonces}"
    return registry.stored(ruleset).decider.summary(event)  # the envelope's ruleset: the room's own version


# --- state ------------------------------------------------------------------------------------


class RoomState(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    ruleset: str
    # The version of the rules this room was created under (room.created); every lookup of its rules
    # goes by (ruleset, ruleset_version). Snapshots from before versions decode as 1, which they were.
    ruleset_version: int = 1
    version: int
    seed_commitment: str
    challenge: str | None
    created_by: str
    created_at_ms: int
    players: tuple[str, ...] = ()
    ended: bool = False
    end_reason: str = ""
    revealed_seed: str = ""
    game: Any = None
    # Set on a sandbox fork: its parent and the parent's version it starts from (None for a real room).
    fork: ForkOf | None = None
    # Scheme 2 (events.dice): the dice draw from the seed and the seated players' nonces; the
    # commitments (player, sha256 hex) in join order, and who revealed their own nonce.
    dice_scheme: int = SERVER_SEED_ONLY
    nonce_commitments: tuple[tuple[str, str], ...] = ()
    nonces_revealed: tuple[str, ...] = ()
    # Scheme 3: (player, Ed25519 public key hex) of every seat that signs, in join order. Left out of the
    # state hash while empty (events.hashing.state_hash), so every state hashed before it keeps its hash.
    player_keys: tuple[tuple[str, str], ...] = ()
    # Seat handover (``bot_after_missed``): the policy (0: none), each seat's deadlines missed in a row, and the
    # seats a bot plays since a ``room.seat_to_bot``. Left out of the state hash while empty, as player_keys.
    bot_after_missed: int = 0
    missed: tuple[tuple[str, int], ...] = ()
    bot_seats: tuple[str, ...] = ()
    # A bot policy without handover on missed deadlines (``room.bot_policy`` with ``after_missed`` 0): seats go to
    # bots only when their players leave them. True only then, so every state of a room whose policy has a count
    # (recorded before this field) encodes and hashes exactly as before: it is left out of the hash while False.
    seat_bots_only: bool = False

    _hash_omits_empty: ClassVar[tuple[str, ...]] = ("player_keys", "bot_after_missed", "missed", "bot_seats",
                                                    "seat_bots_only")


def has_bot_policy(state: RoomState) -> bool:
    """Whether the room recorded a bot policy at creation (``room.bot_policy``): only then may a player leave
    their seat to a bot."""
    return bool(state.bot_after_missed) or state.seat_bots_only


def decider_of(state: RoomState) -> Decider:
    """The Decider of the rules this room was created under (never another version of them)."""
    return registry.decider_at(state.ruleset, state.ruleset_version)


def manifest_of(state: RoomState) -> RuleSet:
    """The manifest of the rules this room was created under."""
    return registry.at(state.ruleset, state.ruleset_version)


def describe(state: RoomState) -> dict[str, Any]:
    """The room's own public facts as builtins (every reader's summary starts from these)."""
    decider = decider_of(state)
    return {
        "room": state.room,
        "ruleset": state.ruleset,
        "ruleset_version": state.ruleset_version,
        "version": state.version,
        "players": list(state.players),
        "created_by": state.created_by,
        "created_at_ms": state.created_at_ms,
        "challenge": state.challenge,
        "over": bool(decider.is_over(state.game)),
        "ended": state.ended,
        "end_reason": state.end_reason,
    }


def stored_ref(state_or_created: RoomState | RoomCreated | RoomForked) -> str:
    """What the room's envelopes carry as ``ruleset``: ``realm`` for version 1 (as always), else ``realm@2``."""
    return registry.stored_ref(state_or_created.ruleset, state_or_created.ruleset_version)


def challenge_seed(challenge: str) -> bytes:
    """The secret seed of a public challenge: public by design, the same for every room of it."""
    return hashlib.sha256(b"almanac-challenge|" + challenge.encode()).digest()


def dice_salt(state_or_created: RoomState | RoomCreated) -> str:
    """The salt the dice use: the room id, or ``"challenge"`` so challenge rooms share their draws."""
    return "challenge" if state_or_created.challenge is not None else state_or_created.room  # type: ignore[union-attr]


# --- decide -----------------------------------------------------------------------------------


def decide(state: RoomState | None, command: Any, ctx: Context) -> list[Any]:
    """The events a room-level or game command causes, with the room's own rules around the game's."""
    if isinstance(command, CreateRoom):
        return _decide_create(state, command, ctx)
    if state is None:
        raise RuleError("room_not_found", f"room {ctx.room!r} does not exist; create it first", field="room")
    if state.ended:
        raise RuleError("room_ended", f"room {ctx.room!r} has ended ({state.end_reason}); nothing more can happen")
    decider = decider_of(state)
    if isinstance(command, JoinRoom):
        return _decide_join(state, decider, command, ctx)
    if isinstance(command, EndRoom):
        return [_room_ended(command.reason, state, ctx)]
    if ctx.player not in state.players:
        raise RuleError(
            "not_joined", f"player {ctx.player!r} has not joined room {ctx.room!r}; join it first", field="player"
        )
    if isinstance(command, RevealNonce):
        return [_decide_reveal(state, command, ctx)]
    if isinstance(command, HandToBot):
        if ctx.player in state.bot_seats:
            raise RuleError("already_bot_seat", f"a bot already plays {ctx.player!r}'s seat", field="player")
        return [SeatToBot(player=ctx.player, reason="left")]
    if isinstance(command, ReclaimSeat):
        if ctx.player not in state.bot_seats:
            raise RuleError("not_bot_seat", f"no bot plays {ctx.player!r}'s seat: nothing to take back", field="player")
        return [SeatReclaimed(player=ctx.player)]
    if decider.is_over(state.game):
        raise RuleError("game_over", "the game is over; no more moves are accepted")
    events = list(decider.decide(state.game, command, ctx))
    game = state.game
    for event in events:
        game = decider.evolve(game, event)
    if events and decider.is_over(game):
        events.append(_room_ended("the game is over", state, ctx))
    elif events and state.bot_after_missed:
        events += _seat_handover(state, command, ctx)
    return events


def _seat_handover(state: RoomState, command: Any, ctx: Context) -> list[Any]:
    """The room's seat events after an accepted game command (rooms with a bot policy only), from the state
    and the command alone: a deadline's own timeout, sent once it was due, is a deadline the seats it waited
    for missed (the one that reaches the policy's count is handed to a bot); any other command of a seat that
    had missed some starts its count again."""
    deadline = _timeout_of(state, command, ctx)
    if deadline is None:
        missed = dict(state.missed)
        return [SeatActive(player=ctx.player)] if missed.get(ctx.player) else []
    waited = deadline.concerns if deadline.concerns is not None else state.players
    players = tuple(p for p in waited if p in state.players and p not in state.bot_seats)
    if not players:
        return []
    events: list[Any] = [DeadlineMissed(key=deadline.key, players=players)]
    counts = dict(state.missed)
    for player in players:
        if counts.get(player, 0) + 1 >= state.bot_after_missed:
            events.append(SeatToBot(player=player, reason="missed", missed=counts.get(player, 0) + 1))
    return events


def _timeout_of(state: RoomState, command: Any, ctx: Context) -> Any:
    """The pending deadline whose timeout ``command`` is (its command, sent by its player once due), or None."""
    deadlines = manifest_of(state).deadlines
    if deadlines is None:
        return None
    for deadline in deadlines(state.game, state.players):
        if deadline.player != ctx.player or ctx.now_ms < deadline.due_ms:
            continue
        if _is_timeout(deadline, command):
            return deadline
    return None


def _is_timeout(deadline: Any, command: Any) -> bool:
    """Whether ``command`` (decoded) is ``deadline``'s command (a body, as the clock sends it)."""
    try:
        return bool(msgspec.convert(deadline.command, type(command)) == command)
    except msgspec.ValidationError:
        return False


# --- deadlines and the clock's timeouts ------------------------------------------------------


def pending_deadlines(state: RoomState | None) -> tuple[Any, ...]:
    """The deadlines (``events.ruleset.Deadline``) the room's rule-set names in its state: none for no room, one
    not started, ended or a fork (no clock moves a sandbox), or rules without deadlines. The clock sends the
    earliest (``services.clock.earliest``); the step accepts its timeout unsigned from a signing seat
    (``clock_timeout``). Raises RulesNotInstalledError when the room's rules are not installed here."""
    if state is None or state.ended or state.game is None or state.fork is not None:
        return ()
    deadlines = manifest_of(state).deadlines
    return tuple(deadlines(state.game, state.players)) if deadlines is not None else ()


CLOCK_ID_PREFIX = "clock-"  # a player's ids are stored as "room:player:id" (the gateway's), never with it


def deadline_command_id(room: str, key: str, player: str) -> str:
    """The id every clock gives a deadline's command: the same deadline is one command, decided once."""
    digest = hashlib.sha256(f"{room}\x00{key}\x00{player}".encode()).hexdigest()[:32]
    return f"{CLOCK_ID_PREFIX}{digest}"


def summarize_recorded(ruleset: str, event: Any, command_id: str) -> str:
    """``summarize_event`` for an event as recorded: the clock sends a deadline's timeout as the seat whose deadline
    passed, so its events name that player; the line says the clock sent it, not the player."""
    line = summarize_event(ruleset, event)
    if command_id.startswith(CLOCK_ID_PREFIX):
        return f"{line} [sent by the server clock: a deadline passed]"
    return line


def clock_timeout(state: RoomState | None, room: str, player: str, command_id: str, now_ms: int,
                  command: Any) -> Any:
    """The deadline whose timeout this command is exactly as the clock sends it, or None: a deadline of
    ``pending_deadlines(state)`` due at ``now_ms`` (the command's recorded server time), for ``player``, under
    its id (``deadline_command_id``), with its command. The state alone says so, so every verifier agrees."""
    for deadline in pending_deadlines(state):
        if (deadline.player == player and deadline.due_ms <= now_ms
                and command_id == deadline_command_id(room, deadline.key, deadline.player)
                and _is_timeout(deadline, command)):
            return deadline
    return None


def decide_fork(parent: RoomState, command: ForkRoom, ctx: Context, parent_hash: str) -> list[Any]:
    """The first event of a fork of ``parent`` (the parent's state at ``command.at``, chain hash ``parent_hash``)."""
    if parent.room != command.parent or parent.version != command.at:
        raise RuleError("fork_base", f"a fork of {command.parent!r} at {command.at} needs that room's state "
                        "at that version", field="at")
    if ctx.room == parent.room:
        raise RuleError("fork_base", "a room cannot be forked onto itself", field="room")
    return [
        RoomForked(
            parent=parent.room,
            at=parent.version,
            parent_hash=parent_hash,
            ruleset=parent.ruleset,
            ruleset_version=parent.ruleset_version,
            seed_commitment=ctx.seed_commitment,
            forked_by=ctx.player,
            forked_at_ms=ctx.now_ms,
        )
    ]


def _decide_create(state: RoomState | None, command: CreateRoom, ctx: Context) -> list[Any]:
    if state is not None:
        raise RuleError("room_exists", f"room {ctx.room!r} already exists", field="room")
    # A bare name gets the rule-set's default version, never simply the newest; "name@N" that version (verify
    # pins it this way).
    rules = registry.manifest(command.ruleset)
    decider = rules.decider
    if command.challenge is not None and command.dice_scheme != SERVER_SEED_ONLY:
        raise RuleError("invalid_dice_scheme", "a challenge room draws from its public seed alone (dice_scheme 1)",
                        field="dice_scheme", allowed=[SERVER_SEED_ONLY])
    options = convert_options(decider, command.options)
    setup = decider.setup(options, ctx)
    return [
        RoomCreated(
            ruleset=decider.name,
            setup=setup,
            seed_commitment=ctx.seed_commitment,
            challenge=command.challenge,
            created_by=ctx.player,
            created_at_ms=ctx.now_ms,
            ruleset_version=rules.version,
            fingerprint=rules.fingerprint,
            dice_scheme=command.dice_scheme,
        ),
        *_bot_policy(command),
    ]


def check_bot_policy(ruleset: str, *, seat_bots: bool = False, bot_after_missed: int | None = None) -> None:
    """The one check of a create's bot policy against its rule-set (``ruleset`` as a create names it: ``realm``, its
    default version, or ``realm@2``), made before anything is recorded by every way a room is made: POST /rooms, `almanac sim`
    and `almanac import`. RuleError (422 at the API): ``no_seat_bot`` when the rules have no seat bot to play a
    handed seat, ``no_deadlines`` when ``bot_after_missed`` names deadlines the rules have not; ``field`` the option
    at fault. Not part of deciding a create: a log recorded with such a create re-decides as it was recorded."""
    if bot_after_missed is None and not seat_bots:
        return
    field = "seat_bots" if bot_after_missed is None else "bot_after_missed"
    manifest = registry.manifest(ruleset)
    name = manifest.decider.name
    if manifest.seat_bot is None:
        raise RuleError("no_seat_bot", f"{name} has no seat bot", field=field)
    if bot_after_missed is not None and manifest.deadlines is None:
        raise RuleError("no_deadlines", f"{name} names no deadlines, so no seat can miss one; create without "
                        "bot_after_missed (board@2 with turn_limit_s and realm have deadlines)", field=field)


def _bot_policy(command: CreateRoom) -> list[BotPolicy]:
    """The room's bot policy, right after ``room.created``: none unless create asked for one."""
    if command.bot_after_missed is not None:
        return [BotPolicy(after_missed=command.bot_after_missed)]
    return [BotPolicy(after_missed=0)] if command.seat_bots else []


def _decide_join(state: RoomState, decider: Decider, command: JoinRoom, ctx: Context) -> list[Any]:
    if ctx.player in state.players:
        raise RuleError("already_joined", f"player {ctx.player!r} has already joined this room", field="player")
    seats = decider.seats(state.game)
    if seats and ctx.player not in seats:
        raise RuleError(
            "no_seat",
            f"player {ctx.player!r} has no seat in this room; seats: {', '.join(seats)}",
            field="player",
            allowed=list(seats),
        )
    if command.public_key is not None and state.dice_scheme != COMMAND_BOUND:
        raise RuleError("no_player_keys", f"this room's dice scheme ({state.dice_scheme}) has no signed seats; join "
                        "without a public_key", field="public_key")
    if state.dice_scheme not in NONCE_SCHEMES:
        if command.nonce_commitment is not None:
            raise RuleError("no_player_nonces", "this room's dice draw from the server seed alone; join without a nonce",
                            field="nonce_commitment")
        return [PlayerJoined(player=ctx.player)]
    if command.nonce_commitment is None:
        # The engine completes such a join with a nonce it drew (RoomService); a bare one cannot be decided.
        raise RuleError("nonce_required", "a join of this room commits to a nonce: send one", field="nonce_commitment")
    if any(commitment == command.nonce_commitment for _, commitment in state.nonce_commitments):
        raise RuleError("nonce_reused", "another player committed to this nonce; draw a fresh one",
                        field="nonce_commitment")
    if command.nonce_commitment not in ctx.known_nonces:
        # The server must hold the nonce to draw dice with it (the step hands those it holds).
        raise RuleError("nonce_unknown", "the server holds no nonce with this commitment; send the nonce with the join",
                        field="nonce_commitment")
    return [PlayerJoined(player=ctx.player, nonce_commitment=command.nonce_commitment,
                         nonce_by_server=command.nonce_by_server, public_key=command.public_key or "")]


def _decide_reveal(state: RoomState, command: RevealNonce, ctx: Context) -> NonceRevealed:
    if state.dice_scheme not in NONCE_SCHEMES:
        raise RuleError("no_player_nonces", "this room's dice draw from the server seed alone; there is nothing to reveal")
    if ctx.player in state.nonces_revealed:
        raise RuleError("nonce_already_revealed", f"player {ctx.player!r} has already revealed their nonce")
    committed = dict(state.nonce_commitments).get(ctx.player)
    if committed != nonce_commitment(bytes.fromhex(command.nonce)):
        raise RuleError("nonce_mismatch", f"this nonce does not match the commitment of {ctx.player!r}'s join",
                        field="nonce")
    return NonceRevealed(player=ctx.player, nonce=command.nonce)


def _room_ended(reason: str, state: RoomState, ctx: Context) -> RoomEnded:
    commitment = state.seed_commitment
    if commitment and hashlib.sha256(bytes.fromhex(ctx.secret_seed_hex)).hexdigest() != commitment:
        # The engine must hand the room's own seed; revealing anything else would break the audit.
        raise RuleError("seed_mismatch", "the seed to reveal does not match the room's commitment")
    if state.dice_scheme not in NONCE_SCHEMES:
        return RoomEnded(reason=reason, revealed_seed=ctx.secret_seed_hex)
    # Every seated player's nonce, from those the step drew with (each checked against its commitment).
    nonces = dict(ctx.nonces)
    return RoomEnded(reason=reason, revealed_seed=ctx.secret_seed_hex,
                     revealed_nonces={player: nonces[player].hex() for player, _ in sorted(state.nonce_commitments)})


def convert_options(decider: Decider, options: dict[str, Any]) -> Any:
    """The rule-set's options Struct; InvalidCommand naming ``options.<field>`` when they do not fit."""
    try:
        return msgspec.convert(options, decider.options_type)
    except msgspec.ValidationError as error:
        raise boundary_error("invalid_options", error, decider.options_type, prefix="options") from None


# --- evolve -----------------------------------------------------------------------------------


def evolve(state: RoomState | None, event: Any, room: str, version: int) -> RoomState:
    """The room after one event at ``version``."""
    if isinstance(event, RoomCreated):
        decider = registry.decider_at(event.ruleset, event.ruleset_version)
        return RoomState(
            room=room,
            ruleset=event.ruleset,
            ruleset_version=event.ruleset_version,
            version=version,
            seed_commitment=event.seed_commitment,
            challenge=event.challenge,
            created_by=event.created_by,
            created_at_ms=event.created_at_ms,
            game=decider.initial_state(event.setup),
            dice_scheme=event.dice_scheme,
        )
    if isinstance(event, RoomForked):
        # ``state`` is the parent's state at ``event.at`` (the loader supplies it): the fork starts from
        # its game with nobody seated (the seats are the parent's), its own seed and no challenge.
        if state is None or state.room != event.parent or state.version != event.at:
            raise ValueError(f"room {room!r}: a fork is folded onto its parent {event.parent!r} at version {event.at}")
        return msgspec.structs.replace(
            state, room=room, version=version, seed_commitment=event.seed_commitment, challenge=None,
            created_by=event.forked_by, created_at_ms=event.forked_at_ms, players=(), ended=False, end_reason="",
            revealed_seed="", fork=ForkOf(parent=event.parent, at=event.at, parent_hash=event.parent_hash),
            # The parent's players' nonces are not the fork's: its own joins commit their own.
            nonce_commitments=(), nonces_revealed=(), player_keys=(),
        )
    if state is None:
        raise ValueError(f"room {room!r} version {version}: the first event must be room.created")
    if isinstance(event, PlayerJoined):
        if event.public_key:
            state = msgspec.structs.replace(state, player_keys=(*state.player_keys, (event.player, event.public_key)))
        if event.nonce_commitment:
            return msgspec.structs.replace(state, version=version, players=(*state.players, event.player),
                                           nonce_commitments=(*state.nonce_commitments,
                                                              (event.player, event.nonce_commitment)))
        return msgspec.structs.replace(state, version=version, players=(*state.players, event.player))
    if isinstance(event, NonceRevealed):
        return msgspec.structs.replace(state, version=version, nonces_revealed=(*state.nonces_revealed, event.player))
    if isinstance(event, BotPolicy):
        return msgspec.structs.replace(state, version=version, bot_after_missed=event.after_missed,
                                       seat_bots_only=not event.after_missed)
    if isinstance(event, DeadlineMissed):
        counts = dict(state.missed)
        for player in event.players:
            counts[player] = counts.get(player, 0) + 1
        return msgspec.structs.replace(state, version=version, missed=tuple(sorted(counts.items())))
    if isinstance(event, SeatActive):
        return msgspec.structs.replace(state, version=version,
                                       missed=tuple((p, n) for p, n in state.missed if p != event.player))
    if isinstance(event, SeatToBot):
        return msgspec.structs.replace(state, version=version, bot_seats=(*state.bot_seats, event.player),
                                       missed=tuple((p, n) for p, n in state.missed if p != event.player))
    if isinstance(event, SeatReclaimed):
        return msgspec.structs.replace(state, version=version,
                                       bot_seats=tuple(p for p in state.bot_seats if p != event.player),
                                       missed=tuple((p, n) for p, n in state.missed if p != event.player))
    if isinstance(event, RoomEnded):
        return msgspec.structs.replace(
            state, version=version, ended=True, end_reason=event.reason, revealed_seed=event.revealed_seed
        )
    game = registry.decider_at(state.ruleset, state.ruleset_version).evolve(state.game, event)
    return msgspec.structs.replace(state, version=version, game=game)
