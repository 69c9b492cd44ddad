"""`almanac gateway`, `almanac up` (Redis, engine, projector and gateway as supervised children), `almanac demo`, `almanac token`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from almanac.services import bootstrap
from almanac.services.bootstrap import running_stack
from almanac.services.cli import app
from almanac.services.cli.common import console, deployment_settings, fail, redis_url_for, settings_or_exit
from almanac.services.heap import freeze_startup_heap
from almanac.services.redis_client import redacted_url
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack, StackError


@app.command("gateway")
def gateway_command(
    host: str = typer.Option(None, help="Interface to listen on (ALMANAC_HTTP_HOST, default 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (ALMANAC_HTTP_PORT, default 8000)."),
) -> None:
    """Run the HTTP and WebSocket gateway (uvicorn) on REDIS_URL, or on the data directory's Redis."""
    import uvicorn  # noqa: PLC0415 - keep the CLI start fast

    from almanac.services.gateway import create_app  # noqa: PLC0415
    from almanac.services.gateway.connection_guard import server_options  # noqa: PLC0415
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    settings = settings_or_exit(http_host=host, http_port=port)
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        settings = _with(settings, redis_url=url)
        # Ready: the start-up heap leaves the collections (services/heap.py).
        # uvloop and httptools (pinned, the fast C paths), proxy headers only from ALMANAC_TRUSTED_PROXIES.
        uvicorn.run(create_app(settings, on_ready=freeze_startup_heap), **server_options(settings))


@app.command("token")
def token_command(
    auditor: bool = typer.Option(False, "--auditor", help="An auditor token (all rooms, read-only audits)."),
    room: str = typer.Option(None, help="The room a player token is bound to."),
    player: str = typer.Option(None, help="The player a player token acts for."),
    ttl: int = typer.Option(None, help="Lifetime in seconds (default ALMANAC_TOKEN_TTL_S)."),
) -> None:
    """Print a signed token made with this data directory's secret (for operators and scripts)."""
    from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, deployment_signer  # noqa: PLC0415

    settings = deployment_settings("secret")
    signer = deployment_signer(settings)
    if auditor:
        print(signer.issue(room or ANY_ROOM, "auditor", ROLE_AUDITOR, ttl))
    elif room and player:
        print(signer.issue(room, player, ttl_s=ttl))
    else:
        raise fail("give --auditor, or both --room and --player")


@app.command("up")
def up_command(
    port: int = typer.Option(None, help="Gateway port (ALMANAC_HTTP_PORT, default 8000; 0 picks a free one)."),
) -> None:
    """Start everything: Redis (embedded unless REDIS_URL), a projector and a gateway that decides the commands of
    every shard it holds; Ctrl-C stops all."""
    settings = settings_or_exit(own_data_dir=True, http_port=port)
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    configure_logging(settings.log_format, settings.log_level)
    with started(Stack(settings, say=console.print)) as stack:
        console.print(f"[bold green]Almanac is up[/] at [bold]{stack.url}[/]  (API docs: {stack.url}/docs)")
        console.print(f"Redis: {redacted_url(stack.redis_url)}   data: {stack.data_dir}")
        console.print(f"Auditor token: {stack.auditor_token}", soft_wrap=True, highlight=False)
        console.print("Try: [bold]almanac demo[/] in another terminal.  Ctrl-C stops everything.")
        stack.supervise()


@app.command("demo")
def demo_command(
    url: str = typer.Option(None, help="A running gateway (default: the `almanac up` of this data directory, "
                                       "or start one)."),
    auditor_token: str = typer.Option(None, envvar="ALMANAC_AUDITOR_TOKEN", help="Needed with --url."),
) -> None:
    """Create a room of every rule-set, play a short game of each over HTTP, print scores and verification."""
    from almanac.services.cli.demo import run_demo  # noqa: PLC0415

    settings = settings_or_exit()
    if url:
        if not auditor_token:
            raise fail("--url needs --auditor-token (printed by `almanac up`, or `almanac token --auditor`)")
        raise typer.Exit(0 if run_demo(url.rstrip("/"), auditor_token, console) else 1)
    running = running_stack(settings.data_dir)
    if running is not None:
        console.print(f"Using the running stack at {running['url']}")
        raise typer.Exit(0 if run_demo(running["url"], running["auditor_token"], console) else 1)
    console.print("No `almanac up` running here: starting one for the demo.")
    with started(Stack(_with(settings, http_port=0), say=console.print)) as stack:
        passed = run_demo(stack.url, stack.auditor_token, console)
    raise typer.Exit(0 if passed else 1)


def _with(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


@contextlib.contextmanager
def started(stack: Stack) -> Iterator[Stack]:
    """The stack entered and started, stopped after the block; a child that fails to start is one line."""
    try:
        with stack:
            stack.start()
            yield stack
    except (StackError, bootstrap.BootstrapError) as error:
        raise fail(str(error)) from None
