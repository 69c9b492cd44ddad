"""`almanac fork ROOM --at N` and `almanac diff ROOM_A ROOM_B`: sandbox what-if rooms and where two rooms differ."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer
from rich.table import Table

from almanac.events.errors import RulesNotInstalledError
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, print_json, with_store
from almanac.services.forensics_tools import ForensicsError, diff, fork
from almanac.storage.base import EventStore

T = TypeVar("T")


def run_forensics(work: Callable[[EventStore], Awaitable[T]]) -> T:
    """``work`` against the store; a ForensicsError becomes the CLI's one error line."""

    async def guarded_work(store: EventStore) -> T:
        try:
            return await work(store)
        except (ForensicsError, RulesNotInstalledError) as error:
            raise OperatorError(error.message) from None

    return with_store(guarded_work)


@app.command("fork")
def fork_command(
    room: str = typer.Argument(..., help="The parent room."),
    at: int = typer.Option(..., "--at", help="The parent's version the fork starts from."),
    new_room: str = typer.Option(None, "--as", help="The fork's room id (default: ROOM-fN-xxxxxx)."),
    by: str = typer.Option("operator", "--by", help="Who forks (recorded in room.forked)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """A sandbox room whose history is ROOM's up to version N (by reference), with its own dice; seat the
    players again with the normal join and play a different command: what if?"""
    answer = run_forensics(lambda store: fork(store, room, at, new_room, by, int(time.time() * 1000)))
    if as_json:
        print_json(answer)
        return
    console.print(f"forked {room} at version {at} as [bold]{answer['room']}[/] ({answer['ruleset']}); "
                  f"its chain links to {answer['parent_hash'][:16]}…; new seed commitment "
                  f"{answer['seed_commitment'][:16]}…; seat the players with join_room", highlight=False)


def _cell(value: Any) -> str:
    return json.dumps(value, default=str)[:200]


@app.command("diff")
def diff_command(
    room_a: str = typer.Argument(..., help="First room."),
    room_b: str = typer.Argument(..., help="Second room (e.g. a fork of the first)."),
    at: int = typer.Option(None, "--at", help="Compare both rooms at this version (default: each one's latest)."),
    at_b: int = typer.Option(None, "--at-b", help="Compare ROOM_B at this version instead (a fork counts from 1)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Where two rooms' states differ: seats, scores and game state, path by path with both values."""
    answer = run_forensics(lambda store: diff(store, room_a, room_b, at, at_b))
    if as_json:
        print_json(answer)
        return
    a, b = answer["a"], answer["b"]
    table = Table(title=f"{a['room']} v{a['version']} vs {b['room']} v{b['version']}")
    for column in ("path", a["room"], b["room"]):
        table.add_column(column, overflow="fold")
    for row in answer["differences"]:
        table.add_row(row["path"], _cell(row["a"]), _cell(row["b"]))
    console.print(table)
    if answer["note"]:
        console.print(answer["note"])
    console.print(f"{len(answer['differences'])} difference(s)")
