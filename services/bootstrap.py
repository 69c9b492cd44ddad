"""The composition root: every process's settings, Redis URL, Redis client, key names, store and room loader.

Each entry point (the gateway's app, the engine, the projector, the archiver, the bots, the notifier, the CLI's
commands, the benchmarks) asks this module for what it runs on and builds nothing of it itself, so a process's
Redis options (pool bound, timeouts, retries, Cluster seeds) are written once, here, and a process holds one
``Keys`` (its store's). tests/kernel/test_composition_root.py holds them to it. What differs between processes is
the client's ``Role``:

- ``GATEWAY``: the request path. A bounded pool (ALMANAC_REDIS_MAX_CONNECTIONS; a request waits up to
  ALMANAC_REDIS_POOL_WAIT_MS for a free connection, then 503) and timeouts, so that a Redis that stops answering
  (paused, partitioned) fails requests with 503 after a few seconds instead of holding them forever.
- ``GATEWAY_ENGINE`` (the shard engine every gateway runs) and ``GATEWAY_READS`` (its heavy
  reads' thread): the same timeouts, no bound (each is used by one loop that bounds its own work), so that a
  command a batch took is answered (503) when Redis stops answering, never held for as long as the OS keeps a
  dead connection.
- ``ENGINE``: no timeout and no retry: a lost XREADGROUP answer must reach the engine, which then takes its
  shards over again and re-reads what was delivered but not seen.
- ``PROJECTOR``: reconnects and resends (its reads are safe to send twice; its commit is a compare-and-set).
- ``TOOL``: redis-py's defaults: the CLI's commands, the archiver, the bots and the notifier (none needs options of
  its own, so none has a role of its own), and the benchmarks.
  A benchmark handed a bare URL, with a shard count and key prefix of its own, takes ``tool_client``,
  ``tool_store`` and ``process_keys``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import redis
import redis.asyncio as aioredis

from almanac.services.embedded_redis import EmbeddedRedis, EmbeddedRedisError, pid_alive, running_server_url
from almanac.services.redis_client import connect, live_seed, reconnecting, redacted_url
from almanac.services.settings import Settings, load_settings
from almanac.storage.archive import ArchiveStore, ArchivingStore, default_archive_url
from almanac.storage.keys import DEFAULT_PREFIX, Keys
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

# The gateway's clients: above the live feed's 1 s blocking read, short enough that a silent Redis is a 503.
REDIS_CONNECT_TIMEOUT_S = 2.0
REDIS_TIMEOUT_S = 5.0
# `almanac up` writes this file in its data directory: its pid, gateway url, Redis url and an auditor token.
UP_FILE = "up.json"


class Role(Enum):
    GATEWAY = "gateway"
    GATEWAY_ENGINE = "gateway-engine"
    GATEWAY_READS = "gateway-reads"
    ENGINE = "engine"
    PROJECTOR = "projector"
    TOOL = "tool"


class BootstrapError(Exception):
    """What a process needs cannot be had (no Redis to use, a Redis that cannot give the durability asked
    for): one line for the operator; the CLI prints it, a server refuses to start with it."""


def settings(**overrides: object) -> Settings:
    """The settings of this process: the environment, with the CLI's options on top (SettingsError if invalid)."""
    return load_settings(**overrides)


def default_settings(**overrides: object) -> Settings:
    """The settings of no environment: the defaults with ``overrides`` on top, whatever this process's environment
    says (what must not vary with the operator's: the API documents, a benchmark's own stack)."""
    return load_settings({}, **overrides)


# --- which Redis ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def redis_url(config: Settings, create: bool = False) -> Iterator[str]:
    """REDIS_URL when set, else the data directory's embedded redis-server (started for the block's duration
    unless one already serves it). A process that only reads (``create`` False) never starts an empty server
    where there is no data directory: it uses a running stack found above the working directory, or refuses."""
    if config.redis_cluster and not config.redis_url:
        raise BootstrapError("REDIS_CLUSTER=true needs REDIS_URL naming a node of the cluster (the embedded Redis "
                             "is one server)")
    if config.redis_url:
        yield config.redis_url
        return
    existing = running_server_url(config.data_dir)
    if existing:
        yield existing
        return
    data_dir = Path(config.data_dir).resolve()
    if not create and not data_dir.is_dir():
        yield _nearest_stack_url(config)
        return
    with _embedded(config.data_dir, persist=config.durability != "memory") as url:
        yield url


