"""How late this gateway's event loop runs: the wait a new request sees before its handler can start."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import Callable

INTERVAL_S = 0.005
GRACE_S = 1.0


class RunQueueWait:
    """Seconds this thread has waited on a run queue so far: runnable, while the CPU ran other processes (Linux's
    /proc/thread-self/schedstat, its second field; ~1.4 us a read). Always 0 where the kernel does not say."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> float:
        if self._fd is None:
            return 0.0
        try:
            return int(os.pread(self._fd, 64, 0).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return 0.0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LoopLag:
    """A timer that measures its own lateness every few ms while the gateway is busy; ``lag_ms`` is the
    latest, decaying slowly, and 0 when idle.

    The in-flight limit counts the commands a gateway has started; past capacity the requests it has not
    yet looked at queue in the event loop instead, where no counter sees them. The timer's lateness is that
    queue's wait, measured for a few microseconds of CPU per tick. It ticks while ``busy()`` (the gateway
    has enough commands in flight for the lag to be consulted, ``Gateway.overload_reason``) and for
    ``GRACE_S`` after: ``wake`` starts it. The grace keeps the slow decay across a load that hovers around
    the threshold (one quick tick is no proof of calm); a second without load ends it, and the lag reads 0.
    A timer that ticked forever woke an idle gateway 200 times a second, which on this project's VMs cost
    ~4% of a core per gateway process, idle or not (~0.08 ms per command at 500/s).

    ``own_lag_ms`` is the part of that lateness the process did not spend waiting for a CPU (``RunQueueWait``):
    its own backlog, or a call that held the loop. On a machine whose cores other processes take, the timer is
    late by the time the process waited to be scheduled, which refusing commands cannot shorten: refused on
    ``lag_ms`` alone, a gateway using a fifth of a core refused 95-98% of the commands, kept 8 in flight, and
    served 22-136/s of the ~1,200/s it could (issue 28, item 19).
    """

    def __init__(self, busy: Callable[[], bool], grace_s: float = GRACE_S) -> None:
        self.lag_ms = 0.0
        self.own_lag_ms = 0.0
        self._busy = busy
        self._grace_s = grace_s
        self._enabled = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._enabled = True

    def wake(self) -> None:
        """Tick while the gateway is busy and ``grace_s`` after (nothing when already ticking, or not started)."""
        if self._enabled and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="gateway-loop-lag")

    @property
    def ticking(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self._enabled = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        busy_until = loop.time() + self._grace_s
        runqueue_wait = RunQueueWait()  # opened in the loop's own thread: the file is that thread's
        try:
            while loop.time() < busy_until:
                due = loop.time() + INTERVAL_S
                waited = runqueue_wait()
                await asyncio.sleep(INTERVAL_S)
                late_ms = (loop.time() - due) * 1000
                own_ms = max(0.0, late_ms - (runqueue_wait() - waited) * 1000)
                # A spike counts at once; calm returns over a few ticks (one quick tick is no proof of calm).
                self.lag_ms = max(late_ms, self.lag_ms * 0.7)
                self.own_lag_ms = max(own_ms, self.own_lag_ms * 0.7)
                if self._busy() or late_ms > INTERVAL_S * 1000:
                    # Busy, or the loop itself ran late (a stall: the load may be arriving): keep watching.
                    busy_until = loop.time() + self._grace_s
        finally:
            runqueue_wait.close()
            self.lag_ms = self.own_lag_ms = 0.0  # a second without load: no queue that the lag would describe


class StandingQueue:
    """CoDel's test on the commands' waits: a queue stands when even the quickest command of an interval
    waited longer than the target beyond the service's own wait.

    The in-flight limit bounds how many commands wait, not how long: past capacity the engine's queue
    fills, every accepted command waits its turn (hundreds of ms at twice the capacity), and the limit
    alone keeps accepting commands into that wait. A burst makes a few commands slow but leaves some
    quick ones; a queue that does not drain makes them all slow. So ``record`` takes each finished
    command's wait (submit to outcome), and ``standing`` says whether the last full interval's quickest
    one exceeded ``target_ms`` beyond the service's own wait (``base_s``): new commands are then refused (while
    ``LAG_MIN_INFLIGHT`` or more are in flight) until a command is quick again, or an interval passes with none
    finished (what was queued has drained: try again).

    The service's own wait is the quickest wait of the commands admitted while few were in flight (``calm``:
    no queue of this gateway in front of them), the least over the intervals of the last ``BASE_INTERVALS``
    that had one (or the latest such interval's, however old: past capacity every command is admitted with
    many in flight until the test refuses, and the interval of refusals that follows measures it afresh). Against the target alone, a service slow for every command alike (a machine whose engine gets too
    little CPU, a remote Redis) made every interval's quickest wait exceed it: the queue "stood" for good,
    and only the few commands below ``LAG_MIN_INFLIGHT`` in flight were admitted, whose waits were just as
    long. Goodput fell to a small part of capacity and stayed there while the overload lasted (136/s with 95%
    refused at three times capacity, issue 28). Those few commands' waits are what the service takes without
    a queue: measured against them, a slow service is no queue, and a real one still is.
    """

    BASE_INTERVALS = 10

    def __init__(self, target_ms: int, interval_ms: int) -> None:
        self.target_s = target_ms / 1000
        self.interval_s = interval_ms / 1000
        self.quickest_s = 0.0  # the last full interval's quickest wait (what `standing` judged)
        self.base_s = 0.0  # the service's own wait, as the calm commands of recent intervals measured it
        self._calm_quickest: deque[tuple[float, float]] = deque()  # (interval's end, its calm quickest)
        self._standing = False
        self._ends = 0.0
        self._quickest = float("inf")
        self._calm = float("inf")

    def record(self, wait_s: float, now: float, calm: bool = False) -> None:
        """A finished command's wait; ``calm``: it was admitted while few commands were in flight."""
        self._roll(now)
        if wait_s < self._quickest:
            self._quickest = wait_s
        if calm and wait_s < self._calm:
            self._calm = wait_s
        if self._standing and wait_s <= self.target_s + self.base_s:
            self._standing = False  # one quick command is proof that the queue drained

    def standing(self, now: float) -> bool:
        if not self.target_s:
            return False
        self._roll(now)
        return self._standing

    def _roll(self, now: float) -> None:
        if now >= self._ends:
            if self._calm != float("inf"):
                self._calm_quickest.append((now, self._calm))
                self._calm = float("inf")
            recent = now - self.BASE_INTERVALS * self.interval_s
            while len(self._calm_quickest) > 1 and self._calm_quickest[0][0] < recent:
                self._calm_quickest.popleft()
            if self._calm_quickest:
                self.base_s = min(quickest for _, quickest in self._calm_quickest)
            finished_any = self._quickest != float("inf")
            self.quickest_s = self._quickest if finished_any else 0.0
            self._standing = finished_any and self._quickest > self.target_s + self.base_s
            self._quickest = float("inf")
            self._ends = now + self.interval_s


class AdaptiveLimit:
    """The in-flight limit that keeps commands' waits near a target: cut while they queue, grown back one
    step an interval while they do not (AIMD, as TCP's window and Netflix's concurrency-limits).

    A fixed limit bounds how many commands wait, and so how long only for a given speed: past capacity the
    wait is about limit / throughput (Little's law), and the same 32 gave a p50 of accepted of 20-25 ms on a
    slow hour of this project's VM. A fixed 16 shortened it but also refused commands at a quarter of
    capacity whenever the machine stalled, because the stall's burst found the smaller limit (docs/capacity.md,
    eighth pass). This one is cut only after an interval of several finished commands (``MIN_SAMPLES``) whose
    median wait exceeded the target AND twice the interval's quickest: a queue makes the waits spread above the
    quickest, while a slow store (a remote Redis, WAIT for a replica) makes every wait long alike and is no
    reason to refuse. A stall's burst has been admitted before its waits are measured. Each interval in which
    the median stayed under the target or within twice the quickest (slow alike), or nothing finished, grows
    the limit by one, back to ``ceiling`` (the configured limit); the ``floor`` (the gateway's ``LAG_MIN_INFLIGHT``) keeps enough commands in flight for
    the loop-lag and standing-queue tests to go on judging.
    """

    MIN_SAMPLES = 8  # an interval with fewer finished commands says nothing about a queue
    DECREASE = 0.75

    def __init__(self, ceiling: int, target_ms: int, interval_ms: int, floor: int) -> None:
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.limit = ceiling
        self.target_s = target_ms / 1000
        self.interval_s = interval_ms / 1000
        self._ends = 0.0
        self._waits: list[float] = []

    def record(self, wait_s: float, now: float) -> None:
        """A command's wait, submit to outcome (or to its timeout); the limit moves as each interval ends."""
        if not self.target_s:
            return
        self._roll(now)
        self._waits.append(wait_s)

    def current(self, now: float) -> int:
        """The limit now: intervals that ended since the last command finished are judged first, so a gateway
        that went quiet after a cut is back at its ceiling when the next burst comes, not after its first answer."""
        if self.target_s:
            self._roll(now)
        return self.limit

    def _roll(self, now: float) -> None:
        if now < self._ends:
            return
        self._judge()
        # Whole intervals in which nothing finished: no queue to speak of (a stall's commands, when they end
        # or time out, are long waits of the interval they end in, and cut the limit again).
        quiet = int((now - self._ends) / self.interval_s) if self._ends else 0
        self.limit = min(self.ceiling, self.limit + quiet)
        self._ends = now + self.interval_s

    def _judge(self) -> None:
        waits, self._waits = self._waits, []
        if not waits:
            return
        waits.sort()
        median = waits[len(waits) // 2]
        # Against the quickest: the quickest tenth's wait (tried) sat too close to the median past capacity to
        # cut at all (p50 of accepted 16-22 ms against 12-14 ms, docs/capacity.md, ninth pass). A store slow for
        # every command alike has no command much quicker than the rest.
        if len(waits) >= self.MIN_SAMPLES and median > self.target_s and median > 2 * waits[0]:
            self.limit = max(self.floor, int(self.limit * self.DECREASE))
        elif (median <= self.target_s or median <= 2 * waits[0]) and self.limit < self.ceiling:
            # Calm, or slow alike (no spread over the quickest: no queue). Growing only under the target
            # left a limit cut during a burst at its floor for as long as the service stayed slow for every
            # command: the floor's few commands served a fraction of what the service could take (issue 28).
            self.limit += 1


class Admission:
    """Whether a new command may start now (``refusal``: None, or why not) and what each finished command's wait
    teaches (``finished``): the in-flight limit, the event loop's lag and the standing-queue test in one place,
    for the protocol's early refusal and the handlers alike, with the clock passed in (a test drives it)."""

    def __init__(self, limit: AdaptiveLimit, queue: StandingQueue, lag: LoopLag, max_lag_ms: int,
                 min_inflight: int) -> None:
        self.limit = limit
        self.queue = queue
        self.lag = lag
        self.max_lag_ms = max_lag_ms
        # Below this many in flight the lag and standing-queue tests do not refuse: enough commands to go on
        # judging (and a command admitted below it waits for no queue of ours: ``calm``).
        self.min_inflight = min_inflight

    def refusal(self, inflight: int, now: float) -> str | None:
        limit = self.limit.current(now)
        if inflight >= limit:
            if limit == self.limit.ceiling:
                return f"{inflight} commands in flight in this gateway process"
            return (f"{inflight} commands in flight in this gateway process: its limit for now ({limit} of "
                    f"{self.limit.ceiling}), lowered after commands queued")
        if inflight < self.min_inflight:
            return None
        # Its own lateness only: the time it waited for a CPU other processes held is no queue of its own.
        if self.max_lag_ms and self.lag.own_lag_ms > self.max_lag_ms:
            return f"requests wait {self.lag.own_lag_ms:.0f} ms before this gateway process starts them"
        if self.queue.standing(now):
            return f"commands wait {self.queue.quickest_s * 1000:.0f} ms or more for the engine"
        return None

    def calm(self, inflight: int) -> bool:
        """Whether a command admitted with ``inflight`` in flight (itself included) waits for no queue of ours."""
        return inflight <= self.min_inflight

    def finished(self, wait_s: float, now: float, answered: bool, calm: bool) -> None:
        """A command's wait, submit to outcome; ``answered`` False: it timed out (the limit takes that whole
        wait; the queue test learns nothing more from it than from the timeout)."""
        if answered:
            self.queue.record(wait_s, now, calm)
        self.limit.record(wait_s, now)
