"""`almanac demo`: play a short game of every hosted rule-set over the HTTP API and verify each room."""

from __future__ import annotations

import secrets
import time
from typing import Any

import httpx
import msgspec
from rich.console import Console
from rich.table import Table

from almanac.client import ApiError, Client, Seat
from almanac.client.seat_bot import SeatBot
from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.services.bots import ruleset_policy

PLAYERS = ("alice", "bob")


class DemoError(Exception):
    pass


class Room:
    def __init__(self, ruleset: str, room: str) -> None:
        self.ruleset = ruleset
        self.room = room
        self.version = 1  # the rules version it was created under
        self.seats: dict[str, Seat] = {}
        self.accepted = 0
        self.refused: list[str] = []
        self.scores: dict[str, Any] = {}
        self.verified = False
        self.verification = ""


class Demo:
    """The demo's two players, speaking to the gateway through the public Python client (almanac.client)."""

    def __init__(self, url: str, auditor_token: str, console: Console) -> None:
        self.client = Client(url, timeout=30.0)
        self.auditor = auditor_token
        self.console = console
        self.challenge = f"demo-{secrets.token_hex(3)}"

    # --- one rule-set ------------------------------------------------------------------------------

    def play(self, ruleset: str) -> list[Room]:
        """Alice creates a room; Bob joins it, or gets his own room when it has one seat."""
        first = self.create(ruleset, PLAYERS[0])
        rooms = [first]
        for player in PLAYERS[1:]:
            try:
                first.seats[player] = self.client.join(first.room, player)
            except ApiError as refused:
                first.refused.append(f"{refused.code} ({player} joins)")
                rooms.append(self.create(ruleset, player))
        self.refuse_nonsense(first)
        for room in rooms:
            self.play_room(room)
        return rooms

    def create(self, ruleset: str, player: str) -> Room:
        # A rule-set may ask for rooms of one public challenge (the same deal for alice and bob, so their
        # scores compare); every other room draws a secret seed on the server, revealed when it ends.
        shared = registry.manifest(ruleset).shared_challenge
        seat = self.client.create_room(ruleset, player, challenge=self.challenge if shared else None,
                                       room=f"{ruleset}-{player}-{self.challenge[5:]}")
        room = Room(ruleset, seat.room)
        room.seats[player] = seat
        # The rules version the room was created under (the rule-set's default): shown in the table.
        room.version = seat.summary()["ruleset_version"]
        if not seat.answer.get("joined"):
            raise DemoError(f"{player} could not join the {ruleset} room they created: {seat.answer.get('join_error')}")
        return room

    def refuse_nonsense(self, room: Room) -> None:
        """Commands the API must refuse, to show their codes: an unknown kind, and a stranger's token."""
        seat = next(iter(room.seats.values()))
        try:
            seat.command({"kind": "fly_away"})
        except ApiError as refused:
            room.refused.append(f"{refused.code} (fly_away)")
        try:
            self.client.seat(room.room, seat.player, "not.a-token").command({"kind": "fly_away"})
        except ApiError as refused:
            room.refused.append(f"{refused.status} {refused.code} (forged token)")

    def play_room(self, room: Room) -> None:
        """The room's players take turns, one move each a round, until the game ends or nobody has a move. With a
        seat bot each player is an `almanac bot` (client/seat_bot.py ``SeatBot``: the seat's view in, the bot's
        command out, through the public API), stepped here in turn instead of waiting on its live feed."""
        manifest = registry.manifest(room.ruleset)
        if manifest.seat_bot is not None:
            self._play_seat_bots(room, manifest.demo_moves)
        elif manifest.policy is not None:
            self._play_policy(room, manifest)
        # else no bot: the demo creates, ends and verifies its room

    def _play_seat_bots(self, room: Room, moves: int) -> None:
        policy = ruleset_policy(room.ruleset, room.version)
        players = [SeatBot(seat, policy, delay_s=0) for seat in room.seats.values()]
        step = 0
        while step < moves:
            progressed = False
            for bot in players:
                seen = bot.seat.view()
                if seen["ended"] or seen["over"]:
                    return
                before = (bot.report.sent, bot.report.refused)
                bot.step(seen)
                if (bot.report.sent, bot.report.refused) == before:
                    continue  # no move for this seat now
                progressed = True
                step += 1
                if bot.report.refused > before[1]:
                    room.refused.append(f"{bot.report.refusals[-1]} ({bot.seat.player}'s bot)")
                else:
                    room.accepted += 1
            if not progressed:
                return

    def _play_policy(self, room: Room, manifest: Any) -> None:
        """A rule-set without a seat bot: its policy, from the state an auditor reads."""
        decider, policy = manifest.decider, manifest.policy
        step = 0
        while step < manifest.demo_moves:
            progressed = False
            for player, seat in room.seats.items():
                state = self.client.state(room.room, token=self.auditor)
                if state["state"]["ended"]:
                    return
                game = msgspec.convert(state["state"]["game"], decider.state_type, strict=False)
                command = policy(game, player, Dice(b"almanac-demo", room.room, step), int(time.time() * 1000))
                if command is None:
                    continue
                progressed = True
                step += 1
                try:
                    seat.command(command)
                    room.accepted += 1
                except ApiError as refused:
                    room.refused.append(f"{refused.code} ({codec.encode_command(command)['kind']})")
            if not progressed:
                return

    def finish(self, room: Room) -> None:
        """End the room (revealing its seed), read its scores, and ask the server to verify it."""
        seat = next(iter(room.seats.values()))
        try:
            seat.end("demo finished")
        except ApiError as refused:
            if refused.status != 422:  # 422: the game ended itself already
                raise DemoError(f"ending {room.room} answered {refused}") from None
        room.scores = seat.scores()
        body = self.client.verification(room.room, token=seat.token)
        room.verified = body["ok"] is True
        room.verification = _describe(body)


