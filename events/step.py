"""One room step and one replay: the only place a command becomes sealed envelopes and envelopes become state.

The engine, ``verify``, ``sim``, the projector, the benchmarks and the tests all go through
``step`` (decide -> seal -> evolve from the stored bytes) and ``replay`` / ``advance`` (fold), so
they cannot drift apart: verify re-decides byte for byte with exactly the code that decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import msgspec

from almanac.events import codec, room as room_rules
from almanac.events.decider import Context
from almanac.events.dice import (
    COMMAND_BOUND,
    NONCE_SCHEMES,
    Dice,
    command_key,
    dice_key,
    seed_commitment,
    server_nonce,
)
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import InvalidCommand, RuleError, RulesNotInstalledError, SecretMissing
from almanac.events.hashing import seal
from almanac.events.room import RoomState
from almanac.events.signing import command_bytes, join_bytes, signature_valid


class CommandRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A command as the engine receives it: the server stamped the time; ``body`` is the client's JSON.

    Stored records are read strictly (an unknown field is refused): older records hold a subset of these fields,
    and a field name altered in a bundle's record must not decode as the record it was (a dropped
    ``seen_version`` would read as the v1 form)."""

    command_id: str
    room: str
    player: str
    server_time_ms: int
    body: dict[str, Any]
    # Set on the record kept for a refused command: the room version it was decided against, so
    # that verify can decide it again and check it is still refused for the same reason.
    refused_at_version: int | None = None
    # Scheme 3: the player's Ed25519 signature (hex) of ``events.signing.command_bytes`` of this record;
    # required from a seat that registered a key at join. Absent (None) from every other record.
    signature: str | None = None
    # The room version the client saw and asks this command to be decided against (the v2 signed form covers
    # it): accepted at that version or a later one, refused only at exactly that one (``step``), so a signed
    # refusal can stand at one version only. None: sent without one (as before), decided at any version.
    seen_version: int | None = None


_RECORD_DECODER = msgspec.msgpack.Decoder(CommandRecord)


def decode_record(data: bytes) -> CommandRecord:
    return _RECORD_DECODER.decode(data)


def refusal_record(record: CommandRecord, state: RoomState | None) -> bytes:
    """The stored record of a refused command: the command and the version it was refused at."""
    return codec.encode(msgspec.structs.replace(record, refused_at_version=state.version if state else 0))


def kept_in_room(record: CommandRecord, error: RuleError) -> bool:
    """Whether a refusal joins the room's refusal log: every one but a create naming a room that exists. That is not
    the room's command (anyone may send one, with no token, under any player's name, with up to 64 KB of options):
    logged, each was a refusal "by" that player in the room's log, kept as long as the room, and a flood of them grew
    Redis without bound (acceptance review, 2026-12-06). Its outcome is still kept for the dedupe window."""
    return not (error.code == "room_exists" and record.body.get("kind") == "create_room")


def needs_secret_seed(state: RoomState | None, body: dict[str, Any]) -> bool:
    """Whether deciding this command needs the room's secret seed (challenge rooms use a public one).

    The engine asks before ``step`` so that it fetches (or, for a new room, draws and stores) the
    secret only when the decision will use it.
    """
    if state is None:
        return body.get("kind") == "create_room" and body.get("challenge") is None
    if body.get("kind") == "fork_room":
        return True  # a fork draws its own secret, never its parent's
    return state.challenge is None


def decode_fork(body: dict[str, Any]) -> room_rules.ForkRoom:
    """A ``fork_room`` body as its command (never through the player command schema: auditors fork)."""
    try:
        return msgspec.convert(body, room_rules.ForkRoom)
    except msgspec.ValidationError as error:
        raise RuleError("invalid_fork", f"invalid fork command: {error}") from None


