"""The Python client of an Almanac gateway: rooms, seats, idempotent commands with retries, reads, the live feed.

    from almanac.client import Client

    with Client("http://127.0.0.1:8000") as client:
        seat = client.create_room("board", "alice")           # a Seat: room, player, token (and seat_key)
        bob = client.join(seat.room, "bob")
        seat.command({"kind": "place", ...})                  # or a msgspec Struct of the rule-set
        for event in seat.follow(from_version=1):             # the live feed, reconnecting without gaps
            ...

It speaks only the public HTTP/WebSocket API (docs/client.md) and imports nothing of the server: httpx for
HTTP, websockets for the live feed, msgspec to turn a rule-set's command Struct into JSON; a signed seat's key
(``almanac.client.signing``) signs with ``cryptography`` the bytes ``almanac.events.signing`` defines (the one rule).

Signed seats (dice scheme 3, docs/dice.md). ``create_room``/``join`` with ``player_key=PlayerKey.generate()`` (or a
key kept earlier: ``PlayerKey.import_key``) register the key, signing the join; from then on the Seat signs every
command it sends (game commands, ``reveal_nonce``, ``end``, ``hand_to_bot``) over the newest room version it has
seen in an answer or the live feed. A ``409 version_moved`` (the room moved and the command would be refused
there: nothing recorded) is signed again over the version it names and sent once more with the same command id.

Retries. Every command carries a client command id (drawn here when not given: long and random, so a retry
of a create or join gets its token back). A command answered 429 or 503 changed nothing, and a command
whose connection dropped may or may not have landed: both are sent again with the same id (the server
decides it once) after the Retry-After the server named, or an exponential back-off with jitter, up to
``retries`` times. A 202 (the engine has not answered yet) is followed to its outcome. Reads retry alike.

What the player holds. ``Client.held`` (``almanac.client.held.Held``) keeps, per room, every signed checkpoint an
answer or live-feed message carried and every refusal receipt a rule's refusal (422) carried; ``export_held(room,
checkpoints=..., receipts=...)`` writes them as the files ``almanac verify-bundle --checkpoints/--receipts`` read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import random
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import msgspec
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect as ws_connect

from almanac.client.held import Held
from almanac.client.signing import (
    KeySubstituted,
    PlayerKey,
    newest_version,
    registered_key,
    signed_join,
    version_moved,
)

__all__ = ["ApiError", "Client", "CommandResult", "Held", "KeySubstituted", "PlayerKey", "Seat", "new_command_id",
           "verify_webhook"]

RETRY_STATUSES = (429, 503)
# The gateway refuses command ids shorter than this on a replayed create/join (the token is not handed out again).
COMMAND_ID_BYTES = 24
# Live feed closes that mean "the feed did not end: reconnect" (server error, try again later, going away).
RECONNECT_CLOSE_CODES = (1001, 1006, 1011, 1012, 1013)


def new_command_id() -> str:
    """A client command id: 32 URL-safe characters (long enough to recover a create's or join's token)."""
    return secrets.token_urlsafe(COMMAND_ID_BYTES)


def new_room_id(ruleset: str) -> str:
    """A room id drawn by the client, as the server would draw one (a signed join covers its room, so a signed
    create names it before sending)."""
    return f"{ruleset.split('@')[0]}-{secrets.token_hex(5)}"


def create_body(ruleset: str, player: str, *, room: str | None, options: dict[str, Any] | None,
                setup: dict[str, Any] | None, challenge: str | None, join: bool, dice_scheme: int | None,
                nonce: str | None, command_id: str | None, bots: list[str] | None, player_key: PlayerKey | None,
                seat_bots: bool, bot_after_missed: int | None, bot_delay_ms: int = 0) -> dict[str, Any]:
    """The body of POST /rooms for ``create_room`` (both clients): a signed creator's join names its room, so one is
    drawn here when ``room`` is None."""
    body: dict[str, Any] = {"ruleset": ruleset, "player": player, "join": join,
                            "command_id": command_id or new_command_id()}
    if player_key is not None:
        if not join:
            raise ValueError("player_key signs the creator's join: it needs join=True")
        room = room or new_room_id(ruleset)
        signing = signed_join(player_key, room, player, nonce)
        body.update(public_key=signing["public_key"], join_signature=signing["signature"])
    for name, value in (("room", room), ("options", options), ("setup", setup), ("challenge", challenge),
                        ("dice_scheme", dice_scheme), ("nonce", nonce), ("bots", bots),
                        ("bot_after_missed", bot_after_missed)):
        if value is not None:
            body[name] = value
    if seat_bots:
        body["seat_bots"] = True
    if bot_delay_ms:
        body["bot_delay_ms"] = bot_delay_ms
    return body


def verify_webhook(secret: str, signature: str, body: bytes, *, tolerance_s: float = 300.0,
                   now: float | None = None) -> bool:
    """Whether a webhook's ``X-Almanac-Signature`` (``t=<unix s>,v1=<hex>``) is the HMAC-SHA256 of ``"<t>.<body>"``
    under the subscription's secret, signed within ``tolerance_s`` of ``now`` (a replayed old one fails)."""
    fields = dict(part.split("=", 1) for part in signature.split(",") if "=" in part)
    try:
        stamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - stamp) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields.get("v1", ""))


