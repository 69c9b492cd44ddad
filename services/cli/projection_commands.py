"""`almanac projector` and `almanac projections rebuild|show`: run, rebuild and inspect the read models."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import redis.asyncio as aioredis
import typer
import uvloop
from redis.exceptions import RedisError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from almanac.events import registry
from almanac.events.errors import CorruptEventError
from almanac.projections.read_model_queries import ReadModels
from almanac.projections.read_model_rows import model_names
from almanac.projections.rebuild import RebuildConflict, rebuild
from almanac.services import bootstrap, projector_process
from almanac.services.cli import app
from almanac.services.cli.common import (
    bootstrapped,
    console,
    fail,
    redis_url_for,
    settings_or_exit,
    shard_selection,
)
from almanac.services.heap import freeze_startup_heap
from almanac.services.logging import configure_logging
from almanac.services.redis_client import redacted_url
from almanac.services.settings import Settings

projections_app = typer.Typer(help="Read models: rebuild them from the room streams, or show them.",
                              no_args_is_help=True)
app.add_typer(projections_app, name="projections")

# Besides these, every read model a rule-set's manifest declares (registry.read_models()). One spelling
# everywhere: what `projections rebuild` names, `projections show` shows (rooms, leaderboards).
CORE_SHOWABLE = ("rooms", "room", "leaderboards", "status")


def showable() -> tuple[str, ...]:
    return CORE_SHOWABLE + tuple(sorted(registry.read_models()))


@app.command("projector")
def run_projector(
    shards: Annotated[str, typer.Option(help='Shards to project: "all", "0,3,5", or "index/count".')] = "all",
    batch_size: Annotated[int, typer.Option(min=1, help="Feed entries read per shard per batch.")] = 500,
    name: Annotated[str, typer.Option(help="This projector's name (heartbeat and stats keys).")] = "projector",
) -> None:
    """Run the projector: apply the shard feeds to the read models until stopped (Ctrl+C / SIGTERM)."""
    settings = settings_or_exit()
    selected = shard_selection(shards, settings.shard_count)
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        bootstrapped(lambda: bootstrap.check_reachable(settings, url, bootstrap.Role.PROJECTOR))
        # Ready: the start-up heap leaves the collections. uvloop: less CPU per batch on a 2-core machine.
        uvloop.run(projector_process.run(settings, url, selected, batch_size=batch_size, name=name,
                                         on_ready=freeze_startup_heap))


@projections_app.command("rebuild")
def rebuild_models(
    name: Annotated[str | None, typer.Argument(help="One read model (rooms, leaderboards, or a rule-set's); all when left out.")] = None,
) -> None:
    """Drop and rebuild read models from the room streams (the source of truth)."""
    known = model_names()
    if name is not None and name not in known:
        raise fail(f"there is no read model named {name!r}; known read models: {', '.join(known)}")
    models = known if name is None else (name,)
    settings = settings_or_exit()
    with redis_url_for(settings) as url:
        rooms = _run(settings, url, lambda runtime: _rebuild_with_progress(runtime.client, settings.shard_count,
                                                                          models, runtime.store))
    console.print(f"rebuilt {', '.join(models)} from {rooms} room(s)")


async def _rebuild_with_progress(client: aioredis.Redis, shard_count: int, models: tuple[str, ...],
                                 store: object = None) -> int:
    columns = (TextColumn("rebuilding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("rooms", total=None)
        rooms = await rebuild(
            client, shard_count, models,
            on_total=lambda total: progress.update(task, total=total),
            on_room=lambda _room: progress.advance(task),
            store=store,  # type: ignore[arg-type] - the runtime's: it reads archived rooms
        )
        progress.update(task, total=rooms, completed=rooms)
    return rooms


@projections_app.command("show")
def show(
    what: Annotated[str, typer.Argument(help="What to show: rooms, room, leaderboards, status, or a rule-set's read model.")],
    room: Annotated[str | None, typer.Option(help="A room id (room, a rule-set's read model).")] = None,
    ruleset: Annotated[str | None, typer.Option(help="A rule-set (rooms, leaderboards).")] = None,
    where: Annotated[list[str] | None, typer.Option(help="FIELD=VALUE: only rows with that field (a rule-set's read model).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows of a leaderboard.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show a read model as the gateway serves it."""
    if what not in showable():
        raise fail(f"cannot show {what!r}; choose one of: {', '.join(showable())}")
    filters = _filters(what, where or [])
    if what == "room" and room is None:
        raise fail("show room needs --room ROOM")
    if what == "leaderboards" and ruleset is None:
        raise fail("show leaderboards needs --ruleset NAME")
    settings = settings_or_exit()

    async def query(runtime: bootstrap.Runtime) -> Any:
        models = ReadModels(runtime.client, settings.shard_count, keys=runtime.keys, store=runtime.store)
        if what == "rooms":
            return await models.rooms(ruleset)
        if what == "room":
            return await models.room(room)  # type: ignore[arg-type]
        if what == "leaderboards":
            return await models.leaderboard(ruleset, limit)  # type: ignore[arg-type]
        if what == "status":
            return await models.status()
        return await models.rows(what, room, filters)

    with redis_url_for(settings) as url:
        result = _run(settings, url, query)
    if what == "room" and result is None:
        raise fail(f"room {room!r} has no projection (unknown room, or the projector has not reached it)")
    if as_json or what in ("room", "status"):
        console.print_json(json.dumps(result))
        return
    _print_rows(what, result)


def _filters(what: str, where: list[str]) -> dict[str, str]:
    """``--where FIELD=VALUE`` options, checked against the fields the read model lets readers filter by."""
    if not where:
        return {}
    allowed = registry.read_models()[what][1].filters if what in registry.read_models() else ()
    filters = {}
    for item in where:
        field, sep, value = item.partition("=")
        if not sep or field not in allowed:
            raise fail(f"--where {item!r}: {what} filters by {', '.join(f'{f}=VALUE' for f in allowed) or 'nothing'}")
        filters[field] = value
    return filters


def _print_rows(what: str, rows: list[dict]) -> None:
    if not rows:
        console.print(f"no {what}")
        return
    columns = {
        "rooms": ("room", "ruleset", "version", "players", "over", "ended", "created_by"),
        "leaderboards": ("rank", "player", "score", "room"),
    }.get(what) or registry.read_models()[what][1].columns or tuple(rows[0])
    table = Table(*columns)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _run(settings: Settings, url: str, work: Any) -> Any:
    async def main() -> Any:
        async with bootstrap.opened(settings, bootstrap.Role.TOOL, url) as runtime:
            return await work(runtime)

    try:
        return asyncio.run(main())
    except RebuildConflict as error:
        raise fail(str(error)) from None
    except CorruptEventError as error:
        raise fail(f"room {error.room!r} version {error.version}: {error.reason}") from None
    except RedisError as error:
        raise fail(f"Redis at {redacted_url(url)} failed: {error}") from None
