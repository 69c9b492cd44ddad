"""`almanac explain ROOM PATH` and `almanac bisect ROOM --where EXPR | --against NAME@VERSION`: why a value is
what it is, and the first version where something became true (or where other rules decide differently)."""

from __future__ import annotations

import typer
from rich.table import Table

from almanac.services.cli import app
from almanac.services.cli.common import cell, console, fail, print_json
from almanac.services.cli.fork_diff_commands import run_forensics
from almanac.services.forensics.investigate import bisect_against, bisect_where, explain


@app.command("explain")
def explain_command(
    room: str = typer.Argument(..., help="Room id."),
    path: str = typer.Argument(..., help="A state path: cities.bob.stock.gold, scores.alice, view.bob.…, room.players."),
    at: int = typer.Option(None, "--at", help="Explain the value at this version (default: the latest)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Every version whose event changed the value at PATH, with the value before and after."""
    answer = run_forensics(lambda loader: explain(loader, room, path, at))
    if as_json:
        print_json(answer)
        return
    table = Table(title=f"room {room}: {path} = {cell(answer['value'])} at version {answer['at']}")
    for column in ("version", "player", "type", "before", "after", "summary"):
        table.add_column(column, overflow="fold")
    for change in answer["changes"]:
        table.add_row(str(change["version"]), change["player"], change["type"], cell(change["before"]),
                      cell(change["after"]), change["summary"])
    console.print(table)
    console.print(f"{len(answer['changes'])} change(s) in {answer['folded']} version(s)")
    if "fork" in answer:
        console.print(f"a fork of {answer['fork']['parent']} at {answer['fork']['at']}: "
                      f"{answer['fork']['note']}")


@app.command("bisect")
def bisect_command(
    room: str = typer.Argument(..., help="Room id."),
    where: str = typer.Option(None, "--where", help='A predicate: PATH OP LITERAL [and|or ...], e.g. '
                              '"cities.bob.stock.gold > 10000" (OP: == != < <= > >=).'),
    against: str = typer.Option(None, "--against", help="Re-decide the room under NAME@VERSION (e.g. realm@2)."),
    linear: bool = typer.Option(False, "--linear", help="Scan every version (a predicate that is not monotonic)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """The first version where a predicate holds (binary search over snapshots + folds), or the first
    version whose events another rule-set version decides differently."""
    if (where is None) == (against is None):
        raise fail("give --where EXPR or --against NAME@VERSION (one of them)")
    if against is not None:
        answer = run_forensics(lambda loader: bisect_against(loader, room, against))
    else:
        answer = run_forensics(lambda loader: bisect_where(loader, room, where, linear))
    if as_json:
        print_json(answer)
        return
    if against is not None:
        if not answer["diverged"]:
            console.print(f"{room} ({answer['ruleset']}) against {answer['against']}: no difference in "
                          f"{answer['commands_redecided']} command(s)", highlight=False)
            return
        console.print(f"{room} ({answer['ruleset']}) against {answer['against']}: first difference at version "
                      f"{answer['version']}: {answer['note']}", highlight=False)
        for side in ("recorded", "other"):
            shown = answer[side]
            if isinstance(shown, dict) and "summary" in shown:
                console.print(f"  {side}: {shown['summary']}", highlight=False)
            else:
                console.print(f"  {side}: {cell(shown)}", highlight=False)
        return
    if not answer["found"]:
        console.print(f"{room}: {where!r} not found ({answer['note']})", highlight=False)
        return
    event = answer["event"]
    console.print(f"{room}: {where!r} first holds at version {answer['version']} ({answer['method']}, "
                  f"{answer['probes']} probe(s)): {event['type']} by {event['player']}: {event['summary']}",
                  highlight=False)
    for value in answer["values"]:
        console.print(f"  {value['path']}: {cell(value['before'])} -> {cell(value['after'])}", highlight=False)
