"""The gateway's admission of commands: one policy with two settings.

``ALMANAC_GATEWAY_MAX_INFLIGHT`` bounds how many commands a gateway process has started and not answered (and with
them its other bounds of work at once: ``Settings.max_outcome_waiters``, ``Settings.gateway_max_heavy_reads``);
``ALMANAC_GATEWAY_TARGET_WAIT_MS`` bounds how long they wait, beyond the service's own wait, before a queue is
said to stand (``StandingQueue``, CoDel's test). A command that would pass either bound is refused at once (503
``overloaded`` with Retry-After), never queued: a refusal costs microseconds and tells the client when to come
back, while a queue would add its wait to every command's latency.

Earlier versions also refused on the event loop's lateness and adapted the in-flight limit to the commands'
waits (issue 28, item 19; docs/capacity.md): each could starve the gateway on a machine whose CPU other
processes take (the loop is late by the time it waits for a CPU, and a uniformly slow service looks like a
queue), and with the standing-queue test in place neither improved goodput past capacity. They are gone.
"""

from __future__ import annotations

INTERVAL_S = 0.1  # the standing-queue test's interval
# Below this many in flight the standing-queue test does not refuse: enough commands to go on judging (and a
# command admitted below it waits for no queue of ours: ``Admission.calm``). A lone client on a slow machine
# (tests, a quiet server on a busy host) is never refused for a slow rule it did not cause.
MIN_INFLIGHT = 8
# A client refused for overload still counts as waiting for a slot this long (Retry-After, 1 s, and a margin):
# the share it is owed is kept for it while it comes back as told.
FAIR_WINDOW_S = 2.0
FAIR_TRACKED = 4_096  # waiting clients remembered at most (the oldest forgotten first): a bounded table


class StandingQueue:
    """CoDel's test on the commands' waits: a queue stands when even the quickest command of an interval
    waited longer than the target beyond the service's own wait.

    The in-flight limit bounds how many commands wait, not how long: past capacity the engine's queue
    fills, every accepted command waits its turn (hundreds of ms at twice the capacity), and the limit
    alone keeps accepting commands into that wait. A burst makes a few commands slow but leaves some
    quick ones; a queue that does not drain makes them all slow. So ``record`` takes each finished
    command's wait (submit to outcome), and ``standing`` says whether the last full interval's quickest
    one exceeded ``target_ms`` beyond the service's own wait (``base_s``): new commands are then refused (while
    ``MIN_INFLIGHT`` or more are in flight) until a command is quick again, or an interval passes with none
    finished (what was queued has drained: try again).

    The service's own wait is the mean wait of the commands admitted while few were in flight (``calm``: no
    queue of this gateway in front of them) in the latest interval that had any, however old: past capacity
    every command is admitted with many in flight until the test refuses, and the interval of refusals that
    follows measures it afresh. Against the target alone, a service slow for every command alike (a machine
    whose engine gets too little CPU, a remote Redis) made every interval's quickest wait exceed it: the queue
    "stood" for good, and only the few commands below ``MIN_INFLIGHT`` in flight were admitted (136/s with 95%
    refused at three times capacity, issue 28). Measured against the calm commands' waits, a slow service is no
    queue, and a real one still is.

    Not the least calm wait of the last second, as it was: a flood's first commands, admitted into an idle
    gateway, are calm and quick (1-2 ms), and then the flood's refusals make every wait a turn of the loop
    (20-60 ms with 8 in flight as with 32), which refusing cannot shorten. Held to those first commands' wait
    for a second, the test stood in up to 10 of a window's 20 intervals and held the gateway at 8 in flight while
    its refusals kept the loop as busy (issue 28, item 19, seventh pass: 0.70 of the in-flight limit's goodput in
    a flood's first 2 s, ``tests/gateway/test_admission_overload.py``). The latest calm commands say what
    the service's wait is now; their mean, not their least, so that one answered by luck sets nothing.
    """

    def __init__(self, target_ms: int, interval_s: float = INTERVAL_S) -> None:
        self.target_s = target_ms / 1000
        self.interval_s = interval_s
        self.quickest_s = 0.0  # the last full interval's quickest wait (what `standing` judged)
        self.base_s = 0.0  # the service's own wait, as the calm commands of the latest interval with any measured it
        self._standing = False
        self._ends = 0.0
        self._quickest = float("inf")
        self._calm_s = 0.0  # this interval's calm commands: their waits' sum, and how many
        self._calm_count = 0

    def record(self, wait_s: float, now: float, calm: bool = False) -> None:
        """A finished command's wait; ``calm``: it was admitted while few commands were in flight."""
        self._roll(now)
        if wait_s < self._quickest:
            self._quickest = wait_s
        if calm:
            self._calm_s += wait_s
            self._calm_count += 1
        if self._standing and wait_s <= self.target_s + self.base_s:
            self._standing = False  # one quick command is proof that the queue drained

    def standing(self, now: float) -> bool:
        if not self.target_s:
            return False
        self._roll(now)
        return self._standing

    def _roll(self, now: float) -> None:
        if now >= self._ends:
            if self._calm_count:
                self.base_s = self._calm_s / self._calm_count
                self._calm_s, self._calm_count = 0.0, 0
            finished_any = self._quickest != float("inf")
            self.quickest_s = self._quickest if finished_any else 0.0
            self._standing = finished_any and self._quickest > self.target_s + self.base_s
            self._quickest = float("inf")
            self._ends = now + self.interval_s


