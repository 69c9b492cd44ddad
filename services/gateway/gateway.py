"""The gateway's shared state for one process: Redis, the store, the room reader, the token signer, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import ipaddress
import os
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec
from fastapi import Request, Response, WebSocket
from redis.exceptions import RedisError
from starlette.requests import HTTPConnection

from almanac.events.envelope import Envelope
from almanac.events.shown import Shown
from almanac.projections.read_model_queries import ReadModels
from almanac.services import bootstrap, bots
from almanac.services.bootstrap import Runtime
from almanac.services.bus import (  # noqa: F401 - re-exported
    AlreadyDecided,
    RateLimit,
    count as count_request,
    internal_command_id,
)
from almanac.services.checkpoints import Checkpointer
from almanac.services.engine.shard_engine import Engine, EngineConfig, NotDecidedHere, engine_config
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, ROLE_PLAYER, Claims, TokenError, TokenSigner
from almanac.services.gateway.errors import ApiError, json_response, overloaded, store_failure
from almanac.services.gateway.heavy_reads import HeavyReads
from almanac.services.gateway.ids import UnguessableIds
from almanac.services.gateway.live_hub import LiveHub
from almanac.services.gateway.metrics import GatewayMetrics
from almanac.services.gateway.outcomes import OutcomeWaiter, SubscriptionLost, decided_from
from almanac.services.gateway.overload import Admission, FairShare
from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.gateway.room_reader import PUBLIC, READER_CACHE, RoomReader, Viewer
from almanac.services.gateway.schemas import TOKEN_REQUIRED
from almanac.services.logging import get_logger
from almanac.services.room_service import CommandRecord, Outcome, stored_outcome as outcome_from_store
from almanac.services.settings import Settings
from almanac.storage.base import CommandLimited, StoredOutcome

VERIFIED_TOKENS = 10_000
# Stored-outcome lookups of refused resends in flight at once (``Gateway.decided``): past it a resend is refused
# unlooked, so a flood of refused commands cannot queue unbounded reads on the store.
RESEND_LOOKUPS_MAX = 64

log = get_logger("almanac.gateway")


new_command_id = UnguessableIds(24)  # as many hex digits as before


def now_ms() -> int:
    return int(time.time() * 1000)


def client_address(connection: HTTPConnection) -> str:
    """The client's address as the per-address limits count it, of a request or a WebSocket: the TCP peer's,
    or the one a proxy that ALMANAC_TRUSTED_PROXIES trusts forwarded (uvicorn rewrites the peer then:
    connection_guard.server_options); see ``address_key``."""
    return scope_address(connection.scope)


def scope_address(scope: Any) -> str:
    """``client_address`` from an ASGI scope (the command fast path's, ``http_app.GatewayApp``)."""
    client = scope.get("client")
    return address_key(client[0]) if client else "unknown"


def may_resend(body: bytes | None, idempotency_key: bool) -> bool:
    """Whether a command request may resend a command already decided, so that its stored outcome, not a 503, may be
    its answer: it has an Idempotency-Key, or its body names a command id (a substring test, never false for a body
    that names one), or its body is not read yet (a client waiting for "100 Continue": refused before its body, a
    resend would get 503 and never its outcome)."""
    return idempotency_key or body is None or b"command_id" in body


@functools.lru_cache(maxsize=4_096)  # asked for every command (its fair share): parsed once per address
def address_key(host: str) -> str:
    """One client's key for the per-address limits: an IPv4 address as it is, an IPv6 address as its /64
    (one subscriber is given a whole /64, so counting single addresses would let one client be 2**64 of
    them), an IPv4-mapped IPv6 address as the IPv4 one; anything else (a unix socket's name) as it is."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def gateway_engine_config(settings: Settings) -> EngineConfig:
    """A gateway's engine: the settings' engine (ALMANAC_ENGINE_SHARDS), named after this gateway's host and port
    (stable across its restarts, unlike a pid: its consumer, metrics and heartbeat stay one)."""
    config = engine_config(settings)
    where = settings.http_port or os.getpid()  # port 0 (a free one) says nothing: then the process
    return msgspec.structs.replace(config, name=f"{config.name}:gateway-{where}")


class Gateway:
    """One gateway process's state, on the runtime the bootstrap built for it (``Role.GATEWAY``)."""

    def __init__(self, runtime: Runtime, signer: TokenSigner) -> None:
        settings = self.settings = runtime.settings
        client = self.client = runtime.client
        self.keys = runtime.keys
        self.store = runtime.store
        self.reader = RoomReader(runtime.loader(READER_CACHE))
        # Reads that fold or re-decide a whole room: a few at once, off the event loop (heavy_reads).
        self.heavy = HeavyReads(settings.gateway_max_heavy_reads,
                                lambda: bootstrap.runtime(settings, bootstrap.Role.GATEWAY_READS))
        self.signer = signer
        # Signed checkpoints on every answer about a room (services/checkpoints.py, docs/bundle-format.md).
        self.checkpoints = Checkpointer.from_settings(settings)
        # The deployment's bot key (services/bots.dice_key): a bots process's join id is derived under it.
        self.bot_key = bots.dice_key(self.checkpoints.secret)
        # The key the room of a create that names none is derived under, from its player and command id
        # (``created_room``).
        self._room_key = hmac.new(self.checkpoints.secret, b"almanac created room ids", hashlib.sha256).digest()
        self.metrics = GatewayMetrics()
        self.read_models = ReadModels(client, settings.shard_count, keys=self.keys, store=self.store)
        self.outcomes = OutcomeWaiter(client, self.keys, settings.max_outcome_waiters)
        # This process's shard engine, on a client of its own (``Role.GATEWAY_ENGINE``), started and stopped by the
        # app's lifespan: it decides the commands of the shards it holds here (Engine.decide_here); the others, all
        # of them with ALMANAC_ENGINE_SHARDS=none, go through their shard's stream to whoever holds it.
        self.engine_runtime = bootstrap.runtime(settings, bootstrap.Role.GATEWAY_ENGINE)
        self.engine = Engine(self.engine_runtime.client, gateway_engine_config(settings), self.engine_runtime.store,
                             write_call=self.outcomes.call, loaders=self.engine_runtime.loader,
                             call_many=self.outcomes.line.call_many if self.outcomes.line is not None else None)
        # Commands being decided through this process now (bounded by settings.gateway_max_inflight).
        self.inflight = 0
        # Admission: the in-flight limit and the standing-queue test (overload.Admission, its two settings).
        self.admission = Admission(settings.gateway_max_inflight, settings.gateway_target_wait_ms)
        # ... shared between the clients competing for it (overload.FairShare).
        self.fair = FairShare(settings.gateway_max_inflight)
        self.metrics.watch_inflight(lambda: self.inflight, lambda: settings.gateway_max_inflight)
        self.metrics.watch_heavy_reads(lambda: self.heavy.running, lambda: self.heavy.limit, lambda: self.heavy.asked)
        self.rate_limits = RateLimits(settings, client, self.keys)
        # The live feeds: one shared read of the shard feeds, and their caps per seat, per address and per process.
        self.live = LiveHub(client, self.store, self.keys, settings.live_max_feeds, settings.live_max_feeds_per_seat,
                            settings.live_max_feeds_per_address)
        # When this gateway last failed to reach Redis (epoch ms; 0 = never). /health stays not ready until
        # every engine's heartbeat shows a completed round after it (api_ops.health).
        self.store_outage_ms = 0
        # Tokens whose signature checked out (token -> claims): a player sends the same token with every
        # command, and the HMAC was the largest cost of the command path's own Python. Expiry is still
        # checked on every use; a bounded cache, cleared when full.
        self._verified: dict[str, Claims] = {}
        # Stored-outcome lookups of resends admission refused, in flight now (bounded by RESEND_LOOKUPS_MAX).
        self.resend_lookups = 0

    def note_store_outage(self) -> None:
        self.store_outage_ms = now_ms()

    # --- authentication ------------------------------------------------------------------------

    def claims(self, token: str | None) -> Claims:
        if not token:
            raise ApiError(401, "token_missing", "send the token from join as 'Authorization: Bearer <token>'",
                           "token")
        claims = self.known_claims(token)
        if claims is not None:
            return claims
        try:
            claims = self.signer.verify(token)
        except TokenError as error:
            self._verified.pop(token, None)
            raise ApiError(401, "token_invalid", str(error), "token") from None
        self._remember_token(token, claims)
        return claims

    def outsider_refusal(self, request: Request) -> ApiError | None:
        """The 401 of a call to a route that requires a token (schemas.TOKEN_REQUIRED) without a valid one; None
        otherwise. The parameter checks (422) use it first: who calls is told before what they sent is judged."""
        route = request.scope.get("route")
        if (getattr(route, "openapi_extra", None) or {}).get("security") != TOKEN_REQUIRED["security"]:
            return None
        try:
            self.claims(bearer(request))
        except ApiError as refusal:
            return refusal
        return None

    def known_claims(self, token: str) -> Claims | None:
        """The claims of a token this gateway already verified and that has not expired; None otherwise (no
        signature is checked here: the protocol's early refusals use it before the request is read)."""
        claims = self._verified.get(token)
        return claims if claims is not None and claims.exp >= time.time() else None

    def issue_token(self, room: str, player: str, ruleset: str) -> str:
        """A player's token for ``room``, whose rules are ``ruleset`` (as the room's events name them), known as
        verified here from the start: the room's first command then costs no signature check on this gateway,
        and no read of the room's first event on any (a third of what a room's first command cost more than its
        later ones; docs/capacity.md, tenth pass)."""
        token, claims = self.signer.issue_with_claims(room, player, ruleset=ruleset)
        # A token never used here (its player plays through another gateway, or leaves) fills the cache as a
        # used one does: the cache is bounded and refills from the next commands, so a clearing costs one
        # signature check per active player.
        self._remember_token(token, claims)
        return token

    def _remember_token(self, token: str, claims: Claims) -> None:
        if len(self._verified) >= VERIFIED_TOKENS:
            self._verified.clear()
        self._verified[token] = claims

    def player_for(self, token: str | None, room: str, player: str | None = None) -> Claims:
        """Claims of a seated player of ``room`` (403 for another room or another seat)."""
        claims = self.claims(token)
        if claims.role != ROLE_PLAYER:
            raise ApiError(403, "not_a_player", f"a {claims.role} token cannot act as a player")
        if claims.room != room:
            raise ApiError(403, "wrong_room", f"this token is for room {claims.room!r}, not {room!r}", "room")
        if player is not None and player != claims.player:
            raise ApiError(
                403, "other_seat", f"this token acts for {claims.player!r}, not {player!r}", "player"
            )
        return claims

    def reader_for(self, token: str | None, room: str) -> Claims:
        """Claims of a player of ``room`` or of an auditor."""
        claims = self.claims(token)
        if claims.role == ROLE_AUDITOR and claims.room in (ANY_ROOM, room):
            return claims
        if claims.role == ROLE_PLAYER and claims.room == room:
            return claims
        raise ApiError(403, "wrong_room", f"this token does not grant access to room {room!r}", "room")

    def viewer(self, token: str | None, room: str, public: bool = False) -> Viewer:
        """Who reads ``room`` with ``token``: a player of the room or an auditor (``reader_for``), or with
        ``public`` and no token the public. What each may see is the Viewer's to decide."""
        if public and not token:
            return PUBLIC
        return viewer_of(self.reader_for(token, room))

    def auditor(self, token: str | None, room: str = ANY_ROOM) -> Claims:
        claims = self.claims(token)
        if claims.role != ROLE_AUDITOR or claims.room not in (ANY_ROOM, room):
            raise ApiError(403, "auditors_only", "this needs an auditor token (role 'auditor')")
        return claims

    async def require_seated(self, claims: Claims, room: str) -> None:
        """403 ``not_seated`` unless an auditor or a player who joined ``room`` (only they may end it).

        A token alone is not a seat: the creator receives one even when her own join is refused. Seats are
        never given up, so a seat seen here still holds when the command is decided.
        """
        if claims.role == ROLE_AUDITOR:
            return
        state = await self.reader.latest(room)
        if state is None:
            raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
        if claims.player not in state.players:
            raise ApiError(
                403, "not_seated",
                f"{claims.player!r} holds no seat in room {room!r}: only its seated players and auditors may "
                "end it", "player",
            )

    # --- commands ------------------------------------------------------------------------------

    async def checkpoint(self, room: str, version: int, envelopes: Iterable[Envelope] = (),
                         since: dict[str, Any] | None = None,
                         shown: Mapping[int, Shown] | None = None) -> dict[str, Any] | None:
        """The signed checkpoint of ``room`` at ``version`` (``envelopes``: ones this answer already holds; ``since``:
        the checkpoint a feed sent before, see Checkpointer.head; ``shown``: the answer's ``events.shown.Shown`` of
        those envelopes by version, so their v2 views are not decoded or redacted again); None, and a warning, if
        the stream lacks a version the answer names (the answer stands without it, never a 500)."""
        try:
            return await self.checkpoints.checkpoint(self.store, room, version, envelopes, since, shown)
        except LookupError as error:
            log.warning("checkpoint.unavailable", room=room, version=version, error=str(error)[:200])
            return None

    async def room_answer(self, room: str, body: dict[str, Any], *, version: int | None = None,
                          envelopes: Iterable[Envelope] = (), shown: Mapping[int, Shown] | None = None,
                          status: int = 200, headers: dict[str, str] | None = None) -> Response:
        """A successful answer about one room, as JSON, with the room's signed checkpoint at ``version`` (default: its
        head as answered, for an answer that names no version of its own; ``envelopes``: ones the answer already
        holds, ``shown`` their ``events.shown.Shown``: see ``checkpoint``). Every room route answers through here, so
        none can leave the checkpoint out."""
        if version is None:
            version = await self.store.latest_version(room)
        checkpoint = await self.checkpoint(room, version, envelopes, shown=shown)
        return json_response({**body, "checkpoint": checkpoint}, status, headers)

    def created_room(self, name: str, player: str, client_id: str | None) -> str:
        """The room a create naming none makes: with a command id, the same for every resend of it (derived under
        the deployment's key from the player and the id: a retried create finds its first room, and its answer,
        rather than making another); without one, a new room each time."""
        if client_id is None:
            return f"{name}-{secrets.token_hex(5)}"
        digest = hmac.new(self._room_key, f"{player}\0{client_id}".encode(), hashlib.sha256).hexdigest()
        return f"{name}-{digest[:10]}"

    def overload_reason(self, address: str | None = None) -> str | None:
        """Why a new command cannot start now (None: it can): the one admission decision, whose refusal is 503
        ``overloaded`` with Retry-After (``errors.overloaded``). Cheap: asked before a command is parsed. With the
        client's ``address`` (``address_key``) also its fair share (``overload.FairShare``), and a refusal counts it
        as waiting for a slot.

        Every place that may refuse a command asks this, and decides nothing else: the connection guard and
        ``GatewayApp`` through ``command_refusal`` (before parsing), ``api_rooms.run_command`` when they did not
        admit the request (a possible resend, or the FastAPI route), and ``command_slot`` for the other submits."""
        now = time.monotonic()
        reason = self.admission.refusal(self.inflight, now)
        if address is None:
            return reason
        if reason is None:
            reason = self.fair.refusal(address, now)
        if reason is not None:
            self.fair.refused(address, now)
        return reason

    def command_refusal(self, address: str | None, body: bytes | None, idempotency_key: bool) -> str | None:
        """Whether a command request is refused as overloaded before it is parsed: admission's reason, or None (admit,
        or leave the decision to ``api_rooms.run_command``). The one rule for every place that can refuse a command
        first: the connection guard (from the bytes, CORS off), ``GatewayApp`` once the body is read, the route.

        A request that may resend a decided command (``may_resend``) is not refused here: a resend must get its
        stored outcome, never 503 (issue 28, item 18), so ``run_command`` asks admission itself and looks the
        outcome up only when it refuses. That is a different decision, not a copy: a refusal that waits for a read."""
        if may_resend(body, idempotency_key):
            return None
        return self.overload_reason(address)

    def refused_command(self, reason: str) -> ApiError:
        """The 503 ``overloaded`` for admission's ``reason``, counted (the commands' ``overloaded`` outcome)."""
        self.metrics.commands.inc(outcome="overloaded", ruleset="")
        return overloaded(reason)

    def refuse_if_overloaded(self, address: str | None = None) -> None:
        """503 ``overloaded`` now when no command slot is free: a cheap check before a request that submits is read
        (creates, joins, ends: ``command_slot``)."""
        reason = self.overload_reason(address)
        if reason is not None:
            raise self.refused_command(reason)

    @contextlib.contextmanager
    def command_slot(self, decided_resend: bool = False, address: str | None = None,
                     admitted: bool = False) -> Iterator[None]:
        """Admission (503 ``overloaded`` now when no slot is free) and a slot in ``inflight`` held from there
        to the answer, the reads before the submit included (every route that submits, ``api_rooms``).
        Counting the submit alone let a burst of commands for rooms this process had not seen start one
        rule-set read each, unbounded: past capacity they queued for new pooled connections for seconds
        (accepted p99 0.8-2.6 s at 3,000/s offered). Queueing instead of refusing would only add a command's
        wait to everyone's latency and collapse the stack past its capacity, while a refusal costs
        microseconds and tells the client when to come back. ``decided_resend``: the request resends a command
        whose outcome is stored (``decided``; a create or join, ``api_rooms``): admitted all the same, to be
        answered that outcome. ``address``: the client's, whose slots its fair share counts (commands).
        ``admitted``: admission was decided already (``api_rooms.run_command``), not asked twice."""
        if not (decided_resend or admitted):
            self.refuse_if_overloaded(address)
        self.inflight += 1
        if address is not None:
            self.fair.hold(address)
        try:
            yield
        finally:
            self.inflight -= 1
            if address is not None:
                self.fair.release(address)

    async def decided(self, room: str, command_id: str) -> StoredOutcome | None:
        """The stored outcome of a command that admission refuses (or a seat's window seen used up refuses), if it
        was decided (by any gateway or engine, before any restart): a resend is answered that outcome, not 503 or
        429 (``api_rooms.run_command``, ``_admitted_command``). One read;
        None when undecided, or when RESEND_LOOKUPS_MAX lookups are already in flight (the request is refused as
        any other then). A store that fails the read (a Cluster failing over, a replica that cannot confirm) raises:
        the request is answered 503 ``store_unavailable``, which says that its outcome could not be read now, not
        503 ``overloaded``, which says that nothing was done (issue 28, item 18: a decided command's resend during
        a failover was told it had not been decided)."""
        if self.resend_lookups >= RESEND_LOOKUPS_MAX:
            return None
        self.resend_lookups += 1
        try:
            return await self.store.outcome(room, command_id, self.outcomes.call)
        except RedisError as error:
            if store_failure(error):
                raise
            return None
        finally:
            self.resend_lookups -= 1

    async def submit(self, record: CommandRecord, admit: bool = True, limit: RateLimit | None = None
                     ) -> Outcome | None:
        """Submit and wait for the outcome, inside the request's ``command_slot`` (which admitted it).

        ``admit`` False (a request's follow-up command): never refused for too many outcome waits. With a
        ``limit`` (the seat's, from ``rate_limits.seat_limit``) the submit itself counts it: 429
        ``rate_limited``, nothing written; unless the command is decided already (a resend): its stored outcome
        (``duplicate``), nothing counted, whatever the window.
        """
        started = time.monotonic()
        calm = self.admission.calm(self.inflight)
        try:
            outcome = await self._submit(record, admit, limit)
        except CommandLimited as refused:  # bus.RateLimited, or counted by a write decided here
            # Remembered only when it was this request's own window (a sharer's token may be another).
            own = limit is not None and refused.key == limit.key
            raise self.rate_limits.token_refusal(refused.retry_ms, record.room if own else None, limit) from None
        except AlreadyDecided as resend:  # the counted submit found its outcome: no engine decides it again
            known = await self.store.kept_outcome(record.room, resend.stored)
            return await outcome_from_store(self.store, record, known, duplicate=True)
        now = time.monotonic()
        self.admission.finished(now - started, now, outcome is not None, calm)
        return outcome

    async def count_refused(self, room: str, limit: RateLimit | None) -> None:
        """Count a request refused before its submit against its token's limit (429 if that was used up)."""
        if limit is not None:
            try:
                await count_request(self.client, self.keys, room, limit, call=self.outcomes.call)
            except CommandLimited as refused:  # bus.RateLimited, or counted by a write decided here
                raise self.rate_limits.token_refusal(refused.retry_ms, room, limit) from None
            except RedisError:
                # The request is refused anyway (the caller re-raises its 4xx): a store that cannot count it
                # must not turn that answer into a 503.
                pass

    async def _submit(self, record: CommandRecord, admit: bool, limit: RateLimit | None = None) -> Outcome | None:
        timeout_s = self.settings.command_timeout_ms / 1000
        started = time.monotonic()
        try:
            # The limit is counted by the command's own write (429 past it, nothing written).
            outcome = await self.engine.decide_here(record, limit, timeout_s)
        except NotDecidedHere as not_here:
            # Nothing written: into the stream, decided when its engine can (202), its limit counted once.
            outcome = None
            if not_here.counted:
                limit = None
        if outcome is not None:
            return outcome
        # Not held here (or not taken in time): through the stream, to its shard's holder.
        timeout_s = max(timeout_s - (time.monotonic() - started), 0.0)
        try:
            outcome = await self.outcomes.submit_and_wait(record, timeout_s, admit, limit)
        except SubscriptionLost:
            # No live outcome subscription (its node died; the waiter subscribes again elsewhere): the
            # store keeps the first outcome of every id, so poll it for the rest of the wait.
            return await self.poll_stored_outcome(record, timeout_s - (time.monotonic() - started))
        if outcome is None:
            # The message may have been missed, yet the store keeps the first outcome of every id.
            outcome = await self.stored_outcome(record)
        return outcome

    async def poll_stored_outcome(self, record: CommandRecord, timeout_s: float) -> Outcome | None:
        """The stored outcome of the command, read every 10 ms (doubling to 100 ms) for up to ``timeout_s``."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        delay = 0.01
        while True:
            outcome = await self.stored_outcome(record)
            if outcome is not None or time.monotonic() >= deadline:
                return outcome
            await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, 0.1)

    async def stored_outcome(self, record: CommandRecord) -> Outcome | None:
        """The command id's first outcome as the store keeps it (None while it is undecided)."""
        stored = await self.store.outcome(record.room, record.command_id)
        if stored is None:
            return None
        outcome = await outcome_from_store(self.store, record, stored)
        # Our own submission, decided after the wait ended, is not a replay: its events carry this
        # record's server time (a replay's record was stamped at another moment).
        if not decided_from(outcome, record):
            outcome = msgspec.structs.replace(outcome, duplicate=True)
        return outcome


def bearer(request: Request | WebSocket) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.query_params.get("token")


def viewer_of(claims: Claims) -> Viewer:
    """The reader a room's verified ``claims`` make: its player, or an auditor."""
    return Viewer(player=claims.player, auditor=claims.role == ROLE_AUDITOR)
