"""`almanac bot ROOM --seat NAME`: play your own seat with the rule-set's bot, through the public API (client/seat_bot.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import httpx
import typer

from almanac.client import ApiError, Client, PlayerKey, Seat
from almanac.client.seat_bot import MAX_DELAY_S, SeatBot
from almanac.services.bootstrap import running_stack
from almanac.services.bots import ruleset_policy
from almanac.services.cli import app
from almanac.services.cli.common import console, fail, settings_or_exit


def _read_secret(path: Path, what: str) -> str:
    try:
        text = path.read_text().strip()
    except OSError as error:
        raise fail(f"cannot read {what} {path}: {error.strerror}") from None
    if not text:
        raise fail(f"{what} {path} is empty")
    return text


def _stack_url() -> str:
    """The gateway of the running `almanac up` of this data directory, or of the same-named one above (as the
    other commands find their stack); one line when there is none."""
    data_dir = settings_or_exit().data_dir
    candidates = [Path(data_dir)]
    if not Path(data_dir).is_absolute():
        candidates += [parent / data_dir for parent in Path.cwd().resolve().parents]
    for candidate in candidates:
        found = running_stack(candidate)
        if found and found.get("url"):
            return str(found["url"])
    raise fail("no --url and no running `almanac up` here: give the gateway's --url (or ALMANAC_URL)")


@app.command("bot")
def bot(
    room: Annotated[str, typer.Argument(help="The room id.")],
    seat: Annotated[str, typer.Option("--seat", help="Your seat: the player name you joined as.")],
    seat_key: Annotated[str | None, typer.Option("--seat-key", envvar="ALMANAC_SEAT_KEY", show_envvar=True,
                                                 help="The seat key your join answered (exchanged for a fresh "
                                                 "token; prefer --seat-key-file or the variable: a command line "
                                                 "is visible to other users).")] = None,
    seat_key_file: Annotated[Path | None, typer.Option("--seat-key-file", help="A file holding the seat key.")] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="ALMANAC_TOKEN", show_envvar=True,
                                              help="The seat's token instead of its seat key.")] = None,
    url: Annotated[str | None, typer.Option("--url", envvar="ALMANAC_URL", show_envvar=True,
                                            help="The gateway (default: the running `almanac up`'s).")] = None,
    player_key: Annotated[Path | None, typer.Option("--player-key", help="A signed seat's key file (`almanac "
                                                    "player-key`, or the console's export): every command is "
                                                    "signed with it.")] = None,
    delay: Annotated[float, typer.Option("--delay", min=0.0, max=MAX_DELAY_S,
                                         help="Seconds the bot waits before each move.")] = 1.0,
    poll: Annotated[float, typer.Option("--poll", min=0.1, max=MAX_DELAY_S,
                                        help="Seconds without an event before the view is read again.")] = 5.0,
    keep_checkpoints: Annotated[Path | None, typer.Option(
        "--keep-checkpoints", help="Write the signed checkpoints the seat's answers carried to this file (an "
                                   "almanac-checkpoints file for `verify-bundle --checkpoints`), after each command "
                                   "and at the end.")] = None,
    keep_receipts: Annotated[Path | None, typer.Option(
        "--keep-receipts", help="Write the signed refusal receipts the seat's refusals carried to this file (an "
                                "almanac-receipts file for `verify-bundle --receipts`), after each command and at "
                                "the end.")] = None,
) -> None:
    """Play your own seat of ROOM with the rule-set's bot, through the public API only (docs/bots.md): it sees
    your seat's view, moves after --delay, and stops when the room ends (exit 0) or on Ctrl-C. Not `almanac bots`,
    the deployment's own bots for seats handed to them."""
    if seat_key_file is not None:
        if seat_key is not None:
            raise fail("give the seat key once: --seat-key or --seat-key-file")
        seat_key = _read_secret(seat_key_file, "the seat key file")
    if (seat_key is None) == (token is None):
        raise fail("give the seat's credentials: --seat-key (or --seat-key-file) or --token, one of them")
    signer = None
    if player_key is not None:
        try:
            signer = PlayerKey.import_key(_read_secret(player_key, "the player key file"))
        except ValueError as error:
            raise fail(f"{player_key}: {error}") from None
    gateway = url or os.environ.get("ALMANAC_URL") or _stack_url()
    with Client(gateway) as client:

        def keep() -> None:  # the player's evidence, rewritten whole each time (docs/client.md, what a player holds)
            if keep_checkpoints is not None or keep_receipts is not None:
                try:
                    client.export_held(room, checkpoints=keep_checkpoints, receipts=keep_receipts)
                except OSError as error:
                    raise fail(f"cannot write what the seat holds: {error}") from None

        try:
            if seat_key is not None:
                held: Seat = client.reclaim_seat(room, seat, seat_key, player_key=signer)
            else:
                assert token is not None
                held = client.seat(room, seat, token, player_key=signer)

            def renew() -> Seat:  # a token outlived: the seat key gets a fresh one; a bare token cannot
                if seat_key is None:
                    raise fail("the seat's token was refused (expired?): run again with a fresh --token or the seat key")
                return client.reclaim_seat(room, seat, seat_key, player_key=signer)

            summary = held.summary()
            policy = ruleset_policy(summary["ruleset"], summary["ruleset_version"])
            runner = SeatBot(held, policy, delay_s=delay, poll_s=poll, secret=seat_key or token, renew=renew,
                             say=lambda line: console.print(f"{room} {seat} {line}", highlight=False), moved=keep)
            try:
                report = runner.run()
            finally:  # Ctrl-C or a refusal that stops the bot: what it holds is written all the same
                keep()
        except ApiError as error:
            raise fail(f"{gateway} refused the bot: {error.status} {error.code}: {error.message}") from None
        except httpx.HTTPError as error:
            raise fail(f"cannot reach the gateway at {gateway}: {error}") from None
        except ValueError as error:
            raise fail(str(error)) from None
    console.print(f"{room} {seat}: {report.sent} commands sent, {report.refused} refused; {report.reason}",
                  highlight=False)
