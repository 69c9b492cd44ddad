"""`almanac bench idle`: the CPU an idle default stack (`almanac up`, embedded Redis) spends per second, per process.

No traffic: what each process burns waiting (polling loops, timers) is the whole bill of a mostly idle deployment.
Each window reads every process's user+system CPU time (psutil ``cpu_times``) at its start and end; the figure is
ms of CPU per second of wall time. The baseline, measured in the same windows, is as many bare Python processes
idling in an asyncio loop as the stack has Python children (what an interpreter costs doing nothing).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil
from rich.table import Table

from almanac.bench.children import stop
from almanac.bench.common import output_console
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack

console = output_console()
SETTLE_S = 5.0  # after the stack is healthy: start-up work (rescans, first reads) is not idling
_IDLE_PYTHON = "import asyncio; asyncio.run(asyncio.sleep(1e9))"


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _processes(stack: Stack) -> dict[str, psutil.Process]:
    """The stack's children by name, and its embedded Redis (a child of this process)."""
    found = {name: psutil.Process(child.pid) for name, child in stack.children.items()}
    for child in psutil.Process().children(recursive=True):
        if child.name().startswith("redis-server"):
            found["redis"] = child
    return found


def _window(processes: dict[str, psutil.Process], baseline: list[psutil.Process], seconds: float) -> dict[str, float]:
    """ms of CPU per second of each process over one window of ``seconds``, and the baseline's sum."""
    before = {name: _cpu_s(p) for name, p in processes.items()}
    base_before = sum(_cpu_s(p) for p in baseline)
    started = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - started
    figures = {name: (_cpu_s(p) - before[name]) * 1000 / wall for name, p in processes.items()}
    figures["total"] = sum(figures.values())
    figures["baseline"] = (sum(_cpu_s(p) for p in baseline) - base_before) * 1000 / wall
    return figures


def main(settings: Settings, seconds: float, runs: int) -> list[dict[str, float]]:
    """Start a default stack of our own, let it settle, measure ``runs`` windows of ``seconds``; print, return."""
    with tempfile.TemporaryDirectory(prefix="almanac-bench-idle-") as data_dir:
        os.environ.setdefault("ALMANAC_LOG_LEVEL", "warning")
        stack_settings = settings.model_copy(update={"data_dir": data_dir, "http_port": 0, "log_level": "warning",
                                                     "redis_url": None, "redis_cluster": False})
        console.print(f"starting the default stack; then {runs} idle windows of {seconds:g} s ...")
        with Stack(stack_settings, say=console.print) as stack:
            stack.start()
            baseline = [subprocess.Popen([sys.executable, "-c", _IDLE_PYTHON]) for _ in stack.children]
            try:
                time.sleep(SETTLE_S)
                processes = _processes(stack)
                base = [psutil.Process(p.pid) for p in baseline]
                windows = []
                for index in range(runs):
                    windows.append(_window(processes, base, seconds))
                    console.print(f"window {index + 1}: total {windows[-1]['total']:.1f} ms/s")
            finally:
                for process in baseline:
                    stop(process)
    _print(windows, seconds)
    return windows


def _print(windows: list[dict[str, float]], seconds: float) -> None:
    table = Table(title=f"Idle CPU, ms per second ({len(windows)} windows of {seconds:g} s)")
    for column in ("process", "median", "min", "max", "per window"):
        table.add_column(column, justify="left" if column in ("process", "per window") else "right")
    for name in windows[0]:
        values = [w[name] for w in windows]
        table.add_row(name, f"{statistics.median(values):.2f}", f"{min(values):.2f}", f"{max(values):.2f}",
                      " ".join(f"{v:.1f}" for v in values))
    console.print(table)
    total = statistics.median(w["total"] for w in windows)
    base = statistics.median(w["baseline"] for w in windows)
    # An idle interpreter often spends less than psutil's tick (10 ms) in a window: no ratio to nothing.
    ratio = f"ratio {total / base:.1f}x" if base >= 0.05 else "ratio: n/a (the baseline is below the tick)"
    console.print(f"total {total:.2f} ms/s; baseline (as many idle Python processes) {base:.2f} ms/s; {ratio}")
