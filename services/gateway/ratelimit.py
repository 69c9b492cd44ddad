"""Rate limits kept in Redis (fixed windows), so every gateway on the store shares them.

Two limits, both settings (services/settings.py): ALMANAC_RATE_ANON per client address on the routes that
need no token (POST /rooms, POST /rooms/{room}/join), ALMANAC_RATE_COMMANDS per seat on commands (and
ending a room). The engine never checks a limit: what the gateway let through is decided as before.

A seat is a token's room and player, not the token: a seat can hold many valid tokens (every join replayed
with its command id mints one, with a new ``iat``), and keyed by token string each of them had a limit of its
own (one seat got 15 commands through a limit of 5/s).

- A player token is bound to one room, so its seat's counter lives in that room's shard (``Keys.seat_rate``) and
  is counted by the command's own submit: ONE script counts the window and appends the command only when
  under the limit (``bus.submit`` with a ``bus.RateLimit``): no round trip of its own on the hot path, and
  its Retry-After is the window's remaining time. A request refused before its submit (invalid, 404, 403
  not_seated) is counted on its own (``bus.count``), as every request with a valid token always was.
- A resend of a command already decided (same seat, same command id) is never counted nor refused: the submit
  script finds its outcome in the same step and answers that (``bus.AlreadyDecided``; the engine's ordered write
  does the same), and a window seen used up (``UsedWindows``) looks it up before its 429
  (``api_rooms._admitted_command``, ``Gateway.decided``: one bounded read). Only a decided id is free: one in
  flight, refused or another seat's is counted as new, so no id gets a seat past its limit.
- Addresses, and auditors (valid in every room, so no one shard holds their counter), go through the
  `limits` library: its INCRBY+EXPIRE script on a single key (one slot, so it runs as it is on a Redis
  Cluster), Retry-After = the window's length (an upper bound, rather than a second round trip for the TTL).

Bot seats asked for by an anonymous client (a create's ``bots``; a player's POST /rooms/{room}/bots) are counted
per client address too, in an hour's window, at most ``bot_seats_per_address`` (a hundredth of
ALMANAC_MAX_BOT_SEATS, no new setting): a room whose seat never ends holds its bot seats for good, and without this
one address could take the deployment's every seat and leave everyone else 429 ``bot_seats_full``.
"""

from __future__ import annotations

import hashlib
import math
import time

import limits
import redis.asyncio as aioredis
from limits.aio.storage import RedisStorage
from limits.aio.strategies import FixedWindowRateLimiter
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
    TimeoutError as RedisTimeoutError,
)

from almanac.services.bus import RateLimit
from almanac.services.gateway.auth import Claims
from almanac.services.gateway.errors import ApiError
from almanac.services.logging import get_logger
from almanac.services.redis_client import CLUSTER_ERRORS
from almanac.services.settings import Settings, parse_rate
from almanac.storage.keys import Keys, ratelimit_prefix

log = get_logger("almanac.gateway.ratelimit")
# Seat windows remembered as used up, at most (past it the ended ones go, then the oldest half).
USED_WINDOWS_CAP = 100_000
# A room hands at most this many seats to bots (services/gateway/schemas.py): one address may always ask for one room's.
ROOM_BOT_SEATS = 16


