"""Settings from the environment, validated at start with one clear line per bad value."""

from __future__ import annotations

import os
from typing import Literal

import msgspec

# The one place that knows how long an HS256 key must be (RFC 7518 3.2); the signer refuses shorter ones too.
MIN_SECRET_BYTES = 32


class SettingsError(Exception):
    """One or more environment settings are invalid; ``problems`` has one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    redis_url: str | None = None
    # True when REDIS_URL names a node of a Redis Cluster (the client then routes by hash tag).
    redis_cluster: bool = False
    shard_count: int = 16
    data_dir: str = ".almanac"
    snapshot_every: int = 100
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: str = "info"
    # Engine
    engine_shards: str = "all"  # "all", "0,1,5", or "index/count" of a worker group (e.g. "0/2")
    engine_name: str = ""
    lease_ms: int = 5_000
    batch_size: int = 100
    max_attempts: int = 3
    # Gateway
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    secret: str = ""
    token_ttl_s: int = 86_400
    command_timeout_ms: int = 5_000
    max_body_bytes: int = 65_536
    # Browser origins allowed to call the API from other sites (comma-separated, "*" for any); empty = off.
    cors_origins: str = ""
    # Rate limits (services/gateway/ratelimit.py): "N/second", "N per minute", a bare N (per second), or "off".
    # Per client address on POST /rooms and POST /rooms/{room}/join; per token on commands and end.
    rate_anon: str = "1000/second"
    rate_commands: str = "1000/second"


_ENV = {
    "redis_url": "REDIS_URL",
    "redis_cluster": "REDIS_CLUSTER",
    "shard_count": "ALMANAC_SHARDS",
    "data_dir": "ALMANAC_DATA_DIR",
    "snapshot_every": "ALMANAC_SNAPSHOT_EVERY",
    "log_format": "ALMANAC_LOG_FORMAT",
    "log_level": "ALMANAC_LOG_LEVEL",
    "engine_shards": "ALMANAC_ENGINE_SHARDS",
    "engine_name": "ALMANAC_ENGINE_NAME",
    "lease_ms": "ALMANAC_LEASE_MS",
    "batch_size": "ALMANAC_BATCH_SIZE",
    "max_attempts": "ALMANAC_MAX_ATTEMPTS",
    "http_host": "ALMANAC_HTTP_HOST",
    "http_port": "ALMANAC_HTTP_PORT",
    "secret": "ALMANAC_SECRET",
    "token_ttl_s": "ALMANAC_TOKEN_TTL_S",
    "command_timeout_ms": "ALMANAC_COMMAND_TIMEOUT_MS",
    "max_body_bytes": "ALMANAC_MAX_BODY_BYTES",
    "cors_origins": "ALMANAC_CORS_ORIGINS",
    "rate_anon": "ALMANAC_RATE_ANON",
    "rate_commands": "ALMANAC_RATE_COMMANDS",
}

_POSITIVE = {"shard_count", "snapshot_every", "lease_ms", "batch_size", "max_attempts", "token_ttl_s",
             "command_timeout_ms", "max_body_bytes"}
_LOG_LEVELS = {"debug", "info", "warning", "error"}


def _allowed(field: str) -> str:
    """What a setting accepts, in words."""
    annotation = str(Settings.__annotations__[field])
    if annotation == "int":
        return "use a whole number"
    if annotation == "bool":
        return "use true or false"
    if annotation.startswith("Literal["):
        choices = annotation[len("Literal["):-1].replace("'", "")
        return f"use one of: {choices}"
    return f"expected {annotation}"


def load_settings(environ: dict[str, str] | None = None, **overrides: object) -> Settings:
    """Settings from ``environ`` (default ``os.environ``); raises SettingsError listing every bad value."""
    environ = dict(os.environ if environ is None else environ)
    problems: list[str] = []
    values: dict[str, object] = {}
    for field, variable in _ENV.items():
        raw = environ.get(variable)
        if raw is None or raw == "":
            continue
        try:
            values[field] = getattr(msgspec.convert({field: raw}, Settings, strict=False), field)
        except msgspec.ValidationError:
            problems.append(f"{variable}={raw!r} is not valid: {_allowed(field)}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    for field in _POSITIVE:
        if field in values and int(values[field]) <= 0:  # type: ignore[arg-type]
            problems.append(f"{_ENV[field]}={values[field]!r} is not valid: must be a positive whole number")
    if "log_level" in values and str(values["log_level"]).lower() not in _LOG_LEVELS:
        problems.append(f"ALMANAC_LOG_LEVEL={values['log_level']!r} is not valid: use one of {sorted(_LOG_LEVELS)}")
    url = values.get("redis_url")
    if url is not None and not str(url).startswith(("redis://", "rediss://", "unix://")):
        problems.append(f"REDIS_URL={url!r} is not valid: it must start with redis://, rediss:// or unix://")
    secret = values.get("secret")
    if secret and len(str(secret).encode()) < MIN_SECRET_BYTES:
        # Never echo the secret itself.
        problems.append(f"ALMANAC_SECRET is not valid: it must be at least {MIN_SECRET_BYTES} bytes (an HS256 key, "
                        "RFC 7518 3.2), e.g. openssl rand -hex 32; or leave it unset to generate one")
    for field in ("rate_anon", "rate_commands"):
        if field in values:
            try:
                parse_rate(str(values[field]))
            except ValueError as error:
                problems.append(f"{_ENV[field]}={values[field]!r} is not valid: {error}")
    if "engine_shards" in values:
        try:
            parse_shard_selection(str(values["engine_shards"]), int(values.get("shard_count", 16)))  # type: ignore[arg-type]
        except ValueError as error:
            problems.append(f"ALMANAC_ENGINE_SHARDS={values['engine_shards']!r} is not valid: {error}")
    if problems:
        raise SettingsError(problems)
    return Settings(**values)  # type: ignore[arg-type]


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
    """"all" -> every shard; "0,3,5" -> those; "i/n" -> shards s with s % n == i (worker i of n)."""
    text = text.strip()
    if text == "all":
        return list(range(shard_count))
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
            raise ValueError(f"{part!r} is not a shard number from 0 to {shard_count - 1}")
        shards.append(int(part))
    return sorted(set(shards))