class ApiError(Exception):
    """A refusal from the gateway: its HTTP status (or 4000 + status as a live feed's close code) and its
    ``{code, message, field, allowed}`` body; ``retry_after`` in seconds when the server named one."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 body: dict[str, Any] | None = None, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body or {}
        self.retry_after = retry_after

    @property
    def allowed(self) -> list[Any] | None:
        return self.body.get("allowed")


@dataclass(frozen=True)
class CommandResult:
    """An accepted command: the versions its events took and the events as the sender may see them."""

    command_id: str
    room: str
    first_version: int
    version: int
    duplicate: bool
    events: list[dict[str, Any]]
    answer: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, answer: dict[str, Any]) -> CommandResult:
        return cls(command_id=answer["command_id"], room=answer["room"], first_version=answer["first_version"],
                   version=answer["version"], duplicate=answer["duplicate"], events=answer["events"], answer=answer)


class Client:
    """One gateway. ``token``: sent when a call names none (an auditor's token, say). Thread-safe as httpx is."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0, retries: int = 6,
                 max_backoff_s: float = 10.0, pending_wait_s: float = 60.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.retries = retries
        self.max_backoff_s = max_backoff_s
        self.pending_wait_s = pending_wait_s
        self.http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)
        self.held = Held()
        self.keys: dict[str, Any] | None = None  # the deployment's key set, as first fetched (key_set)

    def close(self) -> None:
        self.http.close()

    def key_set(self) -> dict[str, Any]:
        """The deployment's key set (/.well-known/almanac-keys.json), fetched once and kept: exported files carry
        the one seen while playing."""
        if self.keys is None:
            self.keys = self.request("GET", "/.well-known/almanac-keys.json")
        return self.keys

    def export_held(self, room: str, *, checkpoints: str | Any = None, receipts: str | Any = None,
                    keys: bool = True) -> None:
        """Write what this client holds of ``room``: its checkpoints as an ``almanac-checkpoints`` file and its
        refusal receipts as an ``almanac-receipts`` file (paths; either may be None), with the key set unless
        ``keys`` is False (give ``verify-bundle --keys`` one fetched independently to trust neither file's)."""
        self.held.write(room, checkpoints=checkpoints, receipts=receipts, keys=self.key_set() if keys else None)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the one call -----------------------------------------------------------------------------

    def request(self, method: str, path: str, *, token: str | None = None, json_body: Any = None,
                params: dict[str, Any] | None = None, expect: tuple[int, ...] = (200, 201),
                retry: bool = True) -> Any:
        """One API call; its JSON answer (text for a text/plain one). A refusal raises ApiError.

        Retried (``retry``) on 429/503 after Retry-After and on a dropped connection: safe for reads and for
        command routes whose body carries a command id (every command this client sends does)."""
        headers = {}
        bearer = token if token is not None else self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        attempt, pending_until = 0, 0.0
        while True:
            try:
                response = self.http.request(method, path, headers=headers, json=json_body, params=params)
            except httpx.TransportError:
                # A dropped connection: a command may or may not have landed; its id makes the resend safe.
                if not retry or attempt >= self.retries:
                    raise
                self._sleep(attempt, None)
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and retry and attempt < self.retries:
                self._sleep(attempt, _retry_after(response))
                attempt += 1
                continue
            if response.status_code == 202 and method.upper() == "POST":
                if bearer:
                    return self._await_outcome(response.json(), bearer)
                # A create or join (no token yet, so no outcome URL to ask): the same body again, whose long
                # command id gets the answer with the token once the engine has decided it
                pending_until = pending_until or time.monotonic() + self.pending_wait_s
                if time.monotonic() < pending_until:
                    self._sleep(min(attempt, 4), None)
                    attempt += 1
                    continue
                raise _error_of(response)
            if response.status_code not in expect:
                raise self._kept(_error_of(response))
            if response.headers.get("content-type", "").startswith("application/json"):
                return self.held.keep(response.json())
            return response.text

    def _kept(self, error: ApiError) -> ApiError:
        """``error``, its refusal receipt (a rule's refusal carries one) kept first."""
        self.held.keep(error.body)
        return error

    def _await_outcome(self, pending: dict[str, Any], token: str | None) -> dict[str, Any]:
        """A 202: ask the outcome URL until the engine has answered (404 outcome_unknown: not yet)."""
        deadline = time.monotonic() + self.pending_wait_s
        attempt = 0
        while True:
            try:
                return self.request("GET", pending["outcome_url"], token=token)
            except ApiError as error:
                if error.code != "outcome_unknown" or time.monotonic() > deadline:
                    raise
            self._sleep(min(attempt, 4), None)
            attempt += 1

    def _sleep(self, attempt: int, retry_after: float | None) -> None:
        if retry_after is not None:
            delay = retry_after + random.uniform(0, 0.25)  # spread the retries of many clients a little
        else:
            delay = min(self.max_backoff_s, 0.1 * 2**attempt) * random.uniform(0.5, 1.0)
        time.sleep(min(delay, self.max_backoff_s))

    # --- rooms ------------------------------------------------------------------------------------

    def rulesets(self) -> list[dict[str, Any]]:
        return self.request("GET", "/rulesets")["rulesets"]

    def ruleset_schema(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/rulesets/{_seg(name)}/schema")

    def create_room(self, ruleset: str, player: str, *, room: str | None = None,
                    options: dict[str, Any] | None = None, setup: dict[str, Any] | None = None,
                    challenge: str | None = None, join: bool = True, dice_scheme: int | None = None,
                    nonce: str | None = None, command_id: str | None = None,
                    bots: list[str] | None = None, player_key: PlayerKey | None = None, seat_bots: bool = False,
                    bot_after_missed: int | None = None, bot_delay_ms: int = 0) -> Seat:
        """Create a room (and take a seat in it unless ``join`` is false); the creator's Seat.

        ``player_key``: the creator's seat signs (a scheme-3 room): the join registers the key, signed by it (a
        signed join names its room, so one is drawn here when ``room`` is None), and the Seat signs every command.
        KeySubstituted when the answer registered another key.

        ``seat_bots``: its players may leave their seats to a bot (``Seat.hand_to_bot``); ``bot_after_missed``: a
        seat that misses that many deadlines in a row goes to a bot (and players may leave theirs). Neither: a
        room whose seats never go to a bot (docs/bots.md). ``bots``: seats a server bot plays, each move
        ``bot_delay_ms`` (0 .. 60,000) after the room's newest event."""
        body = create_body(ruleset, player, room=room, options=options, setup=setup, challenge=challenge, join=join,
                           dice_scheme=dice_scheme, nonce=nonce, command_id=command_id, bots=bots,
                           player_key=player_key, seat_bots=seat_bots, bot_after_missed=bot_after_missed,
                           bot_delay_ms=bot_delay_ms)
        answer = self.request("POST", "/rooms", json_body=body, token="")
        return Seat(self, answer["room"], player, answer["token"], answer, player_key=player_key).checked_join()

    def join(self, room: str, player: str, *, nonce: str | None = None, command_id: str | None = None,
             player_key: PlayerKey | None = None) -> Seat:
        """Take a seat; with ``player_key`` a signed one (see ``create_room``)."""
        body: dict[str, Any] = {"player": player, "command_id": command_id or new_command_id()}
        if nonce is not None:
            body["nonce"] = nonce
        body.update(signed_join(player_key, room, player, nonce))
        answer = self.request("POST", f"/rooms/{_seg(room)}/join", json_body=body, token="")
        return Seat(self, room, player, answer["token"], answer, player_key=player_key).checked_join()

    def reclaim_seat(self, room: str, player: str, seat_key: str, *, player_key: PlayerKey | None = None) -> Seat:
        """A fresh token for a seat held before, from the seat key its join answer carried (``Seat.seat_key``);
        a signed seat's ``player_key`` (``PlayerKey.import_key`` of the exported one) signs again with it."""
        answer = self.request("POST", f"/rooms/{_seg(room)}/seat", json_body={"player": player, "seat_key": seat_key},
                              token="")
        return Seat(self, room, player, answer["token"], {**answer, "seat_key": seat_key}, player_key=player_key)

    def seat(self, room: str, player: str, token: str, *, player_key: PlayerKey | None = None) -> Seat:
        """A Seat from a token kept earlier (and the seat's key, when it signs)."""
        return Seat(self, room, player, token, {}, player_key=player_key)

    def rooms_page(self, ruleset: str | None = None, *, limit: int | None = None,
                   cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of GET /rooms (rooms in play or recently over newest first, then archived ones) and the cursor
        of the next page (None: the last)."""
        params = {k: v for k, v in (("ruleset", ruleset), ("limit", limit), ("cursor", cursor)) if v is not None}
        answer = self.request("GET", "/rooms", params=params or None)
        return answer["rooms"], answer.get("next_cursor")

    def rooms(self, ruleset: str | None = None, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Every room, its pages followed to the last (``limit``: rooms a page; the server's default when None)."""
        rooms, cursor = self.rooms_page(ruleset, limit=limit)
        while cursor is not None:
            more, cursor = self.rooms_page(ruleset, limit=limit, cursor=cursor)
            rooms += more
        return rooms

    def room(self, room: str) -> dict[str, Any]:
        """The room's public summary (rule-set and version, players, seats, over, ended)."""
        return self.request("GET", f"/rooms/{_seg(room)}")

    def scores(self, room: str) -> dict[str, int]:
        return self.request("GET", f"/rooms/{_seg(room)}/scores")["scores"]

    def events(self, room: str, *, token: str | None = None, from_version: int = 1,
               limit: int | None = None) -> dict[str, Any]:
        """A page of the room's events as the token may see them ({events, next_version, latest_version})."""
        params: dict[str, Any] = {"from_version": from_version}
        if limit is not None:
            params["limit"] = limit
        return self.request("GET", f"/rooms/{_seg(room)}/events", token=token, params=params)

    def state(self, room: str, *, token: str | None = None, version: int | None = None) -> dict[str, Any]:
        """Auditors: the complete state (at a version): {version, state_hash, state: {game, ended, ...}}."""
        params = {"version": version} if version is not None else None
        return self.request("GET", f"/rooms/{_seg(room)}/state", token=token, params=params)

    def verification(self, room: str, *, token: str | None = None) -> dict[str, Any]:
        return self.request("GET", f"/rooms/{_seg(room)}/verification", token=token)

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health", expect=(200, 503), retry=False)

    # --- the live feed ----------------------------------------------------------------------------

    def follow(self, room: str, *, token: str | None = None, from_version: int = 1,
               idle_timeout_s: float | None = None, reconnect: bool = True) -> Iterator[dict[str, Any]]:
        """The room's events as the token may see them, from ``from_version`` on, each version once, in order.

        A dropped connection (or a close meaning "try again later") reconnects from the last version seen + 1,
        so nothing is missed or repeated. A refusal (close 4000 + status) raises ApiError. ``idle_timeout_s``:
        stop when no event came for that long (None: wait for ever)."""
        bearer = token if token is not None else self.token
        next_version = from_version
        attempt = 0
        base = "ws" + self.url[len("http"):] if self.url.startswith("http") else self.url
        refusal: dict[str, Any] = {}
        while True:
            query = urlencode({"from_version": next_version})
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            try:
                with ws_connect(f"{base}/rooms/{_seg(room)}/live?{query}", additional_headers=headers,
                                open_timeout=10, max_size=2**24) as socket:
                    while True:
                        try:
                            text = socket.recv(timeout=idle_timeout_s)
                        except TimeoutError:
                            return
                        message = json.loads(text)
                        if "version" not in message:  # a refusal {code, message, field}; the close follows
                            refusal = message
                            continue
                        if message["version"] < next_version:
                            continue
                        next_version = message["version"] + 1
                        attempt = 0
                        yield self.held.keep(message)
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else 1006
                if code >= 4000:
                    reason = refusal or _json_or_empty(closed.rcvd.reason if closed.rcvd else "")
                    raise ApiError(code - 4000, str(reason.get("code", "refused")),
                                   str(reason.get("message", "the live feed was refused")), reason.get("field"),
                                   reason) from None
                if not reconnect or (code not in RECONNECT_CLOSE_CODES and code != 1000):
                    return
                if code == 1000:
                    return  # the server closed the feed normally
            except (OSError, InvalidHandshake) as error:
                if isinstance(error, InvalidStatus) and error.response.status_code not in RETRY_STATUSES:
                    raise ApiError(error.response.status_code, "handshake_refused", str(error)) from None
                if not reconnect or attempt >= self.retries:
                    raise
            self._sleep(attempt, None)
            attempt += 1


class SeatState:
    """What a seat holds, sync or async alike: room, player, token, the create/join ``answer`` (``seat_key`` when
    the server issues one, ``events``, ``version``), a signed seat's ``player_key`` (every command is signed with
    it) and ``seen_version``: the newest room version the seat has seen (answers, its live feed), which its next
    signed command covers."""

    def __init__(self, client: Any, room: str, player: str, token: str, answer: dict[str, Any], *,
                 player_key: PlayerKey | None = None) -> None:
        self.client = client
        self.room = room
        self.player = player
        self.token = token
        self.answer = answer
        self.player_key = player_key
        self.seen_version = newest_version(answer, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(room={self.room!r}, player={self.player!r}, signed={self.player_key is not None})"

    @property
    def seat_key(self) -> str | None:
        return self.answer.get("seat_key")

    def checked_join(self) -> Any:
        """This seat, once its join answer is seen to register its key (KeySubstituted when it registered another)."""
        if self.player_key is not None:
            held, registered = registered_key(self.answer, self.player)
            if held and registered != self.player_key.public_key:
                raise KeySubstituted(self, self.player_key.public_key, registered)
        return self

    def saw(self, answer: Any) -> Any:
        """Keep the newest version ``answer`` shows (the next signed command covers it); the answer itself."""
        self.seen_version = newest_version(answer, self.seen_version)
        return answer

    def signed_body(self, body: dict[str, Any], signed: dict[str, Any], seen: int) -> dict[str, Any]:
        """``body`` with ``seen_version`` and this seat's signature of ``signed`` (the command as recorded)."""
        assert self.player_key is not None
        return {**body, "seen_version": seen,
                "signature": self.player_key.sign_command(self.room, self.player, body["command_id"], signed, seen)}

    def moved(self, error: ApiError) -> int | None:
        """After a signed command's first refusal: the version to sign again over when it is ``409 version_moved``
        (None when it names none: read the room's); any other refusal is raised."""
        moved, allowed = version_moved(error)
        if not moved:
            raise error
        if allowed is not None:
            self.seen_version = max(self.seen_version, allowed)
        return allowed


class Seat(SeatState):
    """A player's seat in a room (``SeatState``): commands and reads as that player."""

    client: Client

    def _send(self, path: str, body: dict[str, Any], signed: dict[str, Any] | None) -> Any:
        """POST one command of this seat; ``signed``: the command as recorded, which a signed seat signs.

        Signed over ``seen_version``; a 409 ``version_moved`` (nothing recorded) is signed again over the version it
        names and sent once more with the same command id (nothing was recorded; no new id is drawn, so a command is
        decided at most once); a second one is raised."""
        if self.player_key is None or signed is None:
            return self.saw(self.client.request("POST", path, token=self.token, json_body=body))
        try:
            return self.saw(self.client.request("POST", path, token=self.token,
                                                json_body=self.signed_body(body, signed, self.seen_version)))
        except ApiError as error:
            allowed = self.moved(error)
        if allowed is None:  # the refusal named no version: refresh from the room itself
            allowed = self.saw(self.client.room(self.room))["version"]
        # A second refusal, a second version_moved included, is raised: the caller decides (never dropped unsaid).
        return self.saw(self.client.request("POST", path, token=self.token,
                                            json_body=self.signed_body(body, signed, allowed)))

    def command(self, command: dict[str, Any] | msgspec.Struct, *, command_id: str | None = None) -> CommandResult:
        """Send one of the room's rule-set commands (a dict with ``kind``, or the rule-set's Struct).

        Refused by the rules: ApiError (422 with the rule's code). Retries reuse the command id, so the
        server decides the command at most once (a duplicate answers ``duplicate: true``). A signed seat signs it
        (see ``_send``)."""
        body = msgspec.to_builtins(command) if isinstance(command, msgspec.Struct) else command
        return CommandResult.of(self._send(f"/rooms/{_seg(self.room)}/commands",
                                           {"command": body, "command_id": command_id or new_command_id()}, body))

    def reveal_nonce(self, nonce: str, *, command_id: str | None = None) -> CommandResult:
        """Reveal this seat's own nonce (checked against its join's commitment; signed in a signed seat)."""
        return self.command({"kind": "reveal_nonce", "nonce": nonce}, command_id=command_id)

    def outcome(self, command_id: str) -> CommandResult:
        """The outcome of a command sent earlier, by its id (ApiError 404 outcome_unknown: not decided yet)."""
        return CommandResult.of(self.saw(self.client.request(
            "GET", f"/rooms/{_seg(self.room)}/commands/{_seg(command_id)}", token=self.token)))

    def end(self, reason: str = "ended by a player", *, command_id: str | None = None) -> CommandResult:
        body = {"reason": reason, "command_id": command_id or new_command_id()}
        return CommandResult.of(self._send(f"/rooms/{_seg(self.room)}/end", body,
                                           {"kind": "end_room", "reason": reason}))

    def hand_to_bot(self, seat: str | None = None, *, command_id: str | None = None) -> dict[str, Any]:
        """Hand a seat to a bot (POST /rooms/{room}/bots): an empty one (the room's creator), or, by default, this
        player's own seat, which they leave to the bot (docs/bots.md; a signed seat signs ``hand_to_bot``): only in
        a room created with ``seat_bots`` or ``bot_after_missed``, else ApiError 422 ``no_bot_policy``."""
        seat = seat or self.player
        body = {"seat": seat, "command_id": command_id or new_command_id()}
        return self._send(f"/rooms/{_seg(self.room)}/bots", body,
                          {"kind": "hand_to_bot"} if seat == self.player else None)

    def view(self) -> dict[str, Any]:
        """The room as this player may see it: the summary plus ``view`` (hidden values left out)."""
        return self.saw(self.client.request("GET", f"/rooms/{_seg(self.room)}/view", token=self.token))

    def events(self, from_version: int = 1, limit: int | None = None) -> dict[str, Any]:
        return self.saw(self.client.events(self.room, token=self.token, from_version=from_version, limit=limit))

    def scores(self) -> dict[str, int]:
        return self.client.scores(self.room)

    def summary(self) -> dict[str, Any]:
        return self.saw(self.client.room(self.room))

    def follow(self, from_version: int = 1, *, idle_timeout_s: float | None = None,
               reconnect: bool = True) -> Iterator[dict[str, Any]]:
        for message in self.client.follow(self.room, token=self.token, from_version=from_version,
                                          idle_timeout_s=idle_timeout_s, reconnect=reconnect):
            yield self.saw(message)


def _seg(value: str) -> str:
    return quote(value, safe="")


def _retry_after(response: httpx.Response) -> float | None:
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(response.headers.get("Retry-After")))
    return None


def _json_or_empty(text: str) -> dict[str, Any]:
    with contextlib.suppress(ValueError):
        value = json.loads(text)
        if isinstance(value, dict):
            return value
    return {}


def _error_of(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(response.status_code, str(body.get("code", f"http_{response.status_code}")),
                    str(body.get("message", response.text[:300])), body.get("field"), body,
                    _retry_after(response))