# The last scheme-2 key of each room, by the identity of what it came from: the seed, the room's
# commitments (one tuple object from join to join) and the nonces mapping (treated as immutable: a
# nonce only ever sits under its own commitment). A step then costs three ``is`` checks, not a derivation.
_ROOM_KEYS: dict[str, tuple[bytes, Any, Any, bytes, tuple[tuple[str, bytes], ...]]] = {}
_ROOM_KEYS_LIMIT = 10_000
_NO_NONCES: Mapping[str, bytes] = MappingProxyType({})


# A room's seed and its commitment, as every decision's context names them: the same few seeds again and
# again, so hashed once each (a pure function of the bytes; the engine keeps each seed as one object).
_commitment = lru_cache(maxsize=_ROOM_KEYS_LIMIT)(seed_commitment)
_hex = lru_cache(maxsize=_ROOM_KEYS_LIMIT)(bytes.hex)


def _scheme_2_key(room: str, seed: bytes, commitments: tuple[tuple[str, str], ...],
                  held: Mapping[str, bytes]) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
    memo = _ROOM_KEYS.get(room)
    if memo is not None and memo[0] is seed and memo[1] is commitments and memo[2] is held:
        return memo[3], memo[4]
    try:
        pairs = tuple((player, held[commitment]) for player, commitment in commitments)
    except KeyError:
        missing = [p for p, c in commitments if c not in held]
        raise SecretMissing("nonce_missing", f"room {room!r} has no nonce of {missing[0]!r} in the store (being "
                            "imported, or lost); it cannot decide dice") from None
    key = dice_key(seed, pairs)
    if len(_ROOM_KEYS) >= _ROOM_KEYS_LIMIT:
        _ROOM_KEYS.pop(next(iter(_ROOM_KEYS)))
    _ROOM_KEYS[room] = (seed, commitments, held, key, pairs)
    return key, pairs


class SignatureRefused(InvalidCommand):
    """A signing seat's command without its player's valid signature: not the player's command at all, so never
    recorded (an ``InvalidCommand``: no event, no refusal record, no stored outcome). Recorded, it would let whoever
    holds the seat's token (the operator can mint one) write refusals in the player's name, and spend a command id
    the player has not sent yet, so the player's own command under it would answer that refusal."""


# Why a signing seat's command was accepted without its player's signature (``unsigned_because``), as verify says it.
BY_CLOCK = "clock"
BY_BOT = "bot"
BY_RECLAIM = "reclaim"


def unsigned_because(state: RoomState, record: CommandRecord, command: Any) -> str | None:
    """Why the room accepts this command of a signing seat without a signature, from the state alone, or None.

    Two commands only the deployment's own services send, each justified by what the log already holds:
    ``BY_CLOCK``, the timeout of a deadline the state names as due at the command's recorded time, under the
    clock's id for it (``events.room.clock_timeout``: the very command the clock derives; a player's missed
    deadlines would otherwise never end a season nor hand the seat over); ``BY_BOT``, a game command of a seat the
    log handed to a bot (``room.seat_to_bot``: the player left it, or missed the room's count of deadlines).
    ``BY_RECLAIM``, the seat's ``reclaim_seat`` while the log says a bot plays it (the gateway sends it when the
    player presents their seat key): it only ends the bot's unsigned moves, so it acts for nobody.
    A bot an operator added without the log (``almanac bots add``) is the operator acting for the player: refused."""
    if room_rules.clock_timeout(state, record.room, record.player, record.command_id, record.server_time_ms,
                                command) is not None:
        return BY_CLOCK
    if record.player in state.bot_seats and not isinstance(command, room_rules.ROOM_COMMANDS):
        return BY_BOT
    if record.player in state.bot_seats and isinstance(command, room_rules.ReclaimSeat):
        return BY_RECLAIM
    return None


