"""What the operator reads: diffs name the changed cell, refusals name what is there, output to a pipe is not wrapped."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess

import pytest
from test_cli_operator import ALMANAC, EXAMPLES, ainvoke, play

from almanac.services.forensics import investigate as ft
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore


@pytest.fixture
async def board_room(redis_client) -> str:
    """The board example played into a real Redis: at version 4 bea places a farm at row 8, columns 5-6."""
    return await play(RedisEventStore(redis_client), EXAMPLES / "board.jsonl")


def table_rows(text: str) -> dict[str, list[str]]:
    """A rich table's rows by their first cell."""
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]
    return {row[0]: row[1:] for row in rows}


async def test_a_board_diff_names_each_changed_cell_with_both_values_not_the_whole_board(board_room, redis_url):
    # Given a board room whose version 4 placed a farm on four cells of the 11x11 board
    # When the operator asks what changed from version 3 to 4
    shown = await ainvoke(redis_url, "state", board_room, "--at", "4", "--diff", "3")
    # Then each changed cell is one row, its path and both values, and no row holds a whole board
    assert shown.exit_code == 0, shown.output
    rows = table_rows(shown.stdout)
    assert rows["state.board[8][5]"] == ['""', '"farm"'] and rows["state.board[9][7]"] == ['""', '"farm"']
    assert "state.board" not in rows and "mountain" not in shown.stdout  # the untouched cells are not printed
    as_json = json.loads((await ainvoke(redis_url, "state", board_room, "--at", "4", "--diff", "3", "--json")).stdout)
    assert {"path": "state.board[8][5]", "before": "", "after": "farm"} in as_json["changes"]
    # And asked the other way round (--at the older version), the older is still the first column
    flipped = await ainvoke(redis_url, "state", board_room, "--at", "3", "--diff", "4")
    assert "version 3 -> 4" in flipped.stdout and table_rows(flipped.stdout)["state.board[8][5]"] == ['""', '"farm"']
    flipped = json.loads((await ainvoke(redis_url, "state", board_room, "--at", "3", "--diff", "4", "--json")).stdout)
    assert (flipped["from"], flipped["to"]) == (3, 4)
    # The card drawn is one row (the card that left), not a row for every card behind it that moved up
    assert [c for c in as_json["changes"] if c["path"].startswith("state.deck")] == [
        {"path": "state.deck[0]", "before": 10, "after": None}]

    # And `diff` of the room and its fork (the parent at version 3) says the same, through the one tree diff
    # the HTTP route answers with
    forked = await ainvoke(redis_url, "fork", board_room, "--at", "3", "--as", "board-what-if")
    assert forked.exit_code == 0, forked.output
    compared = await ainvoke(redis_url, "diff", board_room, "board-what-if", "--at", "4", "--at-b", "1")
    rows = table_rows(compared.stdout)
    assert rows["state.board[8][5]"] == ['"farm"', '""'] and "state.board" not in rows, compared.stdout
    # The fork seats nobody: its side of the parent's seat is absent, as `state --diff` prints it, never a null seat
    assert rows["room.players[0]"] == ['"bea"', "(absent)"], compared.stdout
    differences = json.loads((await ainvoke(redis_url, "diff", board_room, "board-what-if", "--at", "4",
                                            "--at-b", "1", "--json")).stdout)["differences"]
    assert {"path": "state.board[8][5]", "a": "farm", "b": ""} in differences
    assert {"path": "room.players[0]", "a": "bea", "b": None} in differences
    # and at their latest, a season the room scored and the fork did not is its fields, not a cell holding it whole
    latest = json.loads((await ainvoke(redis_url, "diff", board_room, "board-what-if", "--json")).stdout)["differences"]
    assert {"path": "state.seasons[0].name", "a": "spring", "b": None} in latest
    assert not [d for d in latest if re.fullmatch(r"state\.seasons\[\d+\]", d["path"])]

    # And every path either prints is one explain reads (the path language's roots: state., room., scores.)
    printed = {c["path"]: board_room for c in as_json["changes"]}
    printed |= {d["path"]: board_room if d["a"] is not None else "board-what-if" for d in differences}
    assert {path.split(".")[0].split("[")[0] for path in printed} <= {"state", "room", "scores"}, printed
    for path, room in printed.items():
        explained = await ainvoke(redis_url, "explain", room, path)
        assert explained.exit_code == 0, (path, explained.output)


