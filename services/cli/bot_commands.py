"""`almanac bots`: play the seats handed to bots (services/bots.py) until stopped; `bots add|remove|list` hand them."""

from __future__ import annotations

import time

import typer
import uvloop

from almanac.services import bootstrap, bots
from almanac.services.checkpoints import commit_secret
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    bootstrapped,
    console,
    guarded,
    redis_url_for,
    settings_or_exit,
    shard_selection,
)
from almanac.services.heap import freeze_startup_heap
from almanac.services.logging import configure_logging
from almanac.services.redis_client import redacted_url
from almanac.storage.keys import Keys

bots_app = typer.Typer(help="Bots as seats: run the bots process, or hand a room's seat to a bot.",
                       invoke_without_command=True)
app.add_typer(bots_app, name="bots")


@bots_app.callback()
def run_bots(
    context: typer.Context,
    max_rooms: int = typer.Option(1_000, "--max-rooms", min=1, max=1_000_000,
                                  help="bot seats this process plays at most (the rest wait, logged)"),
    rate: float = typer.Option(50.0, "--rate", min=0.0, max=100_000.0,
                               help="commands per second across the process (0: unbounded)"),
    shards: str = typer.Option("all", "--shards", help='the shards served: "all", "0,3,5" or "i/n"'),
    gateway: str = typer.Option(None, "--gateway", help="the gateway played through (ALMANAC_BOTS_GATEWAY_URL; "
                                                         "default the running `almanac up`'s of the data directory, "
                                                         "else ALMANAC_HTTP_HOST:ALMANAC_HTTP_PORT)"),
) -> None:
    """Run the bots process: play every bot seat of its shards through the gateway's public API, each from its
    seat's view, until stopped (Ctrl+C / SIGTERM)."""
    if context.invoked_subcommand is not None:
        return
    settings = settings_or_exit(bots_gateway_url=gateway)
    if not settings.bots_gateway_url:  # beside a running `almanac up` of this data directory: its gateway
        running = bootstrap.running_stack(settings.data_dir)
        if running is not None:
            settings = settings.model_copy(update={"bots_gateway_url": running["url"]})
    selected = shard_selection(shards, settings.shard_count)
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        bootstrapped(lambda: bootstrap.check_reachable(settings, url, bootstrap.Role.TOOL))
        freeze_startup_heap()
        uvloop.run(bots.run(settings, url, max_rooms=max_rooms, rate=rate, shards=selected))


def _with_client(work):  # the operator's commands: one short connection
    settings = settings_or_exit()

    async def run(url: str):
        async with bootstrap.opened(settings, bootstrap.Role.TOOL, url) as runtime:
            return await work(runtime, runtime.keys)

    with redis_url_for(settings) as url:
        return guarded(lambda: uvloop.run(run(url)), f"Redis at {redacted_url(url)}")


@bots_app.command("add")
def add(room: str = typer.Argument(..., max=200), seat: str = typer.Option(..., "--seat", help="the player name"),
        delay: int | None = typer.Option(None, "--delay", min=0, max=bots.MAX_DELAY_MS,
                                         help="the room's bots wait this many ms after each move before theirs "
                                              "(0: none; unset: left as it is)")) -> None:
    """Hand a seat of ROOM to a bot: it joins the seat if empty, then plays it. Refused, as over the API
    (services/bots.py admit_seat): a seat a person holds, past ALMANAC_MAX_BOT_SEATS, an ended or unknown room."""

    async def work(runtime, keys: Keys) -> bool:
        state, _ = await runtime.loader(0).latest(room)
        try:  # the operator may fill any empty seat, as an auditor may; a seat a person holds stays theirs
            how = await bots.admit_seat(runtime.client, keys, runtime.store, state, room, seat,
                                        max_seats=runtime.settings.max_bot_seats,
                                        key=bots.dice_key(commit_secret(runtime.settings)))
            if delay is not None:  # before the seat is handed: its bot's first command already waits it
                await bots.set_delay(runtime.client, keys, room, delay)
            # a new seat is taken against the bound in one step (racing adds never pass it together)
            return await bots.add_bot(runtime.client, keys, room, seat, int(time.time() * 1000),
                                      max_seats=runtime.settings.max_bot_seats if how != "already" else None)
        except bots.SeatRefused as refused:
            raise OperatorError(f"{seat} of {room} not handed to a bot: {refused.code}: {refused.message}") from None

    added = _with_client(work)
    waits = "" if delay is None else f" (the room's bots wait {delay} ms after each move)"
    console.print(f"{seat} of {room}: {'handed to a bot' if added else 'already a bot seat'}{waits}")


@bots_app.command("remove")
def remove(room: str, seat: str = typer.Option(..., "--seat")) -> None:
    """Take a seat back from its bot (the seat stays taken; its token is the operator's `almanac token`)."""
    removed = _with_client(lambda runtime, keys: bots.remove_bot(runtime.client, keys, room, seat))
    console.print(f"{seat} of {room}: {'no longer a bot seat' if removed else 'was not a bot seat'}")


@bots_app.command("list")
def list_seats() -> None:
    """Every bot seat, as room and seat."""
    seats = _with_client(lambda runtime, keys: bots.bot_seats(runtime.client, keys, range(keys.shard_count)))
    for room, seat in seats:
        console.print(f"{room}\t{seat}", highlight=False)