def _describe(report: dict[str, Any]) -> str:
    """One line of services.forensics.verify's report: what was checked, and where it diverged if it did."""
    # A seat's report leaves the refusals out (a rival's refusal is not a seat's to count); an auditor's has them.
    refusals = f"{report['refusals_rechecked']} refusals re-checked, " if "refusals_rechecked" in report else ""
    text = (f"{report['chain_checked']} events chained, {report['commands_redecided']} commands "
            f"re-decided, {refusals}seed {report['seed']}")
    divergence = report.get("divergence")
    return text if not divergence else f"{text}; diverges at v{divergence.get('version')} ({divergence.get('check')})"


def run_demo(url: str, auditor_token: str, console: Console) -> bool:
    """True only if every room of every hosted rule-set verified."""
    started = time.monotonic()
    demo = Demo(url, auditor_token, console)
    try:
        hosted = [r["ruleset"] for r in demo.client.rulesets()]
        rooms: list[Room] = []
        for ruleset in hosted:
            console.print(f"playing [bold]{ruleset}[/] ...")
            played = demo.play(ruleset)
            for room in played:
                demo.finish(room)
            rooms += played
    except (DemoError, ApiError, httpx.HTTPError) as error:
        console.print(f"[bold red]demo failed:[/] {error}")
        return False
    finally:
        demo.client.close()
    table = Table(title=f"Almanac demo at {url} ({time.monotonic() - started:.1f} s)")
    for column in ("rule-set", "room", "scores", "moves", "refused (codes)", "verification"):
        table.add_column(column, overflow="fold", no_wrap=column in ("rule-set", "moves"))
    for room in rooms:
        scores = "\n".join(f"{p} {s}" for p, s in room.scores.items())
        mark = "[green]verified[/]" if room.verified else "[red]FAILED[/]"
        table.add_row(f"{room.ruleset}@{room.version}", room.room, scores, str(room.accepted), "\n".join(room.refused),
                      f"{mark} {room.verification}")
    # Rich folds a pipe's output at 80 columns; this table reads better a little wider.
    Console(file=console.file, width=max(console.width, 150)).print(table)
    passed = bool(rooms) and all(room.verified for room in rooms)
    console.print("[bold green]every game verified[/]" if passed else "[bold red]some games did not verify[/]")
    return passed