@contextlib.contextmanager
def _embedded(data_dir: str | Path, persist: bool) -> Iterator[str]:
    """An embedded redis-server on ``data_dir`` for the block's duration; its URL."""
    try:
        server = EmbeddedRedis(data_dir, persist=persist).start()
    except EmbeddedRedisError as error:
        raise BootstrapError(str(error)) from None
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def scratch_redis_url(config: Settings) -> Iterator[str]:
    """A Redis a benchmark may fill and flush: REDIS_URL when the operator names one, else a throwaway embedded
    server in a temporary folder (no persistence), stopped and removed after the block. Never the data directory's
    or a running stack's: a benchmark run where `almanac up` runs, or below it, must not wipe its rooms."""
    if config.redis_url:
        yield config.redis_url
        return
    with tempfile.TemporaryDirectory(prefix="almanac-bench-") as scratch, _embedded(scratch, persist=False) as url:
        yield url


def _nearest_stack_url(config: Settings) -> str:
    found = nearest_stack(config.data_dir)
    if found is None:
        raise BootstrapError(
            f"no REDIS_URL and no data directory {Path(config.data_dir).resolve()}: there is nothing here to read. "
            "Set REDIS_URL to your Redis, or ALMANAC_DATA_DIR to the data directory of your `almanac up` (its "
            f"{UP_FILE} names its Redis), or run this where you ran `almanac up`")
    stack_dir, url = found
    sys.stderr.write(f"note: no data directory here; using the running stack of {stack_dir} ({redacted_url(url)})\n")
    return url


@contextlib.contextmanager
def quiet_httpx() -> Iterator[None]:
    """httpx logs every request at INFO: polling a gateway's /health would print a line per try."""
    logger = logging.getLogger("httpx")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def running_stack(data_dir: str | Path) -> dict | None:
    """The `almanac up` serving this data directory, if its supervisor is alive and its gateway answers."""
    import httpx  # noqa: PLC0415 - only when looking for a stack

    path = Path(data_dir).resolve() / UP_FILE
    try:
        info = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or not pid_alive(int(info.get("pid", 0))):
        return None
    try:
        with quiet_httpx():
            httpx.get(f"{info['url']}/health", timeout=2.0)
    except (httpx.HTTPError, KeyError):
        return None
    return info


def nearest_stack(data_dir: str) -> tuple[Path, str] | None:
    """A running stack for a process started where there is no data directory: the data directory of the same
    (relative) name in the working directory's parents, as git finds .git, whose `up.json` names a live
    stack (or whose embedded Redis is running). (its data directory, its Redis URL), or None."""
    if Path(data_dir).is_absolute():
        return None
    for parent in Path.cwd().resolve().parents:
        candidate = parent / data_dir
        if not candidate.is_dir():
            continue
        stack = running_stack(candidate)
        url = stack.get("redis_url") if stack else running_server_url(candidate)
        if url:
            return candidate, url
    return None


def served_url(config: Settings) -> str:
    """The Redis of a server started without the CLI (``python -m``, a container): REDIS_URL, or the embedded
    Redis an `almanac up` runs in the data directory; never a new server."""
    url = config.redis_url or running_server_url(config.data_dir)
    if not url:
        raise BootstrapError("set REDIS_URL (or run this through the `almanac` CLI, which starts a local Redis)")
    return url


