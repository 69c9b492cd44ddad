"""The peer of `bench e2e --peer`: boardgame.io's server (Node, matches in memory, socket.io) offered the same schedule."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from almanac.bench.children import stop

PEER_FOLDER = Path(__file__).parent / "boardgameio"
# package.json pins boardgame.io 0.50.2 and overrides koa-compose to 4.1.0: with the newer koa-compose that its
# range admits, the lobby answers 404 on every route. The lock pins every package by its hash.
PEER_FILES = ("package.json", "package-lock.json", "game.js", "server.js", "load.js")
INSTALL_TIMEOUT_S = 300
# npm's wait for each answer of the registry, and no retries: a registry that takes connections and never
# answers is offline within seconds (npm's own defaults, 5 minutes and 2 retries, ran into INSTALL_TIMEOUT_S).
# Defaults only: npm_config_fetch_timeout or npm_config_fetch_retries in the environment win.
NPM_FETCH = {"npm_config_fetch_timeout": "10000", "npm_config_fetch_retries": "0"}
READY_TIMEOUT_S = 30


class PeerUnavailable(Exception):
    """The peer could not be measured here (no node or npm, its install, start or load failed): said, not raised."""


class PeerOffline(PeerUnavailable):
    """``npm ci`` could not reach the registry, or what answered does not serve the lockfile's pinned packages (a
    proxy or mirror answering 404/403 for every one): a fact of this machine's network, not a fault of the peer."""


# npm's error codes for a registry it cannot reach (or may not reach: --offline with nothing cached).
NETWORK_CODES = frozenset({"ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ENETUNREACH",
                           "EHOSTUNREACH", "ENETDOWN", "ERR_SOCKET_TIMEOUT", "ENOTCACHED", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
                           "SELF_SIGNED_CERT_IN_CHAIN", "E407", "E502", "E503", "E504",
                           "FETCH_ERROR"})  # FETCH_ERROR: no answer within the fetch timeout ("network timeout")
# A registry that answers but refuses or lacks the exact versions package-lock.json pins (they exist on npm's own).
NOT_SERVED_CODES = frozenset({"E401", "E403", "E404", "E410"})
_NPM_CODE = re.compile(r"^npm (?:ERR!|error) code (\S+)", re.MULTILINE)
_NPM_FETCH = re.compile(r"^npm (?:ERR!|error) (?:FetchError: )?((?:request to|network timeout at:) .*)$", re.MULTILINE)


def install_failure(stderr: str) -> PeerUnavailable:
    """What a failed ``npm ci`` said, as PeerOffline when its code is the network's, else PeerUnavailable."""
    code = _NPM_CODE.search(stderr)
    fetch = _NPM_FETCH.search(stderr)
    said = (f"{code.group(1)}: " if code else "") + (fetch.group(1) if fetch else stderr.strip()[-300:])
    if code and code.group(1) in NETWORK_CODES:
        return PeerOffline(f"npm ci of boardgame.io cannot reach the npm registry ({said[:300]})")
    if code and code.group(1) in NOT_SERVED_CODES:
        return PeerOffline(f"npm ci of boardgame.io: the npm registry here does not serve the pinned packages "
                           f"({said[:300]})")
    return PeerUnavailable(f"npm ci of boardgame.io failed: {said[:300]}")