def check_signature(state: RoomState, record: CommandRecord, command: Any) -> None:
    """A signing seat's command must carry its player's valid signature (events.signing); SignatureRefused otherwise,
    but for the unsigned commands the state alone justifies (``unsigned_because``).

    Checked when the command is decided, so the engine refuses a command sent with a minted token and
    ``verify`` (deciding every stored command again) fails a forged one in the log."""
    registered = dict(state.player_keys).get(record.player)
    if registered is None:
        return
    if record.signature is None:
        if unsigned_because(state, record, command) is not None:
            return
        raise SignatureRefused("signature_required", f"player {record.player!r} signs their commands in this room: "
                               "send `signature` (docs/dice.md)", field="signature")
    if not signature_valid(registered, record.signature, command_bytes(record.room, record.player, record.command_id,
                                                                       record.body, record.seen_version)):
        raise SignatureRefused("signature_invalid", f"the signature is not {record.player!r}'s signature of this "
                               "command (events.signing.command_bytes)", field="signature")


def check_join_signature(record: CommandRecord, command: room_rules.JoinRoom) -> None:
    """A join that registers a key and carries a signature must be signed by that key (events.signing.join_bytes):
    RuleError ``signature_invalid`` otherwise. A join without one is decided as before signed joins existed (the
    gateway refuses new ones unsigned; ``verify`` names such a join unsigned), so older logs re-decide unchanged."""
    if command.public_key is None or record.signature is None:
        return
    commitment = None if command.nonce_by_server else command.nonce_commitment
    if not signature_valid(command.public_key, record.signature,
                           join_bytes(record.room, record.player, command.public_key, commitment)):
        raise RuleError("signature_invalid", f"the join's signature is not by the key it registers for "
                        f"{record.player!r} (events.signing.join_bytes)", field="signature")


class VersionMoved(InvalidCommand):
    """A command that names the version it was sent against (``seen_version``) met the room at another version
    where it cannot stand: ahead of the room, or refused at a later one. Never recorded (an ``InvalidCommand``):
    the client signs the version it now sees (``allowed``) and resends with the same id."""


def step(
    state: RoomState | None,
    last_hash: str,
    record: CommandRecord,
    secret_seed: bytes | None,
    *,
    command: Any = None,
    dice: Dice | None = None,
    nonces: Mapping[str, bytes] | None = None,
) -> tuple[list[Envelope], RoomState]:
    """Decide ``record`` against ``state``, seal the events onto the chain after ``last_hash``, evolve.

    A record naming ``seen_version`` (the version its client saw; the v2 signed form covers it) is decided only
    at that version or a later one, and refused only at exactly that one: anywhere else ``VersionMoved``
    (unrecorded). So a refusal its player signed is the rules' answer at the version they signed, and deciding
    it again anywhere else (an operator showing it twice, or moved) is not the recorded refusal.
    """
    seen = record.seen_version
    if seen is None:
        return _step(state, last_hash, record, secret_seed, command=command, dice=dice, nonces=nonces)
    at = state.version if state is not None else 0
    if seen > at:
        raise VersionMoved("version_moved", f"the command was sent against version {seen} of room {record.room!r}, "
                           f"which is at version {at}", field="seen_version", allowed=at)
    try:
        return _step(state, last_hash, record, secret_seed, command=command, dice=dice, nonces=nonces)
    except RuleError as error:
        if at == seen or isinstance(error, (InvalidCommand, RulesNotInstalledError)):
            raise
        raise VersionMoved("version_moved", f"the command, sent against version {seen}, is refused at version {at} "
                           f"of room {record.room!r} ({error.code}); a refusal stands only at the version the command "
                           f"names: send it again naming version {at}", field="seen_version", allowed=at) from None


