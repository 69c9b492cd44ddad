"""Play one's own seat with a bot through the public API: the seat's view in, the bot's command out, after a delay.

    from almanac.client import Client
    from almanac.client.seat_bot import SeatBot

    with Client(url) as client:
        seat = client.reclaim_seat(room, "bob", seat_key)      # the seat's own credentials, nothing else
        SeatBot(seat, my_policy, delay_s=1.0).run()            # until the room ends (or Ctrl-C)

This is ``almanac bot ROOM --seat NAME`` (docs/bots.md), and what a game studio imports to run its own bot. It
is a client like any other: it holds only the seat's token (or seat key) and, for a signed seat, its player key;
it sees only what the seat sees (``GET /rooms/{room}/view``) and acts only through ``POST /rooms/{room}/commands``.
The deployment's bots process (``almanac bots``) is something else: it plays seats handed to it, server-side.

Each round the bot reads its seat's view; when the room has ended (or the game is over) it returns; when the
policy (``almanac bot``: the rule-set's ``seat_bot``, the one the server's bots play with) names a command, it waits
``delay_s`` and sends it; then it waits for the room to move (the live feed, read with an idle timeout so a
clock-driven rule-set that moves only with time is read again every ``poll_s``). A refusal is reported and the
policy asked again with a fresh draw, up to ``ATTEMPTS`` at one version; then the bot waits for the room to move.

Restart-safe: the command id and the seed of the bot's draws are derived from (room, seat, version) under a key
derived from the seat's own secret (the seat key, else the token), so a bot restarted at the same version sends the
same command under the same id and the server answers it with the first outcome; someone without the seat's secret
cannot predict the bot's draws.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from almanac.client import ApiError, Seat

__all__ = ["ATTEMPTS", "MAX_DELAY_S", "BotReport", "Policy", "SeatBot", "bot_command_id", "bot_key", "bot_seed"]

# The longest delay before a move: a bot that waits longer than this is a mistake in its options, not a strategy.
MAX_DELAY_S = 600.0
# Refused draws at one version before the bot waits for the room to move (as the deployment's bots do): a rule-set's
# bot judges legality from the view alone, so one draw may be refused where another passes; a bounded number.
ATTEMPTS = 8
KEY_DOMAIN = b"almanac client seat bot v1\x00"  # separates the bot's key from any other use of the seat's secret

# policy(view, player, seed, now_ms) -> a command (dict with ``kind``, or a msgspec Struct) or None. ``seed``: 32 bytes
# of the bot's own, for (room, seat, version) under the bot's key: the same on a restart, unknown to anyone without the
# seat's secret (a rule-set's seat bot draws its dice from it: ``almanac bot`` builds them, services/cli/seat_bot_command.py).
Policy = Callable[[dict[str, Any], str, bytes, int], object | None]


def bot_key(secret: str) -> bytes:
    """The bot's key from the seat's own secret (its seat key, or its token): the same for every run of the bot."""
    return hashlib.sha256(KEY_DOMAIN + secret.encode()).digest()


def bot_seed(key: bytes, room: str, player: str, version: int, attempt: int = 0) -> bytes:
    """The bot's own randomness for its ``attempt``-th move at ``version`` (its dice are drawn from it): the same on
    a restart, secret to whoever lacks the seat's secret."""
    return hmac.new(key, f"seed\x00{room}\x00{player}\x00{version}\x00{attempt}".encode(), hashlib.sha256).digest()


def bot_command_id(key: bytes, room: str, player: str, version: int, attempt: int = 0) -> str:
    """The client command id of the bot's ``attempt``-th move at ``version``: a restart sends the same id."""
    digest = hmac.new(key, f"{room}\x00{player}\x00{version}\x00{attempt}".encode(), hashlib.sha256).digest()
    return "bot-" + base64.urlsafe_b64encode(digest[:24]).decode().rstrip("=")


@dataclass
class BotReport:
    """What a run did: commands accepted and refused, the last version seen, and why it stopped."""

    sent: int = 0
    refused: int = 0
    version: int = 0
    reason: str = ""
    refusals: list[str] = field(default_factory=list)


