"""The benchmarks' server processes (bare uvicorn, bench refusal's, the peer's): asked to stop, then killed if they do not."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

STOP_TIMEOUT_S = 10


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL if it has not exited within ``STOP_TIMEOUT_S``; reaped either way."""
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port no one listens on now (another process may take it before the server does: check its answer)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerChild:
    """A server in a process of its own, so that its CPU is its own: ``command`` with ``--port`` a free port,
    started on entering (``with ServerChild(...) as server:``) and stopped on leaving; ``wait_answering`` waits
    for its answer."""

    def __init__(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        self.name, self.port, self.env = name, free_port(), env
        self.command = [*command, "--port", str(self.port)]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> ServerChild:
        self.process = subprocess.Popen(self.command, env=self.env)
        return self

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            stop(self.process)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_answering(self, answers: Callable[[str], bool], timeout_s: float) -> None:
        """Once ``answers(url)`` says the server answered, while its process runs (its own answer, from its own
        process: another server may have taken the port meanwhile); RuntimeError if not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.process is not None and self.process.poll() is None:
            if answers(self.url) and self.process.poll() is None:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the {self.name} server did not start on port {self.port}")
