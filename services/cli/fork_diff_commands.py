"""`almanac fork ROOM --at N` and `almanac diff ROOM_A ROOM_B`: sandbox what-if rooms and where two rooms differ."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer

from almanac.events.errors import RulesNotInstalledError
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, print_changes, print_json, with_runtime
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.investigate import diff, diff_changes, fork
from almanac.storage.loader import RoomLoader

T = TypeVar("T")


def run_forensics(work: Callable[[RoomLoader], Awaitable[T]]) -> T:
    """``work`` with the command's room loader (its runtime's; caching nothing: the command reads once); a
    ForensicsError becomes the CLI's one error line."""

    async def guarded_work(loader: RoomLoader) -> T:
        try:
            return await work(loader)
        except (ForensicsError, RulesNotInstalledError) as error:
            # The API's `allowed` too: what is there where a path stops, the versions that are installed
            hint = f"; allowed: {', '.join(map(str, error.allowed))}" if error.allowed else ""
            raise OperatorError(error.message + hint) from None

    return with_runtime(lambda runtime: guarded_work(runtime.loader(0)))


@app.command("fork")
def fork_command(
    room: str = typer.Argument(..., help="The parent room."),
    at: int = typer.Option(..., "--at", help="The parent's version the fork starts from."),
    new_room: str = typer.Option(None, "--as", help="The fork's room id (default: ROOM-fN-xxxxxx)."),
    by: str = typer.Option("operator", "--by", help="Who forks (recorded in room.forked)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """A sandbox room whose history is ROOM's up to version N (by reference), with its own dice. The CLI does
    not play: seat players and send commands over the HTTP API (POST /rooms/NEW/join, then
    /rooms/NEW/commands) or in the console's Room page; then `almanac diff ROOM NEW`."""
    answer = run_forensics(lambda loader: fork(loader, room, at, new_room, by, int(time.time() * 1000)))
    if as_json:
        print_json(answer)
        return
    new = answer["room"]
    console.print(f"forked {room} at version {at} as [bold]{new}[/] ({answer['ruleset']}); its chain links to "
                  f"{answer['parent_hash'][:16]}…; new seed commitment {answer['seed_commitment'][:16]}…",
                  highlight=False)
    # The CLI cannot seat or play: say exactly where that is done (the gateway of `almanac up`).
    console.print(f"It seats nobody yet. Seat players and play over HTTP: POST /rooms/{new}/join with "
                  f'{{"player": "NAME"}} (answers that player\'s token), then POST /rooms/{new}/commands with '
                  f'{{"command": {{...}}}} and that token as Bearer; or in the console at /#/room/{new}. '
                  f"Compare: almanac diff {room} {new}",
                  highlight=False, markup=False)


@app.command("diff")
def diff_command(
    room_a: str = typer.Argument(..., help="First room."),
    room_b: str = typer.Argument(..., help="Second room (e.g. a fork of the first)."),
    at: int = typer.Option(None, "--at", help="Compare both rooms at this version (default: each one's latest)."),
    at_b: int = typer.Option(None, "--at-b", help="Compare ROOM_B at this version instead (a fork counts from 1)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Where two rooms' states differ: seats, scores and game state, path by path with both values."""
    if as_json:
        print_json(run_forensics(lambda loader: diff(loader, room_a, room_b, at, at_b)))
        return
    # The table from the tree diff itself: a side that lacks a path reads "(absent)", as in `state --diff` (the
    # JSON answer can only say null, which a fork's missing seat is not)
    answer, changes = run_forensics(lambda loader: diff_changes(loader, room_a, room_b, at, at_b))
    a, b = answer["a"], answer["b"]
    print_changes(f"{a['room']} v{a['version']} vs {b['room']} v{b['version']}", (a["room"], b["room"]), changes)
    if answer["note"]:
        console.print(answer["note"])
    console.print(f"{len(changes)} difference(s)")
