"""The peer beside `bench e2e --peer`: boardgame.io's server (Node, matches in memory, socket.io) offered the same schedule."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

PEER_FILES = Path(__file__).parent / "boardgameio"  # package.json and its lock pin boardgame.io 0.50.2
INSTALL_TIMEOUT_S = 300
READY_TIMEOUT_S = 30


class PeerUnavailable(Exception):
    """The peer cannot run here (no node or npm, its install or start failed): the benchmark says so and goes on."""


def peer_figures(rate: int, seconds: int) -> dict[str, Any]:
    """Start boardgame.io's server, offer it ``rate`` moves/s for ``seconds`` (load.js), stop it; its figures.

    Keys: matches, answered, timeouts, achieved_per_s, p50_ms, p99_ms, server_cpu_s, server_cpu_ms_per_move.
    """
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        raise PeerUnavailable("node and npm are not on PATH")
    workdir = _installed()
    port = _free_port()
    log = workdir / f"server-{port}.log"
    with log.open("w") as output:  # a file, not a pipe: the server never blocks on a reader
        server = subprocess.Popen([node, "server.js"], cwd=workdir, env={**os.environ, "PORT": str(port)},
                                  stdout=output, stderr=subprocess.STDOUT)
    try:
        _await_ready(server, log)
        load = subprocess.run([node, "load.js", str(rate), str(seconds), str(server.pid), str(port)], cwd=workdir,
                              capture_output=True, text=True, timeout=seconds * 10 + 120, check=False)
        if load.returncode != 0:
            raise PeerUnavailable(f"the peer's load generator failed: {load.stderr.strip()[-300:]}")
        return json.loads(load.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.unlink(missing_ok=True)


def _installed() -> Path:
    """A copy of the peer's files with its pinned packages installed (``npm ci``), kept between runs."""
    files = sorted(PEER_FILES.iterdir())
    digest = hashlib.sha256(b"".join(path.name.encode() + path.read_bytes() for path in files)).hexdigest()[:16]
    workdir = Path(tempfile.gettempdir()) / f"almanac-bench-peer-{digest}"
    installed = workdir / "node_modules" / ".almanac-installed"
    if installed.exists():
        return workdir
    workdir.mkdir(exist_ok=True)
    for path in files:
        shutil.copy(path, workdir / path.name)
    try:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=workdir, check=True,
                       capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.CalledProcessError as error:
        raise PeerUnavailable(f"npm ci of boardgame.io failed: {error.stderr.strip()[-300:]}") from error
    except subprocess.TimeoutExpired as error:
        raise PeerUnavailable(f"npm ci of boardgame.io took over {INSTALL_TIMEOUT_S} s") from error
    installed.touch()
    return workdir


def _await_ready(server: subprocess.Popen, log: Path) -> None:
    """Until the server prints "ready" (the lines before it are boardgame.io's notices)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if "ready" in log.read_text().split():
            return
        if server.poll() is not None:
            break
        time.sleep(0.05)
    raise PeerUnavailable(f"boardgame.io's server did not start: {log.read_text().strip()[-300:]}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