class Admission:
    """Whether a new command may start now (``refusal``: None, or why not) and what each finished command's wait
    teaches (``finished``): the in-flight limit and the standing-queue test, for the protocol's early refusal
    and the handlers alike, with the clock passed in (a test drives it).

    The reasons are the same two strings for the process's life, so a refusal's answer is encoded once
    (``protocol``): past capacity most requests are refused, and each refusal's cost is taken from the
    commands the gateway serves."""

    def __init__(self, max_inflight: int, target_wait_ms: int, min_inflight: int = MIN_INFLIGHT) -> None:
        self.max_inflight = max_inflight
        self.queue = StandingQueue(target_wait_ms)
        self.min_inflight = min_inflight
        self.at_limit = f"its limit of {max_inflight} commands in flight is reached (ALMANAC_GATEWAY_MAX_INFLIGHT)"
        self.queue_stands = (f"commands wait more than {target_wait_ms} ms beyond the engine's own wait "
                             "(ALMANAC_GATEWAY_TARGET_WAIT_MS)")

    def refusal(self, inflight: int, now: float) -> str | None:
        if inflight >= self.max_inflight:
            return self.at_limit
        if inflight >= self.min_inflight and self.queue.standing(now):
            return self.queue_stands
        return None

    def calm(self, inflight: int) -> bool:
        """Whether a command admitted with ``inflight`` in flight (itself included) waits for no queue of ours."""
        return inflight <= self.min_inflight

    def finished(self, wait_s: float, now: float, answered: bool, calm: bool) -> None:
        """A command's wait, submit to outcome; ``answered`` False: it timed out (the queue test learns nothing
        more from it than from the timeout)."""
        if answered:
            self.queue.record(wait_s, now, calm)


class FairShare:
    """The in-flight limit shared between the clients (addresses, ``gateway.address_key``) that compete for it:
    while another client was refused a command within ``window_s``, a client already holding its share (the
    limit divided by the clients holding or refused, at least 1) is refused its next command, so its flood
    cannot keep every slot full while others are refused (one attacker's closed loop took every slot freed before
    a player's retry could: issue 28). Nobody refused, nobody held back: clients that merely hold slots side by
    side (two load balancers, two bot hosts) may fill the limit between them. A client that holds no slot is never
    refused by its share, and one alone may hold them all (a load balancer, or a benchmark, is one client). The
    share held back for a refused client stays free until it comes back or the window passes: at most
    ``window_s`` of that share's capacity, and only while contested.

    Per gateway process, with the clock passed in, as ``Admission``."""

    def __init__(self, max_inflight: int, window_s: float = FAIR_WINDOW_S, tracked: int = FAIR_TRACKED) -> None:
        self.max_inflight = max_inflight
        self.window_s = window_s
        self.tracked = tracked
        self.holding: dict[str, int] = {}  # address -> slots it holds now
        self.waiting: dict[str, float] = {}  # address -> when it was last refused (oldest first)
        self.over_share = "this client holds its share of the commands in flight while other clients wait for one"

    def refusal(self, address: str, now: float) -> str | None:
        held = self.holding.get(address, 0)
        if not held:
            return None
        self._forget(now)
        if not any(other != address for other in self.waiting):
            return None  # nobody else is being refused: holding many slots keeps nobody out
        competing = len(self.holding.keys() | self.waiting.keys())
        if held < max(1, self.max_inflight // competing):
            return None
        return self.over_share

    def refused(self, address: str, now: float) -> None:
        # A client refused while holding slots waits too (a player's second command behind an attacker's flood).
        self.waiting.pop(address, None)  # to the end: the dict stays in refusal order
        self.waiting[address] = now
        if len(self.waiting) > self.tracked:
            del self.waiting[next(iter(self.waiting))]

    def hold(self, address: str) -> None:
        self.waiting.pop(address, None)
        self.holding[address] = self.holding.get(address, 0) + 1

    def release(self, address: str) -> None:
        held = self.holding[address] - 1
        if held:
            self.holding[address] = held
        else:
            del self.holding[address]

    def _forget(self, now: float) -> None:
        waiting = self.waiting
        while waiting:
            oldest = next(iter(waiting))
            if waiting[oldest] > now - self.window_s:
                return
            del waiting[oldest]
