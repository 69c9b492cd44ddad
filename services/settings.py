"""Settings from the environment (pydantic-settings), validated at start with one clear line per bad value."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

# The one place that knows how long an HS256 key must be (RFC 7518 3.2); the signer refuses shorter ones too.
MIN_SECRET_BYTES = 32

_LOG_LEVELS = {"debug", "info", "warning", "error"}
_PROBLEM = "almanac_setting"  # the error type of our own checks: their message is the whole line
# The gateway's bounds derived from its in-flight limit (ALMANAC_GATEWAY_MAX_INFLIGHT): outcome waits per command
# slot, and command slots per heavy read (``Settings.max_outcome_waiters``, ``Settings.gateway_max_heavy_reads``).
OUTCOME_WAITERS_PER_SLOT = 32
SLOTS_PER_HEAVY_READ = 16


class SettingsError(Exception):
    """One or more environment settings are invalid; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _env(name: str, default: Any, **options: Any) -> Any:
    """A setting read from the environment variable ``name`` (its alias; the field name works in code too)."""
    return Field(default, validation_alias=name, **options)


class Settings(BaseSettings):
    """Every setting of every service; frozen, read by attribute. Build it with ``load_settings``."""

    # Exact names (no prefix, case-sensitive), an empty variable means unset, other variables are ignored;
    # no .env file and no secrets directory: the process environment is the one source.
    model_config = SettingsConfigDict(frozen=True, case_sensitive=True, env_ignore_empty=True, extra="ignore",
                                      populate_by_name=True)

    redis_url: str | None = _env("REDIS_URL", None)
    # True when REDIS_URL names a node of a Redis Cluster (the client then routes by hash tag); with it,
    # REDIS_URL may name several seed nodes separated by commas (the client starts while any one answers).
    redis_cluster: bool = _env("REDIS_CLUSTER", False)
    shard_count: int = _env("ALMANAC_SHARDS", 16)
    data_dir: str = _env("ALMANAC_DATA_DIR", ".almanac")
    snapshot_every: int = _env("ALMANAC_SNAPSHOT_EVERY", 100)
    log_format: Literal["auto", "json", "console"] = _env("ALMANAC_LOG_FORMAT", "auto")
    log_level: str = _env("ALMANAC_LOG_LEVEL", "info")
    # Engine
    # The shards this process leases and decides: "all", "0,1,5", "index/count" of a group (e.g. "0/2"), or
    # "none". The deployment shape (docs/architecture.md, "The deployment shape"): every gateway runs the shard
    # engine and decides the commands of the shards it holds itself, without the command stream
    # (Engine.decide_here); the others go through their shard's stream to its holder (on a Redis Cluster every
    # command does). It cost about a fifth less CPU per command than separate engine processes, same run
    # (docs/capacity.md, "The deployment shape"). "none": a gateway that holds no shard, in front of
    # `almanac engine` processes that hold them (the same engine without HTTP): a layout, not another mode.
    engine_shards: str = _env("ALMANAC_ENGINE_SHARDS", "all")
    engine_name: str = _env("ALMANAC_ENGINE_NAME", "")
    lease_ms: int = _env("ALMANAC_LEASE_MS", 5_000)
    batch_size: int = _env("ALMANAC_BATCH_SIZE", 100)
    max_attempts: int = _env("ALMANAC_MAX_ATTEMPTS", 3)
    # When an append counts as done (and its outcome is answered): "memory" (Redis memory; the embedded Redis
    # runs without AOF), "aof" (the embedded Redis appends to its AOF, fsync every second), "replica" (the
    # engine's append pipeline ends with WAIT 1: no outcome before one replica has the events).
    durability: Literal["memory", "aof", "replica"] = _env("ALMANAC_DURABILITY", "aof")
    # Consumed entries of the shard command streams (acknowledged by the engine) and feeds (applied by the
    # projector) are trimmed once older than this (storage.retention); the room event streams never are.
    stream_retain_s: int = _env("ALMANAC_STREAM_RETAIN_S", 300)
    # The feeds also keep what the webhook notifier has not noticed yet, while its cursor is younger than this: a
    # notifier stopped this long misses nothing; one gone for good holds the feeds (Redis memory) this long at most.
    notifier_hold_s: int = _env("ALMANAC_NOTIFIER_HOLD_S", 3600)
    # The archive tier (storage.archive, services.archiver): where finished rooms' objects go (a URL obstore
    # knows: file://, s3://, gs://, az://; unset: the data directory's archive/ folder), whether `almanac up` runs
    # the archiver, how long a room stays in Redis after it ends and how long a command's dedupe record stays
    # (a resend within this window is answered from the record; later from the room's id index while the room is
    # in Redis, from the archived room's own records once it is archived: never decided twice), and how often
    # the archiver looks for finished rooms.
    archive_url: str | None = _env("ALMANAC_ARCHIVE_URL", None)
    archiver: bool = _env("ALMANAC_ARCHIVER", True)
    dedupe_retain_s: int = _env("ALMANAC_DEDUPE_RETAIN", 60)
    archiver_interval_s: float = _env("ALMANAC_ARCHIVER_INTERVAL_S", 2.0)
    # Seconds a room still being played may go without an event (refusals do not count) before the archiver moves
    # it to the archive too; a command the rules accept brings it back before it is applied, one they refuse is
    # recorded with the room left there (storage.restore). 0: off, the default: bringing a
    # room back costs its first command an object read and a fold, a latency a deployment opts into with a
    # window that fits its games (docs/archive.md, "Idle rooms").
    archive_idle_after_s: int = _env("ALMANAC_ARCHIVE_IDLE_AFTER", 0)
    # The engine (or the gateway deciding its own shards) runs the clock of the shards it holds: the
    # rule-sets' deadlines (realm's season timeout) fire by themselves (services/clock.py). Off: only a
    # player's command ends a timed-out season.
    clock: bool = _env("ALMANAC_CLOCK", True)
    # Projector: after a batch that filled no read, wait this long (ms) so that events gather into fewer,
    # larger commits (less CPU for the projector and Redis; read models lag by up to this much more).
    projector_gather_ms: int = _env("ALMANAC_PROJECTOR_GATHER_MS", 100)
    # Gateway
    http_host: str = _env("ALMANAC_HTTP_HOST", "127.0.0.1")
    http_port: int = _env("ALMANAC_HTTP_PORT", 8000)
    secret: str = _env("ALMANAC_SECRET", "", repr=False)  # kept out of reprs and logs
    token_ttl_s: int = _env("ALMANAC_TOKEN_TTL_S", 86_400)
    # Checkpoints (docs/bundle-format.md): Ed25519 signing keys as hex 32-byte seeds separated by commas, the
    # first one active, the others retired but still published; unset: one generated into the data directory.
    signing_keys: str = _env("ALMANAC_SIGNING_KEYS", "", repr=False)
    # Public keys (hex) of retired keys whose private half is gone: published so old checkpoints still verify.
    retired_public_keys: str = _env("ALMANAC_RETIRED_PUBLIC_KEYS", "")
    # The commitment secret that salts every event's hiding commitment (hex, 32 bytes); unset: generated.
    commit_secret: str = _env("ALMANAC_COMMIT_SECRET", "", repr=False)
    command_timeout_ms: int = _env("ALMANAC_COMMAND_TIMEOUT_MS", 5_000)
    max_body_bytes: int = _env("ALMANAC_MAX_BODY_BYTES", 65_536)
    # Overload (services/gateway/overload.py): one policy, two settings, this one and ALMANAC_GATEWAY_TARGET_WAIT_MS.
    # Commands this gateway process decides at once (past it: 503 overloaded + Retry-After); the process's other
    # bounds of work at once follow from it (``max_outcome_waiters``, ``gateway_max_heavy_reads``). Bounded
    # queues: overload is refused, not queued. 32, not 64: past capacity the accepted commands' p99 follows it
    # (Little's law, docs/capacity.md). Not 16, even in a gateway that decides its own commands, where 16 halves
    # that p99: it also refused commands at a quarter of capacity whenever the machine stalled for a moment
    # (docs/capacity.md, eighth pass).
    gateway_max_inflight: int = _env("ALMANAC_GATEWAY_MAX_INFLIGHT", 32)
    # ... and refused while the commands' waits show a standing queue (overload.StandingQueue, CoDel's test):
    # every command that finished within the last 100 ms waited longer than this (ms; 0 = off) beyond the
    # service's own wait, with 8 or more in flight. With the in-flight limit above, the whole admission policy.
    gateway_target_wait_ms: int = _env("ALMANAC_GATEWAY_TARGET_WAIT_MS", 20)
    # HTTP connections (services/gateway/connection_guard.py): a request's head (request line and headers) over this
    # many bytes, or with more headers than this, is refused 431 and its connection closed; a connection that
    # has not delivered a whole request within the read timeout (ms) of opening or of its previous answer is
    # closed (silent sockets and slow drips would otherwise hold a file descriptor each, forever).
    http_max_head_bytes: int = _env("ALMANAC_HTTP_MAX_HEAD_BYTES", 16_384)
    http_max_headers: int = _env("ALMANAC_HTTP_MAX_HEADERS", 100)
    http_read_timeout_ms: int = _env("ALMANAC_HTTP_READ_TIMEOUT_MS", 10_000)
    # The proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (comma-separated addresses or
    # networks, "*" for any); empty = none: the client address is the TCP peer's, whoever sends the header.
    trusted_proxies: str = _env("ALMANAC_TRUSTED_PROXIES", "")
    # Live feeds (WebSocket): open at once per seat (a token's role, room and player: every token of that seat
    # together; auditors, whose tokens share one seat, have none), per client address (the TCP peer's, or the
    # forwarded one from a trusted proxy) and per gateway process; past them the feed is refused (close 4429 /
    # 4503). Every feed is served from the gateway's one shared read of the shard feeds, never from a Redis
    # connection of its own.
    live_max_feeds_per_seat: int = _env("ALMANAC_LIVE_MAX_FEEDS_PER_SEAT", 4)
    live_max_feeds_per_address: int = _env("ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS", 64)
    live_max_feeds: int = _env("ALMANAC_LIVE_MAX_FEEDS", 2_000)
    # The gateway's Redis connections: at most this many; a request waits up to ALMANAC_REDIS_POOL_WAIT_MS for
    # a free one, then 503 overloaded (a pool never grows with the load); unused ones close after
    # ALMANAC_REDIS_IDLE_S (0: kept). One Redis only: redis-py's Cluster client leaks a connection per failed send,
    # so a cap there pinned a dead primary's shards after a failover (services/redis_client.connect).
    redis_max_connections: int = _env("ALMANAC_REDIS_MAX_CONNECTIONS", 128)
    redis_pool_wait_ms: int = _env("ALMANAC_REDIS_POOL_WAIT_MS", 1_000)
    redis_idle_s: int = _env("ALMANAC_REDIS_IDLE_S", 60)
    # Browser origins allowed to call the API from other sites (comma-separated, "*" for any); empty = off.
    cors_origins: str = _env("ALMANAC_CORS_ORIGINS", "")
    # Rate limits (services/gateway/ratelimit.py): "N/second", "N per minute", a bare N (per second), or "off".
    # Per client address on POST /rooms and POST /rooms/{room}/join; per seat (room and player) on commands and end.
    # What one client can add to Redis is bounded by them (a room ~10 KB, a refused command ~880 B until the room is
    # archived): a person creates and joins rooms far below a room a second, and sends a command a second or two.
    # The suite and the benchmarks set their own (tests/conftest.py, `almanac bench`).
    rate_anon: str = _env("ALMANAC_RATE_ANON", "60/minute")
    rate_commands: str = _env("ALMANAC_RATE_COMMANDS", "20/second")
    # Webhooks (services/notifier.py): attempts per delivery before the dead-letter list, the longest wait
    # between attempts (the back-off doubles from 0.5 s up to it), a receiver's time to answer, and
    # deliveries in flight at once.
    webhook_max_attempts: int = _env("ALMANAC_WEBHOOK_MAX_ATTEMPTS", 12)
    webhook_backoff_max_s: int = _env("ALMANAC_WEBHOOK_BACKOFF_MAX_S", 300)
    webhook_timeout_s: int = _env("ALMANAC_WEBHOOK_TIMEOUT_S", 10)
    webhook_concurrency: int = _env("ALMANAC_WEBHOOK_CONCURRENCY", 64)
    # How long before a pending deadline (services/clock.py) its room's seats hear `deadline_soon`; 0: never.
    webhook_deadline_warning_s: int = _env("ALMANAC_WEBHOOK_DEADLINE_WARNING_S", 600)
    # Bot seats (services/bots.py) the deployment holds at most: a create whose ``bots`` would pass it is refused
    # (429 ``bot_seats_full``), since any player may hand up to 16 seats per room to the bots process.
    max_bot_seats: int = _env("ALMANAC_MAX_BOT_SEATS", 10_000)
    # The gateway the bots process (`almanac bots`) plays every bot seat through, by its public HTTP API (a seat's
    # view, its join and its commands); empty: this host's (http://ALMANAC_HTTP_HOST:ALMANAC_HTTP_PORT).
    bots_gateway_url: str = _env("ALMANAC_BOTS_GATEWAY_URL", "")

    @property
    def max_outcome_waiters(self) -> int:
        """Outcome waits one gateway process holds at once (every submit path; past it 503 overloaded):
        ``OUTCOME_WAITERS_PER_SLOT`` per command slot. The in-flight limit bounds the commands; this bound is the
        backstop for the waits it does not count (resends of decided commands, admitted past the limit to be
        answered their stored outcome), so it sits far above the limit: 1,024 at the default 32."""
        return OUTCOME_WAITERS_PER_SLOT * self.gateway_max_inflight

    @property
    def gateway_max_heavy_reads(self) -> int:
        """Reads that fold or re-decide a whole room (/series, /verification, explain, bisect, audit views, dispute
        bundles, bundle checks) one gateway process runs at once, off its event loop (gateway.heavy_reads); past
        it 503 overloaded + Retry-After at once, never queued: one per ``SLOTS_PER_HEAVY_READ`` command slots, at
        least one (2 at the default 32). One such read costs the CPU of hundreds of commands, so a process that
        takes on fewer commands at once takes on fewer of them too."""
        return max(1, self.gateway_max_inflight // SLOTS_PER_HEAVY_READ)

    @field_validator("shard_count", "snapshot_every", "lease_ms", "batch_size", "max_attempts", "token_ttl_s",
                     "command_timeout_ms", "max_body_bytes", "gateway_max_inflight", "http_max_head_bytes", "http_max_headers", "http_read_timeout_ms",
                     "live_max_feeds_per_seat", "live_max_feeds_per_address", "live_max_feeds",
                     "webhook_max_attempts", "webhook_backoff_max_s", "webhook_timeout_s", "webhook_concurrency",
                     "redis_max_connections", "redis_pool_wait_ms", "max_bot_seats")
    @classmethod
    def _positive(cls, value: int, info: ValidationInfo) -> int:
        if value <= 0:
            raise _problem(info, f"{value!r} is not valid: must be a positive whole number")
        return value

    @field_validator("gateway_target_wait_ms", "stream_retain_s", "notifier_hold_s",
                     "projector_gather_ms", "redis_idle_s", "dedupe_retain_s", "archive_idle_after_s",
                     "webhook_deadline_warning_s")
    @classmethod
    def _not_negative(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 0:
            raise _problem(info, f"{value!r} is not valid: must be 0 (off) or a positive whole number")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str, info: ValidationInfo) -> str:
        if value.lower() not in _LOG_LEVELS:
            raise _problem(info, f"{value!r} is not valid: use one of {sorted(_LOG_LEVELS)}")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        # Several nodes separated by commas are a Cluster's seed nodes (services.redis_client.connect).
        for part in [] if value is None else value.split(","):
            if not part.strip().startswith(("redis://", "rediss://", "unix://")):
                raise _problem(info, f"{value!r} is not valid: it must start with redis://, rediss:// or unix:// "
                                     "(several Cluster nodes: separated by commas, each with its scheme)")
        return value

    @field_validator("bots_gateway_url")
    @classmethod
    def _bots_gateway_url(cls, value: str, info: ValidationInfo) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise _problem(info, f"{value!r} is not valid: it must start with http:// or https:// (the gateway's "
                                 "URL, e.g. http://gateway:8000), or be empty for this host's gateway")
        return value.rstrip("/")

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str, info: ValidationInfo) -> str:
        if value and len(value.encode()) < MIN_SECRET_BYTES:
            # Never echo the secret itself.
            raise _problem(info, f"is not valid: it must be at least {MIN_SECRET_BYTES} bytes (an HS256 key, "
                                 "RFC 7518 3.2), e.g. openssl rand -hex 32; or leave it unset to generate one",
                           show_value=False)
        return value

    @field_validator("signing_keys", "retired_public_keys", "commit_secret")
    @classmethod
    def _hex_keys(cls, value: str, info: ValidationInfo) -> str:
        # Each part 32 bytes as 64 hex digits (docs/bundle-format.md); never echo a secret.
        parts = [part.strip() for part in value.split(",")] if value else []
        several = info.field_name != "commit_secret"
        if (not several and len(parts) > 1) or any(len(p) != 64 or not all(c in "0123456789abcdefABCDEF" for c in p)
                                                   for p in parts):
            what = "comma-separated keys, each" if several else "it"
            raise _problem(info, f"is not valid: {what} must be 32 bytes as 64 hex digits (openssl rand -hex 32); "
                                 "or leave it unset to generate one into the data directory", show_value=False)
        return value

    @field_validator("rate_anon", "rate_commands")
    @classmethod
    def _rate(cls, value: str, info: ValidationInfo) -> str:
        try:
            parse_rate(value)
        except ValueError as error:
            raise _problem(info, f"{value!r} is not valid: {error}") from None
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: str, info: ValidationInfo) -> str:
        for part in value.split(",") if value.strip() else []:
            entry = part.strip()
            try:
                if entry != "*":
                    ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise _problem(info, f"{value!r} is not valid: {entry!r} is not an IP address or network "
                                     '(e.g. 10.0.0.5,10.1.0.0/16, or * for any)') from None
        return value

    @field_validator("engine_shards")
    @classmethod
    def _engine_shards(cls, value: str, info: ValidationInfo) -> str:
        # shard_count is declared first, so it is validated first (16 when it was itself invalid)
        try:
            parse_shard_selection(value, info.data.get("shard_count", 16))
        except ValueError as error:
            raise _problem(info, f"{value!r} is not valid: {error}") from None
        return value