class SeatBot:
    """A bot for one seat, speaking only the public API through ``seat`` (a ``almanac.client.Seat``).

    ``policy(view, player, seed, now_ms)`` (``Policy``): what the seat does given its view, or None. ``secret``:
    what the bot's key is derived from (the seat key; default the seat's key, else its token).
    ``renew``: called for a fresh Seat when the token is refused (401), e.g. ``reclaim_seat`` with the seat key.
    ``say``: each line of what the bot does (a CLI prints it). ``moved``: called after each command's answer
    (accepted or refused), e.g. to write what the client holds (``Client.export_held``)."""

    def __init__(self, seat: Seat, policy: Policy, *, delay_s: float = 1.0, poll_s: float = 5.0,
                 secret: str | None = None, renew: Callable[[], Seat] | None = None,
                 say: Callable[[str], None] = lambda line: None, sleep: Callable[[float], None] = time.sleep,
                 max_rounds: int | None = None, moved: Callable[[], None] = lambda: None) -> None:
        if not 0 <= delay_s <= MAX_DELAY_S:
            raise ValueError(f"delay_s is between 0 and {MAX_DELAY_S:g} seconds")
        if not 0.1 <= poll_s <= MAX_DELAY_S:
            raise ValueError(f"poll_s is between 0.1 and {MAX_DELAY_S:g} seconds")
        self.seat = seat
        self.policy = policy
        self.delay_s = delay_s
        self.poll_s = poll_s
        self.key = bot_key(secret or seat.seat_key or seat.token)
        self.renew = renew
        self.say = say
        self.sleep = sleep
        self.max_rounds = max_rounds
        self.moved = moved
        self.report = BotReport()
        self.tries: dict[int, int] = {}  # the room version -> draws refused at it

    def run(self) -> BotReport:
        """Play until the room ends or its game is over (or ``max_rounds`` rounds); the report."""
        rounds = 0
        while self.max_rounds is None or rounds < self.max_rounds:
            rounds += 1
            seen = self._call(self.seat.view)
            self.report.version = seen["version"]
            if seen["ended"] or seen["over"]:
                self.report.reason = "the room ended" if seen["ended"] else "the game is over"
                self.say(f"v{seen['version']}: {self.report.reason}; the bot stops")
                return self.report
            if self.step(seen):
                self.wait_for_move(seen["version"])
        self.report.reason = f"{rounds} rounds played"
        return self.report

    def step(self, seen: dict[str, Any]) -> bool:
        """Ask the policy what the seat does at the view ``seen``; send it after the delay. Whether to wait for the
        room to move now: False after a refusal with draws left at this version (the next draw is tried at once)."""
        version, player, room = seen["version"], self.seat.player, self.seat.room
        if seen.get("player") != player:
            raise ValueError(f"the token is {seen.get('player')!r}'s, not the seat {player!r}'s")
        attempt = self.tries.get(version, 0)
        if attempt >= ATTEMPTS:
            return True  # every draw at this version was refused: only the room moving can change the answer
        seed = bot_seed(self.key, room, player, version, attempt)
        command = self.policy(seen["view"], player, seed, int(time.time() * 1000))
        if command is None:
            return True
        body = msgspec.to_builtins(command) if isinstance(command, msgspec.Struct) else command
        if self.delay_s:
            self.sleep(self.delay_s)
        command_id = bot_command_id(self.key, room, player, version, attempt)
        try:
            result = self._call(lambda: self.seat.command(body, command_id=command_id))
        except ApiError as refused:
            self.moved()
            if refused.status >= 500 or refused.status in (401, 403, 404):
                raise  # not the rules' refusal: the bot cannot go on (the CLI says why)
            if refused.code == "room_ended":
                return True  # the next view says so, and the bot stops
            self.report.refused += 1
            self.report.refusals.append(refused.code)
            self.tries = {version: attempt + 1}  # older versions are behind the room for good
            then = "drawing again" if attempt + 1 < ATTEMPTS else "waiting for the room to move"
            self.say(f"v{version}: {body.get('kind')} refused: {refused.status} {refused.code}: {refused.message}"
                     f"; {then}")
            return attempt + 1 >= ATTEMPTS
        self.moved()
        self.report.sent += 1
        self.report.version = result.version
        again = " (already decided: a resend)" if result.duplicate else ""
        self.say(f"v{version}: sent {body.get('kind')} -> v{result.version}{again}")
        return True

    def wait_for_move(self, version: int) -> None:
        """Until the room passes ``version`` (its live feed), or ``poll_s`` without an event (read the view again)."""
        def first_event() -> None:
            for _ in self.seat.follow(from_version=version + 1, idle_timeout_s=self.poll_s):
                return

        self._call(first_event)

    def _call(self, work: Callable[[], Any]) -> Any:
        """``work()``; a token refused (401) is renewed once (``renew``: the seat key gets a fresh one)."""
        try:
            return work()
        except ApiError as error:
            if error.status != 401 or self.renew is None:
                raise
        fresh = self.renew()
        self.seat.token = fresh.token
        return work()