def _step(
    state: RoomState | None,
    last_hash: str,
    record: CommandRecord,
    secret_seed: bytes | None,
    *,
    command: Any = None,
    dice: Dice | None = None,
    nonces: Mapping[str, bytes] | None = None,
) -> tuple[list[Envelope], RoomState]:
    """``step`` for any version (its docstring; the parameters below).

    ``secret_seed`` is the room's secret (None when ``needs_secret_seed`` says it is not used);
    ``nonces`` are the players' secret nonces the server holds for a scheme-2 room, by their
    commitment (sha256 hex; the caller checked each hashes to its key): the dice key is derived
    from the seed and the seated players' nonces (``events.dice.dice_key``, cached per join);
    ``command`` skips decoding the body (tests hand a command Struct); ``dice`` replaces the room's
    dice (tests script them). Raises ``RuleError`` when the command is refused; a refusal changes
    nothing. Every new state is evolved from the decoded envelope, exactly as a replay will.
    """
    if command is None and record.body.get("kind") == "fork_room":
        command = decode_fork(record.body)
    if isinstance(command, room_rules.ForkRoom):
        return _step_fork(state, last_hash, record, secret_seed, command, dice)
    if command is None:
        # The room's own rules version (its envelopes' ``ruleset``), never the newest installed.
        try:
            command = codec.decode_command(room_rules.stored_ref(state) if state is not None else None, record.body)
        except InvalidCommand as error:
            if state is None and error.code == "unknown_command":
                # A game command for a room with no events: no rules to read it by, and what is wrong is the room.
                # Unrecorded, as every refusal at decoding: nothing is stored for a room that does not exist.
                raise InvalidCommand("room_not_found", f"room {record.room!r} does not exist; create it first",
                                     field="room") from None
            raise
    if state is None:
        if isinstance(command, room_rules.CreateRoom) and command.challenge is not None:
            seed, salt = room_rules.challenge_seed(command.challenge), "challenge"
        elif isinstance(command, room_rules.CreateRoom):
            if secret_seed is None:
                raise SecretMissing("seed_missing", f"room {record.room!r} has no secret seed to create it with")
            seed, salt = secret_seed, record.room
        else:
            seed, salt = b"", record.room  # the room does not exist; deciding refuses the command
    elif state.challenge is not None:
        seed, salt = room_rules.challenge_seed(state.challenge), "challenge"
    else:
        if secret_seed is None:
            raise SecretMissing("seed_missing", f"room {record.room!r} has no secret seed in the store (being imported, "
                              "or lost); it cannot decide dice")
        seed, salt = secret_seed, record.room
    version = (state.version if state is not None else 0) + 1
    pairs: tuple[tuple[str, bytes], ...] = ()
    if state is None:
        scheme = command.dice_scheme if isinstance(command, room_rules.CreateRoom) else 1
    else:
        scheme = state.dice_scheme
    held: Mapping[str, bytes] = nonces if nonces is not None else _NO_NONCES
    dice_version = version
    if scheme in NONCE_SCHEMES:
        key, pairs = _scheme_2_key(record.room, seed, state.nonce_commitments if state is not None else (), held)
    else:
        key = seed
    if scheme == COMMAND_BOUND and state is not None:
        # (The create's setup draws as scheme 2's, from the seed alone: public before anyone commits.)
        check_signature(state, record, command)
        if isinstance(command, room_rules.JoinRoom):
            check_join_signature(record, command)
        # The command's own dice: its id, its content and its player's committed nonce; no version.
        own = dict(pairs).get(record.player) or server_nonce(seed, record.player)
        key, dice_version = command_key(seed, record.player, own, record.command_id, record.body), 0
    ctx = Context(
        room=record.room,
        player=record.player,
        now_ms=record.server_time_ms,
        version=version,
        dice=Dice(key, salt, dice_version) if dice is None else dice,
        seed_commitment=_commitment(seed),
        secret_seed_hex=_hex(seed),
        nonces=pairs,
        known_nonces=held,
    )
    events = room_rules.decide(state, command, ctx)
    if not events:
        raise RuleError("no_effect", "the command changes nothing")
    envelopes: list[Envelope] = []
    previous = last_hash
    new_state = state
    for offset, event in enumerate(events):
        event_type, payload = codec.encode_event(event)
        envelope = seal(
            Envelope(
                room=record.room,
                version=version + offset,
                # "realm" for version-1 rooms (as before versions), "realm@2" otherwise: decode_event
                # reads the room's version from here.
                ruleset=room_rules.stored_ref(state if state is not None else events[0]),  # a create's: its room.created
                type=event_type,
                payload=payload,
                command_id=record.command_id,
                player=record.player,
                server_time_ms=record.server_time_ms,
                previous_hash=previous,
            )
        )
        previous = envelope.hash
        envelopes.append(envelope)
        new_state = room_rules.evolve(new_state, codec.decode_event(envelope), record.room, envelope.version)
    return envelopes, new_state  # type: ignore[return-value]