_ENV = {name: str(field.validation_alias) for name, field in Settings.model_fields.items()}
_FIELD = {variable: name for name, variable in _ENV.items()}


def _problem(info: ValidationInfo, text: str, show_value: bool = True) -> PydanticCustomError:
    """Our own check's error, already worded as the line the operator reads."""
    variable = _ENV[str(info.field_name)]
    line = f"{variable}={text}" if show_value else f"{variable} {text}"
    return PydanticCustomError(_PROBLEM, "{line}", {"line": line})


def _allowed(field: str) -> str:
    """What a setting accepts, in words."""
    annotation = str(Settings.model_fields[field].annotation)
    if "int" in annotation and "Literal" not in annotation:
        return "use a whole number"
    if "bool" in annotation:
        return "use true or false"
    if "Literal[" in annotation:
        choices = annotation[annotation.index("Literal[") + len("Literal["):annotation.rindex("]")]
        return f"use one of: {choices.replace(chr(39), '')}"
    return f"expected {annotation}"


class _Environ(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (tests, `almanac up`'s children)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(Settings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


# Settings that no longer exist, and what took their place: a deployment that still sets one is refused at start,
# one line each, rather than silently run with a bound its operator thinks they chose.
RETIRED = {
    "ALMANAC_MAX_OUTCOME_WAITERS": "derived now: 32 outcome waits per ALMANAC_GATEWAY_MAX_INFLIGHT slot",
    "ALMANAC_GATEWAY_MAX_HEAVY_READS": "derived now: one whole-room read per 16 ALMANAC_GATEWAY_MAX_INFLIGHT slots",
    # The admission rules that went when overload became one policy of two settings (docs/capacity.md).
    "ALMANAC_GATEWAY_MAX_LAG_MS": "gone with the loop-lag rule: admission is ALMANAC_GATEWAY_MAX_INFLIGHT and "
                                  "ALMANAC_GATEWAY_TARGET_WAIT_MS",
    "ALMANAC_GATEWAY_WAIT_INTERVAL_MS": "gone with the adaptive limit: admission is ALMANAC_GATEWAY_MAX_INFLIGHT and "
                                        "ALMANAC_GATEWAY_TARGET_WAIT_MS",
    "ALMANAC_GATEWAY_LIMIT_WAIT_MS": "gone with the adaptive limit: admission is ALMANAC_GATEWAY_MAX_INFLIGHT and "
                                     "ALMANAC_GATEWAY_TARGET_WAIT_MS",
    # Refused whatever its value: "false" silently ignored would make an HTTP-only gateway lease every shard.
    "ALMANAC_GATEWAY_ENGINE": "every gateway decides the commands of the shards it holds now; a gateway in front of "
                              "`almanac engine` processes holds none: ALMANAC_ENGINE_SHARDS=none",
}


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Settings from ``environ`` (default ``os.environ``), then ``overrides`` (field names; None = not
    given); raises SettingsError listing every bad value, one line each."""
    environ = os.environ if environ is None else environ
    retired = [f"{name} is no longer a setting ({why}): remove it" for name, why in RETIRED.items() if environ.get(name)]
    if retired:
        raise SettingsError(retired)
    values: dict[str, object] = dict(_Environ(environ)())
    values.update({_ENV[field]: value for field, value in overrides.items() if value is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as error:
        raise SettingsError([_line(problem) for problem in error.errors()]) from None


def _line(problem: Any) -> str:
    if problem["type"] == _PROBLEM:
        return problem["ctx"]["line"]
    name = str(problem["loc"][0])
    field = _FIELD.get(name, name)
    return f"{_ENV.get(field, name)}={problem['input']!r} is not valid: {_allowed(field)}"


def parse_rate(text: str) -> str | None:
    """A rate limit in the `limits` notation ("100/second", "20 per minute"), a bare N (per second), or
    None for "off"; ValueError names what is accepted."""
    import limits  # noqa: PLC0415 - 130 ms to import; only the gateway and a given rate setting need it

    text = text.strip().lower()
    if text == "off":
        return None
    if text.isdigit():
        text = f"{text}/second"
    try:
        item = limits.parse(text)
    except ValueError:
        item = None
    if item is None or item.amount < 1:
        raise ValueError('use "N/second", "N per minute" (N at least 1), a bare N per second, or off')
    return text


def parse_shard_selection(text: str, shard_count: int) -> list[int]:
    """"all" -> every shard; "0,3,5" -> those; "i/n" -> shards s with s % n == i (worker i of n); "none" -> no
    shard (a gateway in front of `almanac engine` processes: it leases and decides nothing itself)."""
    text = text.strip()
    if text == "all":
        return list(range(shard_count))
    if text == "none":
        return []
    if "/" in text:
        index_text, _, count_text = text.partition("/")
        if not (index_text.isdigit() and count_text.isdigit()) or int(count_text) == 0:
            raise ValueError("use index/count with whole numbers, e.g. 0/2")
        index, count = int(index_text), int(count_text)
        if index >= count:
            raise ValueError(f"worker index {index} must be below the group size {count}")
        return [s for s in range(shard_count) if s % count == index]
    shards = []
    for part in text.split(","):
        if not part.strip().isdigit() or int(part) >= shard_count:
            raise ValueError(f"{part!r} is not a shard number from 0 to {shard_count - 1} (or use all, none, "
                             "or index/count)")
        shards.append(int(part))
    return sorted(set(shards))