def check_reachable(config: Settings, url: str, role: Role) -> None:
    """Fail with one line before a server starts when none of ``url``'s nodes answers, or, for an engine, when
    ALMANAC_DURABILITY=replica asks for a replica that one Redis does not have (a Cluster's primaries are
    checked by the engine itself, ``shard_engine.require_replica``)."""
    try:
        seed = live_seed(url)  # any one of the nodes (REDIS_URL may name several Cluster nodes)
        if role is Role.ENGINE and config.durability == "replica" and not config.redis_cluster:
            with tool_sync_client(seed) as client:
                replicas = int(client.info("replication").get("connected_slaves", 0))
            if replicas < 1:
                raise BootstrapError(f"ALMANAC_DURABILITY=replica needs a Redis with at least one connected "
                                     f"replica; {redacted_url(url)} has none (add a replica, or use ALMANAC_DURABILITY=aof)")
    except redis.RedisError as error:
        raise BootstrapError(f"cannot reach Redis at {redacted_url(url)}: {error}") from None


# --- what runs on it --------------------------------------------------------------------------------------


def redis_client(config: Settings, role: Role, url: str | None = None) -> aioredis.Redis:
    """The asyncio client a process of ``role`` uses (one server, or a Cluster with REDIS_CLUSTER, on every seed
    node of ``url``; REDIS_URL when None). Its options are the role's (this module's docstring)."""
    url = url or config.redis_url
    if not url:
        raise BootstrapError("no Redis URL: set REDIS_URL (`almanac up` starts a Redis and sets it)")
    cluster = config.redis_cluster
    if role is Role.GATEWAY:
        return connect(url, cluster, max_connections=config.redis_max_connections,
                       pool_wait_s=config.redis_pool_wait_ms / 1000,
                       socket_connect_timeout=REDIS_CONNECT_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S)
    if role in (Role.GATEWAY_ENGINE, Role.GATEWAY_READS):
        return connect(url, cluster, socket_connect_timeout=REDIS_CONNECT_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S)
    if role is Role.PROJECTOR:
        return connect(url, cluster, **reconnecting())
    return connect(url, cluster)


@dataclass(frozen=True)
class Runtime:
    """What one process (or one event loop of it) runs on: its settings, client, keys and store."""

    settings: Settings
    client: aioredis.Redis
    store: ArchivingStore

    @property
    def keys(self) -> Keys:
        """The process's one set of key names (its store's)."""
        return self.store.keys

    def loader(self, cache_size: int = 10_000) -> RoomLoader:
        """A room loader on this store (snapshot + tail; ``cache_size`` latest states kept, 0 for none)."""
        return RoomLoader(self.store, cache_size)

    async def aclose(self) -> None:
        await self.client.aclose()


@functools.cache
def process_keys(shard_count: int, prefix: str = DEFAULT_PREFIX) -> Keys:
    """The process's one ``Keys`` for a shard count and prefix, shared by all its runtimes (a gateway has up to
    three: its own, its engine's, its heavy reads'), and with them its cache of room tags."""
    return Keys(shard_count, prefix)


def tool_client(url: str, *, max_connections: int | None = None, pool_wait_s: float | None = 1.0) -> aioredis.Redis:
    """``Role.TOOL``'s client on the one Redis at ``url``, for a process handed a URL and no Settings (a benchmark's
    Redis). ``max_connections`` bounds its pool (a command waits up to ``pool_wait_s`` for a connection, for ever
    when None); None: redis-py's unbounded pool."""
    return connect(url, max_connections=max_connections, pool_wait_s=pool_wait_s)  # type: ignore[arg-type]


def tool_sync_client(url: str) -> redis.Redis:
    """A blocking client on the one Redis at ``url`` (redis-py's defaults), for a tool that watches a Redis from
    outside an event loop (a benchmark reading INFO while its load runs in a loop of its own)."""
    return redis.Redis.from_url(url)


def tool_store(client: aioredis.Redis, shard_count: int, prefix: str, *, archive: ArchiveStore | None = None,
               **options: object) -> RedisEventStore:
    """A store on ``client`` under a key prefix of its own (a benchmark's keys apart from a deployment's), with the
    process's ``Keys`` for that prefix: the Redis store alone, or with ``archive`` the archive tier below it (what
    a benchmark measures decides). ``options`` go to the store (wait_replicas, cache_size, ...)."""
    keys = process_keys(shard_count, prefix)
    if archive is None:
        return RedisEventStore(client, shard_count, prefix, keys=keys, **options)  # type: ignore[arg-type]
    return ArchivingStore(client, archive, shard_count, prefix, keys=keys, **options)