def _step_fork(parent: RoomState | None, parent_hash: str, record: CommandRecord, secret_seed: bytes | None,
               command: room_rules.ForkRoom, dice: Dice | None) -> tuple[list[Envelope], RoomState]:
    """A fork's first step: ``parent`` is the parent's state at ``command.at`` and ``parent_hash`` its chain
    hash there; the fork's version 1 links to that hash, and its seed is the fork's own."""
    if parent is None or parent.room == record.room:
        raise RuleError("fork_base", "a fork is started from its parent's state by `almanac fork` (auditors)",
                        field="kind")
    if secret_seed is None:
        raise SecretMissing("seed_missing", f"fork {record.room!r} has no secret seed to start with")
    ctx = Context(room=record.room, player=record.player, now_ms=record.server_time_ms, version=1,
                  dice=Dice(secret_seed, record.room, 1) if dice is None else dice,
                  seed_commitment=seed_commitment(secret_seed), secret_seed_hex=secret_seed.hex())
    (event,) = room_rules.decide_fork(parent, command, ctx, parent_hash)
    event_type, payload = codec.encode_event(event)
    envelope = seal(Envelope(room=record.room, version=1, ruleset=room_rules.stored_ref(event), type=event_type,
                             payload=payload, command_id=record.command_id, player=record.player,
                             server_time_ms=record.server_time_ms, previous_hash=parent_hash))
    return [envelope], room_rules.evolve(parent, codec.decode_event(envelope), record.room, 1)


def advance(state: RoomState | None, envelope: Envelope, event: Any = None) -> RoomState:
    """The room after one stored envelope (``event`` is its decoded event, when the caller has it)."""
    if event is None:
        event = codec.decode_event(envelope)
    return room_rules.evolve(state, event, envelope.room, envelope.version)


def replay(envelopes: Iterable[Envelope], state: RoomState | None = None) -> RoomState | None:
    """Fold envelopes (in version order) onto ``state``: the room as its log says (None for no events)."""
    for envelope in envelopes:
        state = room_rules.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
    return state


def seal_events(room: str, ruleset: str, events: Iterable[Any], player: str = "player") -> list[Envelope]:
    """Events as the sealed, hash-chained envelopes of a room from version 1 (command ``c<version>``,
    server time = version): a stored-form log for tests and benchmarks that hold bare events."""
    events = list(events)
    if events and isinstance(events[0], room_rules.RoomCreated):
        ruleset = room_rules.stored_ref(events[0])  # the version the room was created under, as the engine writes
    result: list[Envelope] = []
    previous = GENESIS_HASH
    for version, event in enumerate(events, start=1):
        event_type, payload = codec.encode_event(event)
        envelope = seal(Envelope(room=room, version=version, ruleset=ruleset, type=event_type, payload=payload,
                                 command_id=f"c{version}", player=player, server_time_ms=version,
                                 previous_hash=previous))
        previous = envelope.hash
        result.append(envelope)
    return result


def last_hash_of(envelopes: list[Envelope], default: str = GENESIS_HASH) -> str:
    """The chain hash after ``envelopes`` (``default`` when there are none)."""
    return envelopes[-1].hash if envelopes else default
