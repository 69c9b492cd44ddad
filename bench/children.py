"""The benchmarks' child processes (a bare server, the peer's server): asked to stop, then killed if they do not."""

from __future__ import annotations

import subprocess

STOP_TIMEOUT_S = 10


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL if it has not exited within ``STOP_TIMEOUT_S``; reaped either way."""
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
