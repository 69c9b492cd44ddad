"""The engine's housekeeping over the shards it holds, beside its room-step loop: the clock and the trimming."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from almanac.services.clock import Clock
from almanac.services.engine.metrics import EngineMetrics
from almanac.services.room_service import ROOM_CACHE
from almanac.storage.keys import Keys
from almanac.storage.loader import RoomLoader
from almanac.storage.retention import StreamTrimmer

# How often the held shards' command streams are trimmed (storage.retention: one script per shard, all at
# once), and how long one round may take.
TRIM_EVERY_S = 5.0
TRIM_BUDGET_S = 2.0
# A command stream still this long after its trim, held back by a consumer group, is logged (trim.held_back).
BACKLOG_WARNING = 50_000


# An entry its group delivered this long ago and nobody acknowledged is stuck: no engine is deciding it (a read given
# up or cancelled whose delivery Redis made all the same, after the takeover that would have replayed it), and a
# ``>`` read never hands it out again. Looked for this often among the shards held; such a shard is taken over
# (which replays it; a command decided already is answered its stored outcome, never decided twice).
STUCK_AFTER_MS = 5_000
STUCK_EVERY_S = 2.5


class Housekeeping:
    """The clock of the held shards (services/clock.py: their deadlines, when ``clock``) and the trimming of their
    command streams, each on its own task, never in the room-step loop's way; started and stopped with the engine."""

    def __init__(self, client: Any, keys: Keys, store: Any, held: Callable[[], list[int]],
                 safely_held: Callable[[], list[int]], stopping: asyncio.Event, metrics: EngineMetrics, log: Any,
                 stream_retain_ms: int, clock: bool,
                 room_states: Callable[[str], tuple[Any, str] | None] | None = None,
                 loaders: Callable[[int], RoomLoader] | None = None,
                 call_many: Callable[[list[tuple]], Awaitable[list[Any]]] | None = None,
                 stuck: Callable[[list[int], int], Awaitable[list[int]]] | None = None,
                 take_over: Callable[[int], None] | None = None) -> None:
        self.client, self.keys, self.store = client, keys, store
        self._held, self._safely_held = held, safely_held
        self._stopping = stopping
        self.metrics, self.log = metrics, log
        self._trimmer = StreamTrimmer(client, stream_retain_ms)
        self._clock = clock
        self._room_states = room_states  # the engine's own cached states, lent to the clock (Clock.held)
        self._loaders = loaders or functools.partial(RoomLoader, store)  # the clock's own loader (Runtime.loader)
        self._call_many = call_many  # how the clock's looks go on one Redis (Clock's ``call_many``)
        self._stuck, self._take_over = stuck, take_over  # the shards with stuck entries; a takeover asked for
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._trim_loop(), name="engine-trim")]
        if self._stuck is not None and self._take_over is not None:
            self._tasks.append(asyncio.create_task(self._stuck_loop(), name="engine-stuck"))
        if self._clock:  # the deadlines of the shards this engine holds (services/clock.py)
            self._tasks.append(asyncio.create_task(
                Clock(self.client, self.keys, self.store, held=self._room_states, loader=self._loaders(ROOM_CACHE),
                      call_many=self._call_many).run(self._safely_held, self._stopping),
                name="engine-clock"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _trim_loop(self) -> None:
        """Trim the held shards' command streams every TRIM_EVERY_S, on its own task and within a budget:
        never in the way of the leases (a node failing over answers nothing for seconds)."""
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._trim_command_streams(), TRIM_BUDGET_S)
            except Exception as error:  # noqa: BLE001 - trimming is housekeeping: the next round tries again
                self.log.warning("trim.skipped", error=f"{type(error).__name__}: {error}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TRIM_EVERY_S)

    async def _stuck_loop(self) -> None:
        """Every STUCK_EVERY_S, ask a takeover of each safely held shard with an entry stuck (STUCK_AFTER_MS)."""
        assert self._stuck is not None and self._take_over is not None
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), STUCK_EVERY_S)
            held = self._safely_held()
            if not held or self._stopping.is_set():
                continue
            try:
                stuck = await asyncio.wait_for(self._stuck(held, STUCK_AFTER_MS), TRIM_BUDGET_S)
            except Exception as error:  # noqa: BLE001 - housekeeping: the next look tries again
                self.log.warning("stuck.skipped", error=f"{type(error).__name__}: {error}")
                continue
            for shard in stuck:
                self._take_over(shard)

    async def _trim_command_streams(self) -> None:
        """Drop the acknowledged, retained-long-enough entries of the held shards' command streams."""
        streams = [self.keys.command_stream(shard) for shard in self._held()]
        results = await asyncio.gather(*(self._trimmer.trim_commands(stream) for stream in streams),
                                       return_exceptions=True)
        failed = [stream for stream, result in zip(streams, results, strict=True) if isinstance(result, Exception)]
        if failed:
            self.log.warning("trim.skipped", streams=failed, error=next(
                f"{type(r).__name__}: {r}" for r in results if isinstance(r, Exception)))
        done = [(stream, result) for stream, result in zip(streams, results, strict=True)
                if not isinstance(result, Exception)]
        removed = sum(result.removed for _, result in done)
        if removed:
            self.metrics.count("commands_trimmed", removed)
        for stream, result in done:
            if result.held_by and result.length > BACKLOG_WARNING:
                # A consumer group that stopped reading (another reader attached to the stream and abandoned,
                # or this engine's group far behind) keeps every entry after its position: memory grows.
                self.log.warning("trim.held_back", stream=stream, group=result.held_by, entries=result.length)
