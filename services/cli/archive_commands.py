"""`almanac archive ROOM | --finished` (move ended rooms to the archive tier by hand) and `almanac archiver`."""

from __future__ import annotations

from typing import Annotated

import typer
import uvloop

from almanac.events.errors import CorruptEventError
from almanac.services import archiver as archiver_process, bootstrap
from almanac.services.archiver import Archiver
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    bootstrapped,
    console,
    fail,
    redis_url_for,
    settings_or_exit,
    with_store,
)
from almanac.services.heap import freeze_startup_heap
from almanac.services.logging import configure_logging
from almanac.storage import archive_index
from almanac.storage.archive import ArchiveError, ArchivingStore, archive_room


@app.command("archive")
def archive_command(
    room: str = typer.Argument(None, help="Room id (an ended room)."),
    finished: bool = typer.Option(False, "--finished", help="Every ended room the projector has seen, at once "
                                  "(ALMANAC_DEDUPE_RETAIN is not waited for)."),
) -> None:
    """Move ended rooms out of Redis into the archive (ALMANAC_ARCHIVE_URL); every reader still reads them."""
    if bool(room) == finished:
        raise fail("give exactly one of ROOM or --finished")

    async def work(store: ArchivingStore) -> list:  # type: ignore[type-arg]
        if finished:
            archiver = Archiver(store, retain_s=0, batch=10_000)
            results = []
            while True:
                done = await archiver.run_once()
                results += done
                if not any(r.status == "archived" for r in done):
                    return results
        state_version = await store.latest_version(room)
        if not state_version:
            raise OperatorError(f"room {room!r} not found (it has no events)")
        last = (await store.read(room, state_version, state_version))[-1]
        if last.type != "room.ended" and await store.pointer(room) is None:
            raise OperatorError(f"room {room!r} has not ended; only ended rooms are archived")
        try:
            result = await archive_room(store, room)
            await archive_index.compact(store, [room])  # its listing row and leaderboard entries, as a pass does
            return [result]
        except (ArchiveError, CorruptEventError) as error:
            raise OperatorError(str(error)) from None

    results = with_store(work)  # type: ignore[arg-type]
    for result in results:
        if result.status in ("archived", "already"):
            console.print(f"{result.room}: {result.status} ({result.version} events, {result.size} bytes) "
                          f"{result.path}", highlight=False)
        else:
            console.print(f"{result.room}: {result.status}", highlight=False)
    if finished:
        console.print(f"{sum(r.status == 'archived' for r in results)} room(s) archived")


@app.command("archiver")
def archiver_command(
    name: Annotated[str, typer.Option(help="This archiver's name (heartbeat and stats keys).")] = "archiver",
) -> None:
    """Run the archiver: move ended rooms to the archive ALMANAC_DEDUPE_RETAIN seconds after they end."""
    settings = settings_or_exit()
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        bootstrapped(lambda: bootstrap.check_reachable(settings, url, bootstrap.Role.TOOL))
        archiver_process.below_the_command_path()  # background work: the CPU the command path leaves
        uvloop.run(archiver_process.run(settings, url, name=name, on_ready=freeze_startup_heap))