def runtime(config: Settings, role: Role, url: str | None = None, prefix: str = DEFAULT_PREFIX) -> Runtime:
    """The client of ``role`` and the store on it. Under ALMANAC_DURABILITY=replica every store waits for 1
    replica: an engine's ends each write with WAIT, and a stored outcome is read back (a resend, GET of an outcome,
    a gateway's answer) only once a replica has it (RedisEventStore.outcome); writes that need no replica say so
    where they are made (the projector's read models: ``evalsha_many(..., replicated=False)``). ``prefix`` keeps
    a benchmark's keys apart."""
    client = redis_client(config, role, url)
    store = ArchivingStore(client, archive_store(config), config.shard_count, prefix,
                           wait_replicas=1 if config.durability == "replica" else 0,
                           keys=process_keys(config.shard_count, prefix),
                           dedupe_retain_ms=config.dedupe_retain_s * 1000)
    return Runtime(config, client, store)


def archive_url(config: Settings) -> str:
    """ALMANAC_ARCHIVE_URL, or the data directory's ``archive/`` folder (the embedded default needs nothing)."""
    return config.archive_url or default_archive_url(config.data_dir)


@functools.cache
def _archive_store(url: str) -> ArchiveStore:
    return ArchiveStore(url)


def archive_store(config: Settings) -> ArchiveStore:
    """The process's one archive store (storage.archive): every store reads archived rooms through it."""
    return _archive_store(archive_url(config))


@contextlib.asynccontextmanager
async def opened(config: Settings, role: Role, url: str | None = None,
                 prefix: str = DEFAULT_PREFIX) -> AsyncIterator[Runtime]:
    """``runtime(...)`` for the block's duration; its client closed after it."""
    built = runtime(config, role, url, prefix)
    try:
        yield built
    finally:
        await built.aclose()


# --- running ----------------------------------------------------------------------------------------------


async def serve(runtime: Runtime, loop: Callable[[asyncio.Event], Awaitable[None]], name: str, *,
                on_ready: Callable[[], None] | None = None,
                closing: Callable[[], Awaitable[None]] | None = None) -> None:
    """A service process's life around its ``loop(stop)``: run it until SIGINT/SIGTERM (or until it fails), then
    set ``stop``, let the round in hand finish, ``closing()`` and close the runtime."""
    try:
        await run_until_stopped(loop, name, on_ready)
    finally:
        if closing is not None:
            await closing()
        await runtime.aclose()


async def until_stopped(work: asyncio.Task | None = None) -> None:
    """Wait for SIGINT or SIGTERM (the process's graceful stop: the caller then stops what it started), or for
    ``work`` to end, whose error is raised (a process whose loop died exits, and its supervisor restarts it).

    A service's whole lifecycle is its own start, this wait and its own stop: no framework app around it
    (docs/design-rulings.md, "FastStream")."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    waiting = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([waiting] if work is None else [waiting, work], return_when=asyncio.FIRST_COMPLETED)
        if work is not None and work.done():
            work.result()  # its error, if it failed
    finally:
        waiting.cancel()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)


async def run_until_stopped(loop: Callable[[asyncio.Event], Awaitable[None]], name: str,
                            on_ready: Callable[[], None] | None = None) -> None:
    """Run a process's main ``loop(stop)`` as a task until SIGINT/SIGTERM or until it ends (``until_stopped``);
    then set its stop event and wait for it to finish the work in hand. ``on_ready`` is called once the task is
    created, before the wait (the CLI freezes the start-up heap)."""
    stop = asyncio.Event()
    running = asyncio.create_task(loop(stop), name=name)
    try:
        if on_ready is not None:
            on_ready()
        await until_stopped(running)
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await running
