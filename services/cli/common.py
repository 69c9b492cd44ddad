"""Helpers every CLI command shares: settings, a Redis connection (embedded when no REDIS_URL), errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console

from almanac.services.embedded_redis import EmbeddedRedis, EmbeddedRedisError, running_server_url
from almanac.services.settings import Settings, SettingsError, load_settings

console = Console()
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


@contextlib.contextmanager
def redis_url_for(settings: Settings) -> Iterator[str]:
    """REDIS_URL when set, else an embedded redis-server on the data directory for the block's duration."""
    if settings.redis_cluster and not settings.redis_url:
        raise fail("REDIS_CLUSTER=true needs REDIS_URL naming a node of the cluster (the embedded Redis is one server)")
    if settings.redis_url:
        yield settings.redis_url
        return
    existing = running_server_url(settings.data_dir)
    if existing:
        yield existing
        return
    try:
        server = EmbeddedRedis(settings.data_dir).start()
    except EmbeddedRedisError as error:
        raise fail(str(error)) from None
    try:
        yield server.url
    finally:
        server.stop()
