"""Helpers every CLI command shares: settings, a Redis connection (embedded when no REDIS_URL), the room store, errors, output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import redis
import typer
from rich.console import Console
from rich.table import Table

from almanac.events import codec, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError
from almanac.events.forensics.tree_diff import ABSENT, Change
from almanac.events.hashing import state_hash
from almanac.services.embedded_redis import EmbeddedRedis, EmbeddedRedisError, pid_alive, running_server_url
from almanac.services.settings import Settings, SettingsError, load_settings
from almanac.storage.base import EventStore
from almanac.storage.export_store import ExportFormatError

T = TypeVar("T")

# Output to a terminal wraps at its width; output to a pipe or a file (grep, a script, a log) is not wrapped
# at all: rich's default of 80 columns there would cut tables and values mid-word. COLUMNS still wins.
UNWRAPPED = 1_000_000
console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else UNWRAPPED)
# soft_wrap: an error is one line even when stderr is not a terminal (no wrapping at 80 columns).
error_console = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear line to stderr and return the exit to raise (no traceback reaches the user)."""
    error_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def settings_or_exit(**overrides: object) -> Settings:
    try:
        return load_settings(**overrides)
    except SettingsError as error:
        for problem in error.problems:
            error_console.print(f"[bold red]setting:[/] {problem}", highlight=False)
        raise typer.Exit(2) from None


UP_FILE = "up.json"  # written by `almanac up` in its data directory: its pid, gateway url, Redis url, a token


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
    """A running stack for a command run where there is no data directory: the data directory of the same
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


@contextlib.contextmanager
def redis_url_for(settings: Settings, create: bool = False) -> Iterator[str]:
    """REDIS_URL when set, else the data directory's embedded redis-server (started for the block's duration
    unless one already serves it). A command that reads (``create`` False) never starts an empty server where
    there is no data directory: it uses a running stack found above the working directory, or refuses."""
    if settings.redis_cluster and not settings.redis_url:
        raise fail("REDIS_CLUSTER=true needs REDIS_URL naming a node of the cluster (the embedded Redis is one server)")
    if settings.redis_url:
        yield settings.redis_url
        return
    existing = running_server_url(settings.data_dir)
    if existing:
        yield existing
        return
    data_dir = Path(settings.data_dir).resolve()
    if not create and not data_dir.is_dir():
        found = nearest_stack(settings.data_dir)
        if found is None:
            raise fail(f"no REDIS_URL and no data directory {data_dir}: there is nothing here to read. Set REDIS_URL "
                       "to your Redis, or ALMANAC_DATA_DIR to the data directory of your `almanac up` (its "
                       f"{UP_FILE} names its Redis), or run this where you ran `almanac up`")
        stack_dir, url = found
        error_console.print(f"note: no data directory here; using the running stack of {stack_dir} ({url})",
                            highlight=False)
        yield url
        return
    try:
        server = EmbeddedRedis(settings.data_dir, persist=settings.durability != "memory").start()
    except EmbeddedRedisError as error:
        raise fail(str(error)) from None
    try:
        yield server.url
    finally:
        server.stop()


class OperatorError(Exception):
    """Bad input or a missing room: shown as one line, exit code 1."""


def with_store(work: Callable[[EventStore], Awaitable[T]], create: bool = False) -> T:
    """Run ``work`` against the Redis store of the settings (``create``: see redis_url_for); every failure
    becomes one clear line."""
    from almanac.services.redis_client import connect  # noqa: PLC0415
    from almanac.storage.redis_store import RedisEventStore  # noqa: PLC0415

    settings = settings_or_exit()

    async def run(url: str) -> T:
        client = connect(url, cluster=settings.redis_cluster)
        try:
            return await work(RedisEventStore(client, settings.shard_count))
        finally:
            await client.aclose()

    with redis_url_for(settings, create) as url:
        return guarded(lambda: asyncio.run(run(url)), f"Redis at {url}")


def guarded(call: Callable[[], T], where: str = "") -> T:
    try:
        return call()
    except OperatorError as error:
        raise fail(str(error)) from None
    except ExportFormatError as error:
        raise fail(str(error)) from None
    except CorruptEventError as error:
        raise fail(f"corrupt log: {error}") from None
    except redis.RedisError as error:
        raise fail(f"cannot use {where or 'Redis'}: {error}") from None


def utc_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


async def room_envelopes(store: EventStore, room: str) -> list[Envelope]:
    envelopes = await store.read(room)
    if not envelopes:
        raise OperatorError(f"room {room!r} not found (it has no events)")
    return envelopes


def state_document(state: room_rules.RoomState) -> dict[str, Any]:
    return {
        **room_rules.describe(state),
        "scores": room_rules.decider_of(state).scores(state.game),
        "state_hash": state_hash(state),
        "state": codec.to_builtins(state),
    }


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")


def cell(value: Any) -> str:
    """A value in a table cell: its whole JSON (a diff's rows are leaves, short), "(absent)" where a side lacks it."""
    return repr(ABSENT) if value is ABSENT else json.dumps(value, default=str)


def print_changes(title: str, sides: tuple[str, str], changes: list[Change]) -> None:
    """The rows of an ``events.forensics.tree_diff``: each differing path with its value on either side."""
    table = Table(title=title)
    for column in ("path", *sides):
        table.add_column(column, overflow="fold")
    for path, before, after in changes:
        table.add_row(path, cell(before), cell(after))
    console.print(table)


def print_state(document: dict[str, Any]) -> None:
    console.print_json(json.dumps(document["state"]["game"], default=str))
    console.print(f"room {document['room']} ({document['ruleset']}) at version {document['version']}"
                  f"{' (ended)' if document['ended'] else ''}; players: {', '.join(document['players']) or '-'}")
    console.print(f"scores: {json.dumps(document['scores'])}")
    console.print(f"state hash: {document['state_hash']}")


def check_version(version: int, latest: int, option: str) -> None:
    if not 1 <= version <= latest:
        raise OperatorError(f"{option} {version} is out of range: the room has versions 1 to {latest}")