def peer_figures(rate: int, seconds: int, schedule: dict[str, Any]) -> dict[str, Any]:
    """Start boardgame.io's server, offer it ``schedule`` (bench e2e's: moves, slots, played_before) at ``rate``
    moves/s for ``seconds`` through load.js, stop it; load.js's figures (version, matches, answered, unanswered,
    applied, achieved_per_s, p50_ms, p99_ms, late_p99_ms, server_cpu_s, server_cpu_ms_per_move, ...)."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        raise PeerUnavailable("node and npm are not on PATH")
    workdir = installed_peer()
    env = {**os.environ, "NODE_ENV": "production"}
    log = workdir / f"server-{os.getpid()}.log"
    with log.open("w") as output:  # a file, not a pipe: the server never blocks on a reader
        server = subprocess.Popen([node, "server.js"], cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        plan = {"rate": rate, "seconds": seconds, "port": _await_port(server, log), "serverPid": server.pid,
                "ticksPerSecond": os.sysconf("SC_CLK_TCK"), "moves": schedule["moves"], "slots": schedule["slots"],
                "playedBefore": schedule["played_before"]}
        try:
            load = subprocess.run([node, "load.js"], cwd=workdir, env=env, input=json.dumps(plan),
                                  capture_output=True, text=True, timeout=seconds * 10 + 300, check=False)
        except subprocess.TimeoutExpired as error:
            raise PeerUnavailable(f"the peer's load did not finish within {error.timeout:.0f} s") from error
        if load.returncode != 0:
            raise PeerUnavailable(f"the peer's load generator failed: {load.stderr.strip()[-300:]}")
        try:
            figures = json.loads(load.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError) as error:
            raise PeerUnavailable(f"the peer's load generator printed no figures: {load.stdout[-300:]!r}") from error
        if not figures["answered"] or not figures["applied"]:
            raise PeerUnavailable(f"the peer answered none of the {rate * seconds} moves")
        return checked_latencies(figures)
    finally:
        stop(server)
        log.unlink(missing_ok=True)


LATENCY_FIGURES = ("p50_ms", "p99_ms", "round_trip_p50_ms", "round_trip_p99_ms")


def checked_latencies(figures: dict[str, Any]) -> dict[str, Any]:
    """load.js's figures, refused (PeerUnavailable) when a latency is negative: an answer before its send is the
    measurement's fault (moves sent before their scheduled time printed a p50 of -0.10 ms, issue 28), never a figure."""
    negative = {name: figures[name] for name in LATENCY_FIGURES
                if isinstance(figures.get(name), int | float) and figures[name] < 0}
    if negative:
        raise PeerUnavailable("the peer's load measured a negative latency ("
                              + ", ".join(f"{name} {value:.2f}" for name, value in negative.items())
                              + "): a fault of the measurement, not printed")
    return figures


def installed_peer() -> Path:
    """A copy of the peer's files with its pinned packages installed (``npm ci``), kept between runs in the
    user's own cache folder (not a shared temporary one: what is installed there is run)."""
    digest = hashlib.sha256(b"".join(name.encode() + (PEER_FOLDER / name).read_bytes() for name in PEER_FILES))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    workdir = cache / "almanac" / f"bench-peer-{digest.hexdigest()[:16]}"
    installed = workdir / "node_modules" / ".almanac-installed"  # written last: an interrupted install is redone
    workdir.mkdir(parents=True, exist_ok=True)
    with (workdir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two benchmarks at once: one installs, the other waits for it
        if installed.exists():
            return workdir
        for name in PEER_FILES:
            shutil.copy(PEER_FOLDER / name, workdir / name)
        env = {**NPM_FETCH, **os.environ}
        _ping_registry(workdir, env)
        try:
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=workdir, check=True,
                           capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=env)
        except subprocess.CalledProcessError as error:
            raise install_failure(error.stderr) from error
        except subprocess.TimeoutExpired as error:
            raise PeerUnavailable(f"npm ci of boardgame.io took over {INSTALL_TIMEOUT_S} s") from error
        installed.touch()
    return workdir


def _ping_registry(workdir: Path, env: dict[str, str]) -> None:
    """PeerOffline when one request (``npm ping``) cannot reach the registry: ``npm ci`` would wait out the fetch
    timeout for each of the lock's ~160 packages, a few at a time. Any other failure of the ping (a registry
    without /-/ping) is left to ``npm ci`` to say."""
    ping = subprocess.run(["npm", "ping", "--loglevel=error"], cwd=workdir, capture_output=True, text=True,
                          timeout=INSTALL_TIMEOUT_S, env=env, check=False)
    if ping.returncode != 0:
        failure = install_failure(ping.stderr)
        if isinstance(failure, PeerOffline):
            raise failure


def _await_port(server: subprocess.Popen, log: Path) -> int:
    """The port the server listens on, once it prints "ready <port>" (its lines before are boardgame.io's)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            word, _, port = line.partition(" ")
            if word == "ready" and port.isdigit():
                return int(port)
        if server.poll() is not None:
            break
        time.sleep(0.05)
    raise PeerUnavailable(f"boardgame.io's server did not start: {log.read_text().strip()[-300:]}")