async def test_a_forks_dispute_bundle_is_refused_naming_the_parent_not_a_crash(board_room, redis_url):
    # Given a fork of the board room at version 3
    assert (await ainvoke(redis_url, "fork", board_room, "--at", "3", "--as", "board-disputed")).exit_code == 0
    # When the operator asks for a bundle of the fork's first version
    shown = await ainvoke(redis_url, "dispute", "board-disputed", "--versions", "1..1")
    # Then it is refused, saying the room is a fork and whose bundle to ask for
    said = " ".join((shown.stdout + shown.stderr).split())
    assert shown.exit_code != 0 and "unexpected" not in said, said
    assert "sandbox fork" in said and board_room in said


async def test_fork_says_where_players_join_and_play_since_the_cli_cannot(board_room, redis_url):
    forked = await ainvoke(redis_url, "fork", board_room, "--at", "3", "--as", "board-sandbox")
    assert forked.exit_code == 0, forked.output
    said = " ".join(forked.stdout.split())
    assert "join_room" not in said  # a command no CLI verb sends
    assert 'POST /rooms/board-sandbox/join with {"player": "NAME"}' in said
    assert "POST /rooms/board-sandbox/commands" in said and "/#/room/board-sandbox" in said


async def test_explain_and_bisect_refuse_a_misspelt_path_naming_what_is_there(board_room, redis_url, redis_client):
    # Given the board room (its state has board, deck, time, placed, ...; no "bord")
    for args in (("explain", board_room, "bord.3.7"),
                 ("bisect", board_room, "--where", "bord.3.7 == 'farm'"),
                 ("bisect", board_room, "--where", "time > 2 and bord.3.7 == 'farm'", "--linear")):
        # When the operator misspells a path, Then it is one line, a non-zero exit, and the names that exist
        failed = await ainvoke(redis_url, *args)
        assert failed.exit_code == 1, (args, failed.output)
        (line,) = failed.stderr.strip().splitlines()
        assert "no value at 'bord.3.7'" in line or "never had a value at 'bord.3.7'" in line, line
        assert "allowed: " in line and "board" in line.split("allowed: ")[1], line
    # And a misspelt first segment may have meant a root, not a game key: the roots are offered too
    failed = await ainvoke(redis_url, "explain", board_room, "scors.bea")
    offered = failed.stderr.split("allowed: ")[1].replace(",", " ").split()
    assert failed.exit_code == 1 and {"board", "scores", "view", "room", "state"} <= set(offered), failed.stderr
    # And the API refuses it the same way (the console and the CLI share services.forensics.investigate)
    with pytest.raises(ft.ForensicsError) as refused:
        await ft.bisect_where(RoomLoader(RedisEventStore(redis_client), 0), board_room, "bord.3.7 == 'farm'")
    assert (refused.value.status, refused.value.code, refused.value.field) == (422, "path_not_found", "where")
    assert "board" in refused.value.allowed
    # While a real path that simply never holds is an answer, not an error
    never = await ainvoke(redis_url, "bisect", board_room, "--where", "time > 999")
    assert never.exit_code == 0 and "not found" in never.stdout, never.output


async def test_output_to_a_pipe_is_not_wrapped_at_80_columns(board_room, redis_url):
    # Given no terminal and no COLUMNS (a script, grep, a file)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"REDIS_URL": redis_url}
    # When the room's log is printed to a pipe
    done = subprocess.run([str(ALMANAC), "log", board_room], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    # Then each event's summary stays on its one line, whole
    assert done.returncode == 0, done.stderr
    assert any("bea created the board@1 room for the challenge 'board example'" in line
               for line in done.stdout.splitlines()), done.stdout


async def test_each_invocation_in_one_process_wraps_at_its_own_width(board_room, redis_url, monkeypatch):
    """A process that runs the CLI several times (the tests, a shell embedding it) wraps each at its own COLUMNS,
    not at whatever width its first invocation had."""
    from typer.testing import CliRunner  # noqa: PLC0415

    from almanac.services.cli import app  # noqa: PLC0415

    summary = "bea created the board@1 room for the challenge 'board example'"
    monkeypatch.delenv("COLUMNS", raising=False)
    runner = CliRunner()
    # Given a first invocation at 60 columns, which wraps the log's summaries
    narrow = await asyncio.to_thread(runner.invoke, app, ["log", board_room], env={"REDIS_URL": redis_url,
                                                                                   "COLUMNS": "60"})
    assert narrow.exit_code == 0 and max(map(len, narrow.stdout.splitlines())) <= 60, narrow.stdout
    # When the same process runs it again with no COLUMNS and no terminal (a pipe)
    piped = await asyncio.to_thread(runner.invoke, app, ["log", board_room], env={"REDIS_URL": redis_url})
    # Then that output is not wrapped: each summary stays whole on its line
    assert piped.exit_code == 0, piped.output
    assert any(summary in line for line in piped.stdout.splitlines()), piped.stdout
