"""Disjoint CPUs for a benchmark's own stack and its load generator, on a machine with two or more.

Past capacity the load generator sends several times the requests the stack can serve, and on shared cores the CPU
it spends on them is taken from the stack it measures: ``bench e2e --overload`` then compares a capacity window in
which the generator used 0.06-0.09 of a core with an overload window in which it used 0.15-0.22 (issue 28, item
19), and part of the shortfall it reports is its own. Pinned, the generator's CPUs are not the stack's, in every
window alike. Other processes of the machine are not pinned and may still run anywhere: the windows report theirs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class CoreSplit:
    """The CPUs the stack's processes run on, and the load generator's: disjoint."""

    stack: frozenset[int]
    generator: frozenset[int]

    def describe(self) -> str:
        return (f"the stack's processes on CPU {_cpus(self.stack)}, the load generator on CPU {_cpus(self.generator)} "
                "(os.sched_setaffinity; other processes of the machine are not pinned)")


def split(allowed: Iterable[int]) -> CoreSplit | None:
    """The generator gets a quarter of the ``allowed`` CPUs (at least one: the last), the stack the rest; None with
    fewer than two, where nothing can be kept apart. At 3x the generator needs about a fifth of a core on this
    machine, so a quarter of a larger one is ample, and the stack keeps the most."""
    cpus = sorted(allowed)
    if len(cpus) < 2:
        return None
    mine = max(1, len(cpus) // 4)
    return CoreSplit(frozenset(cpus[:-mine]), frozenset(cpus[-mine:]))


def pin(pid: int, cpus: frozenset[int]) -> None:
    """Every thread of process ``pid`` onto ``cpus``: a thread has its own mask (a new one inherits its creator's),
    so pinning the process's id alone would leave the threads it already started (Redis's I/O threads) where they
    were. A process or thread gone meanwhile is skipped."""
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        threads = [pid]
    for tid in threads:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def kept_apart(cores: CoreSplit | None) -> Iterator[None]:
    """Within: this process on the stack's CPUs (so every child it starts, Redis included, inherits them) until
    ``generate`` moves it onto the generator's; its own CPUs restored after. Nothing with ``cores`` None."""
    if cores is None:
        yield
        return
    before = os.sched_getaffinity(0)
    pin(os.getpid(), cores.stack)
    try:
        yield
    finally:
        pin(os.getpid(), frozenset(before))


def generate(cores: CoreSplit, stack_pids: Iterable[int]) -> None:
    """The stack's processes (started within ``kept_apart``) pinned again, each thread of each, and this process
    moved onto the generator's CPUs: from here on what it starts (a baseline server) inherits those, unless
    pinned to the stack's with ``pin``."""
    for pid in stack_pids:
        pin(pid, cores.stack)
    pin(os.getpid(), cores.generator)


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))
