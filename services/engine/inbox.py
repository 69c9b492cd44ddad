"""The commands a gateway hands to the shard engine of its own process, each with its waiter.

The gateway that holds a room's shard decides the room's commands itself (docs/architecture.md, "The
deployment shape"): its HTTP handler hands a command in here and awaits the answer, and the shard engine's
consume loop takes what waits between its batches, beside what it reads from the command streams (commands
sent by gateways that do not hold the shard), so the engine stays its shards' only, serial writer. This
module is the queue between the two, nothing else: no deciding, no writing, no Redis.
"""

from __future__ import annotations

import asyncio

from almanac.events.step import CommandRecord
from almanac.storage.base import Counted


class NotDecidedHere(Exception):
    """A command handed to ``Engine.decide_here`` that goes through the command stream instead, nothing of it
    written here: withdrawn after waiting its whole time unseen (the engine busy elsewhere), or failed here
    for a reason other than Redis (a room that cannot be loaded: the stream path counts its attempts).
    ``counted``: the client's limit was counted for it already, so the stream's submit must not count it
    again."""

    def __init__(self, message: str, counted: bool = False) -> None:
        super().__init__(message)
        self.counted = counted


class Handed:
    """A command handed in: its record, its client's limit, its waiter, and whether a batch took it."""

    __slots__ = ("counted", "future", "record", "taken")

    def __init__(self, record: CommandRecord, counted: Counted | None, future: asyncio.Future) -> None:
        self.record, self.counted, self.future, self.taken = record, counted, future, False


class Inbox:
    """Handed-in commands waiting for the consume loop, and the one future that loop sleeps on beside its read."""

    def __init__(self) -> None:
        self._waiting: list[Handed] = []
        self._wake: asyncio.Future | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self):
        return iter(list(self._waiting))

    async def hand_in(self, record: CommandRecord, limit: Counted | None, timeout_s: float) -> object:
        """Queue the command and wait for its answer (whatever the consume loop sets: an Outcome, None for
        "through the stream", or an exception); ``NotDecidedHere`` if no batch took it within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        entry = Handed(record, limit, loop.create_future())
        self._waiting.append(entry)
        self.wake()
        # A timer, not wait_for: one handle per command instead of a task and a shield (CPU per command).
        timer = loop.call_later(timeout_s, self._withdraw, entry, timeout_s)
        try:
            # Cancelled (its request left): the future is cancelled with it, and a batch skips it, or, taken
            # already, decides and writes it all the same (its outcome is stored).
            return await entry.future
        finally:
            timer.cancel()

    def take(self) -> list[Handed]:
        """Everything waiting now, out of the queue (the caller answers each)."""
        taken, self._waiting = self._waiting, []
        return taken

    def release(self) -> None:
        """Answer every waiting command None (through the stream: its shard's holder decides it): whenever the
        consume loop is not about to decide, so no caller waits out its time for nothing."""
        for entry in self.take():
            if not entry.future.done():
                entry.future.set_result(None)

    def wake(self, _: object = None) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def sleep(self) -> None:
        """Until a command is handed in or ``wake`` is called (the read beside it completing): one plain future,
        no task per wait (CPU)."""
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await self._wake
        finally:
            self._wake = None

    @staticmethod
    def _withdraw(entry: Handed, timeout_s: float) -> None:
        """A command no batch took within its time: never to be written (NotDecidedHere). One a batch took is
        left to finish: its write is bounded by Redis's timeout."""
        if entry.taken or entry.future.done():
            return
        entry.future.set_exception(  # a batch skips it (done); left in the queue: removing it costs O(n)
            NotDecidedHere(f"no batch took command {entry.record.command_id!r} within {timeout_s} s"))