def bot_seats_per_address(max_bot_seats: int) -> int:
    """The bot seats one client address may ask for in an hour: a hundredth of ALMANAC_MAX_BOT_SEATS (100 of the
    default 10,000: a hundred addresses to fill it, each for an hour of asking), at least one room's worth."""
    return max(ROOM_BOT_SEATS, max_bot_seats // 100)


class UsedWindows:
    """Seat windows this gateway saw used up, until they end: a seat that keeps sending past its limit is
    refused here, before its body is read (its token known verified: ``Gateway.known_claims``), and without a
    round trip.

    The answer is the one the submit script would give: a fixed window only fills up until it ends, so a
    refusal holds for the rest of it, and a request refused here need not be counted (counting it changes
    neither the window's end nor any later answer). Without this, every refused request still cost a full
    request (token check, body decoding, the script's round trip): one client over its limit could use up
    a gateway's core refusing it.
    """

    def __init__(self, cap: int = USED_WINDOWS_CAP) -> None:
        self.cap = cap
        self._until: dict[str, float] = {}  # room + RateLimit.key (_used_key) -> monotonic end of its window

    def note(self, key: str, retry_ms: int) -> None:
        now = time.monotonic()
        if len(self._until) >= self.cap and key not in self._until:
            self._prune(now)
        self._until[key] = now + retry_ms / 1000

    def remaining_ms(self, key: str) -> int | None:
        """What is left of the window (ms) when it is known to be used up; None otherwise."""
        until = self._until.get(key)
        if until is None:
            return None
        left = until - time.monotonic()
        if left <= 0:
            del self._until[key]
            return None
        return math.ceil(left * 1000)

    def __len__(self) -> int:
        return len(self._until)

    def _prune(self, now: float) -> None:
        self._until = {key: until for key, until in self._until.items() if until > now}
        if len(self._until) >= self.cap:  # all still running: the oldest half goes (they are asked again)
            keep = list(self._until.items())[len(self._until) // 2:]
            self._until = dict(keep)


class ProcessClientStorage(RedisStorage):
    """The `limits` library's Redis storage (its INCRBY+EXPIRE script on one key, which runs as it is on a Redis
    Cluster) on a client the process already has, instead of one it would build from a URL.

    ``RedisStorage.__init__`` builds its client in ``configure_bridge`` (a ``Redis``, or for ``RedisClusterStorage``
    a plain ``RedisCluster`` from the node list) and then registers its scripts on the bridge's connection: here
    the bridge is handed the process's client instead. On a Cluster that matters beyond the connections: redis-py's
    plain Cluster client cuts every node's connections when one node dies, which failed every rate check (503)
    during a failover (services.redis_client.FailoverCluster), which also runs the count's script by its text
    on a node that does not know it (a replica just promoted).
    """

    def __init__(self, client: aioredis.Redis, key_prefix: str) -> None:
        self._client = client
        super().__init__("async+redis://", implementation="redispy", key_prefix=key_prefix)

    def configure_bridge(self) -> None:
        self.bridge.storage = self._client
        self.bridge.connection_getter = lambda _readonly: self._client


class RateLimits:
    def __init__(self, settings: Settings, client: aioredis.Redis, keys: Keys) -> None:
        self.anon = _item(settings.rate_anon)
        self.commands = _item(settings.rate_commands)
        self.bot_seats = limits.RateLimitItemPerHour(bot_seats_per_address(settings.max_bot_seats))
        self.keys = keys  # the gateway's own (services.bootstrap)
        self.used = UsedWindows()
        # (room, player) -> the seat's limit: asked twice per command (``known_refusal``, ``seat_limit``), and its
        # digest and key name are the same every time. Bounded: cleared when full (rebuilt at ~2 us a seat).
        self._seat_limits: dict[tuple[str, str], RateLimit] = {}
        # limits' counters run on the process's own client (services.bootstrap: one client per process, a
        # FailoverCluster on a Cluster): no client of the library's own, so no connection of its own either.
        self._limiter = FixedWindowRateLimiter(ProcessClientStorage(client, ratelimit_prefix(keys.prefix)))

    async def check_address(self, address: str) -> None:
        """429 when this client address has used up ALMANAC_RATE_ANON."""
        if self.anon is not None and not await self._hit(self.anon, "anon", address):
            raise _limited(self.anon, "ALMANAC_RATE_ANON", "this address")

    async def check_bot_seats(self, address: str, seats: int) -> None:
        """429 ``bot_seats_rate_limited`` (field ``bots``, Retry-After: the window's rest) when this client address
        would ask for more than ``bot_seats_per_address`` bot seats in the hour; a refused ask counts too."""
        if seats <= 0 or await self._hit(self.bot_seats, "bot_seats", address, cost=seats):
            return
        try:
            reset = (await self._limiter.get_window_stats(self.bot_seats, "bot_seats", address)).reset_time
            retry_s = max(1, math.ceil(reset - time.time()))
        except (RedisConnectionError, RedisTimeoutError, *CLUSTER_ERRORS):
            retry_s = self.bot_seats.get_expiry()
        amount = self.bot_seats.amount
        raise ApiError(429, "bot_seats_rate_limited", f"this address would ask for more than {amount} bot seats "
                       "this hour (a hundredth of ALMANAC_MAX_BOT_SEATS); create without bots, or retry "
                       "after the Retry-After seconds", "bots", limit=str(self.bot_seats),
                       headers={"Retry-After": str(retry_s)})

    async def check_auditor(self, claims: Claims) -> None:
        """429 when this auditor has used up ALMANAC_RATE_COMMANDS (the `limits` counter, keyed as a seat)."""
        if self.commands is not None and not await self._hit(self.commands, "seat", _seat(claims.room,
                                                                                           claims.player)):
            raise _limited(self.commands, "ALMANAC_RATE_COMMANDS", "this seat")

    async def check_token(self, claims: Claims) -> None:
        """429 when this token's holder (any role) has used up ALMANAC_RATE_COMMANDS on a heavy request that is not
        a command (POST /bundles/verify): the same `limits` counter as ``check_auditor``, keyed by room and player."""
        await self.check_auditor(claims)

    def seat_limit(self, room: str, player: str) -> RateLimit | None:
        """ALMANAC_RATE_COMMANDS for the seat ``player`` of ``room`` (every token it holds), counted in the
        room's shard by the submit script (None when the limit is off)."""
        if self.commands is None:
            return None
        limit = self._seat_limits.get((room, player))
        if limit is None:
            if len(self._seat_limits) >= USED_WINDOWS_CAP:
                self._seat_limits.clear()
            limit = self._seat_limits[room, player] = RateLimit(self.keys.seat_rate(room, _seat(room, player)),
                                                                 self.commands.amount, self.commands.get_expiry() * 1000)
        return limit

    def token_refusal(self, retry_ms: int, room: str | None = None, limit: RateLimit | None = None) -> ApiError:
        """The 429 of a used-up seat window, Retry-After = the window's remaining whole seconds; with the
        ``room`` and ``limit`` that were refused, the window is remembered as used up until it ends
        (``UsedWindows``)."""
        assert self.commands is not None
        if room is not None and limit is not None:
            self.used.note(_used_key(room, limit), retry_ms)
        return _limited(self.commands, "ALMANAC_RATE_COMMANDS", "this seat", max(1, math.ceil(retry_ms / 1000)))

    def known_refusal(self, room: str, player: str) -> ApiError | None:
        """The 429 for a seat whose window this gateway already saw used up (no round trip); else None."""
        if self.commands is None or not self.used:
            return None
        limit = self.seat_limit(room, player)
        left = None if limit is None else self.used.remaining_ms(_used_key(room, limit))
        return None if left is None else self.token_refusal(left)

    async def _hit(self, item: limits.RateLimitItem, *identifiers: str, cost: int = 1) -> bool:
        """The limiter's answer; True (not limited) when its counter's node cannot be reached.

        On a Cluster the counter lives on whichever node its key hashes to, not the room's: while that
        node fails over, refusing would turn away commands for rooms on live nodes. The request goes on
        to the store, which refuses (503) whatever it cannot take.
        """
        try:
            return await self._limiter.hit(item, *identifiers, cost=cost)
        except (RedisConnectionError, RedisTimeoutError, *CLUSTER_ERRORS) as error:
            log.warning("rate_limit.unavailable", error=type(error).__name__)
            return True


def _used_key(room: str, limit: RateLimit) -> str:
    return f"{room}\0{limit.key}"


def _item(text: str) -> limits.RateLimitItem | None:
    rate = parse_rate(text)
    return None if rate is None else limits.parse(rate)


def _seat(room: str, player: str) -> str:
    # A digest keys the counter: neither name goes into a key name as it is (any length, any character).
    return hashlib.blake2b(f"{room}\0{player}".encode(), digest_size=12).hexdigest()


def _limited(item: limits.RateLimitItem, setting: str, who: str, retry_s: int | None = None) -> ApiError:
    window_s = item.get_expiry()
    return ApiError(
        429, "rate_limited",
        f"{who} has sent more than {item.amount} requests per {window_s} s ({setting}); retry after the "
        "Retry-After seconds",
        limit=str(item), headers={"Retry-After": str(window_s if retry_s is None else retry_s)},
    )
