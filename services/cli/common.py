"""Helpers every CLI command shares: settings, a Redis connection (embedded when no REDIS_URL), the room store, errors, output."""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from almanac.services import bootstrap
from almanac.services.redis_client import redacted_url
from almanac.services.settings import Settings, SettingsError, parse_shard_selection
from almanac.services.terminal import output_width
from almanac.storage.base import EventStore
from almanac.storage.export_store import ExportFormatError

T = TypeVar("T")

console = Console(width=output_width())


def fit_console() -> None:
    """Set ``console``'s width for this invocation (``almanac``'s callback): a process that runs the CLI more than
    once (tests, a shell embedding it) must not keep the width of whichever invocation came first."""
    console.width = output_width()
# soft_wrap: an error is one line even when stderr is not a terminal (no wrapping at 80 columns).
error_console = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear line to stderr and return the exit to raise (no traceback reaches the user)."""
    error_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def settings_or_exit(*, own_data_dir: bool = False, **overrides: object) -> Settings:
    """The settings of this invocation. Run where there is no data directory and no REDIS_URL, a command works on
    the running stack found above the working directory (``bootstrap.nearest_stack``, as git finds .git): its
    data directory, hence its Redis, secrets, signing keys and archive, never a new empty one beside it.
    ``own_data_dir``: a command that starts a deployment of its own here (``up``) keeps the local one."""
    try:
        settings = bootstrap.settings(**overrides)
    except SettingsError as error:
        for problem in error.problems:
            error_console.print(f"[bold red]setting:[/] {problem}", highlight=False)
        raise typer.Exit(2) from None
    if own_data_dir or settings.redis_url or Path(settings.data_dir).is_absolute() or Path(settings.data_dir).is_dir():
        return settings
    found = bootstrap.nearest_stack(settings.data_dir)
    if found is None:
        return settings
    stack_dir, url = found
    error_console.print(f"note: no data directory here; using the running stack of {stack_dir} ({redacted_url(url)})",
                        highlight=False, soft_wrap=True)
    return settings.model_copy(update={"data_dir": str(stack_dir)})


def deployment_settings(*configured: str) -> Settings:
    """``settings_or_exit`` for a command that signs or reads with a deployment's secrets (tokens, signing keys,
    the commitment secret): they come from the settings named by ``configured`` or from an existing data
    directory; never minted in a new one, where nothing would accept what the command prints."""
    settings = settings_or_exit()
    if all(getattr(settings, name) for name in configured) or Path(settings.data_dir).is_dir():
        return settings
    raise fail(f"no data directory {Path(settings.data_dir).resolve()} and no running stack above it: its secrets "
               f"would be new ones no gateway knows. Run this where you ran `almanac up`, or set ALMANAC_DATA_DIR "
               f"to its data directory (or {', '.join('ALMANAC_' + name.upper() for name in configured)})")


def shard_selection(text: str, shard_count: int) -> list[int]:
    """``--shards`` of a process (services.settings.parse_shard_selection), or one line and exit code 1 (also for
    ``none``: a process told to work on no shard would do nothing)."""
    try:
        selected = parse_shard_selection(text, shard_count)
    except ValueError as error:
        raise fail(f"--shards {text!r} is not valid: {error}") from None
    if not selected:
        raise fail(f"--shards {text!r} selects no shard: this process would do nothing")
    return selected


def bootstrapped(call: Callable[[], T]) -> T:
    """``call()`` (a step of services.bootstrap); its BootstrapError as one line and exit code 1."""
    try:
        return call()
    except bootstrap.BootstrapError as error:
        raise fail(str(error)) from None


@contextlib.contextmanager
def redis_url_for(settings: Settings, create: bool = False) -> Iterator[str]:
    """``bootstrap.redis_url``: REDIS_URL, or the data directory's embedded Redis (``create``: started if none
    runs; a reading command uses a running stack found above the working directory, or refuses in one line)."""
    with contextlib.ExitStack() as stack:
        url = bootstrapped(lambda: stack.enter_context(bootstrap.redis_url(settings, create)))
        yield url


class OperatorError(Exception):
    """Bad input or a missing room: shown as one line, exit code 1."""


def with_runtime(work: Callable[[bootstrap.Runtime], Awaitable[T]], create: bool = False) -> T:
    """Run ``work`` on the command's runtime (the settings' Redis: its store, its loader; ``create``: see
    redis_url_for); every failure becomes one clear line."""
    settings = settings_or_exit()

    async def run(url: str) -> T:
        async with bootstrap.opened(settings, bootstrap.Role.TOOL, url) as runtime:
            return await work(runtime)

    with redis_url_for(settings, create) as url:
        return guarded(lambda: asyncio.run(run(url)), f"Redis at {redacted_url(url)}")


def with_store(work: Callable[[EventStore], Awaitable[T]], create: bool = False) -> T:
    """Run ``work`` against the Redis store of the settings (``with_runtime``, for a command that only reads or
    writes the log)."""
    return with_runtime(lambda runtime: work(runtime.store), create)


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
