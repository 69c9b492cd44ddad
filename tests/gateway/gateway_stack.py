"""The gateway tests' stack: engine and projector processes on a Redis, the landed rule-sets, gateway settings.

These tests attack the gateway's HTTP side, so its gateways hold no shard (ALMANAC_ENGINE_SHARDS=none) in front of
a shard process (``almanac engine``, the same Engine every gateway runs): killing that one process is how they
take the deciding side away. The product's shape, gateways that decide their own shards (a gateway started with
ALMANAC_ENGINE_SHARDS=all here), has its stories in test_gateway_engine*.py, test_gateway_up_demo.py,
tests/services/test_bench_layouts.py and tests/cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import redis
from suite_settings import suite_settings

from almanac.events import registry
from almanac.services.settings import Settings
from almanac.storage.keys import engine_heartbeat_key, engines_key

CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on ``port`` (IPv4 or IPv6; Linux's /proc; True without it)."""
    try:
        rows = [line.split() for table in ("/proc/net/tcp", "/proc/net/tcp6")
                for line in Path(table).read_text().splitlines()[1:]]
    except OSError:
        return True
    listening = {f"socket:[{row[9]}]" for row in rows if row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port}
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{descriptor}") in listening:
                return True
    return False


def landed_rulesets() -> list[str]:
    """Every built-in rule-set (all four are played over HTTP)."""
    return registry.installed()


class Stack:
    def __init__(self, redis_url: str, data_dir: Path) -> None:
        self.redis_url = redis_url
        self.data_dir = data_dir
        self.env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_DATA_DIR": str(data_dir),
                    "ALMANAC_LOG_LEVEL": "warning", "ALMANAC_LOG_FORMAT": "json"}
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        log = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        self.processes[name] = subprocess.Popen([sys.executable, "-c", CHILD, name], env=self.env,
                                                stdout=log, stderr=subprocess.STDOUT)
        log.close()

    # How long a child process may take to start: no speed is asserted, only that it comes up. Generous, since on
    # a busy machine (the suite's four workers on two cores, or a shared host) an import alone can take 30 s; a
    # child that exits is reported at once.
    STARTUP_S = 120.0

    def wait_ready(self, timeout_s: float = STARTUP_S) -> None:
        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for name, process in self.processes.items():
                    if process.poll() is not None:
                        raise RuntimeError(f"{name} exited: {self.log(name)}")
                held, consumed = 0, False
                for engine in client.smembers(engines_key()):
                    beat = client.get(engine_heartbeat_key(engine.decode()))
                    if beat:
                        beat = json.loads(beat)
                        held = max(held, len(beat.get("shards_held", [])))
                        # Ready as /health means it: a consume round completed (not only the leases taken).
                        consumed = consumed or beat.get("consumed_ms", 0) > beat.get("redis_error_ms", 0)
                projectors = list(client.scan_iter(match="alm:projector:heartbeat:*"))
                if held >= 16 and consumed and (projectors or "projector" not in self.processes):
                    return
                time.sleep(0.1)
        finally:
            client.close()
        raise RuntimeError(f"engine/projector not ready: {self.log('engine')} {self.log('projector')}")

    def start_gateway(self, name: str = "gateway", max_files: int | None = None, preload: str | None = None,
                      **env: str) -> str:
        """A real gateway process (uvicorn with the gateway's own HTTP protocol) on a free port, with these
        settings on top of the stack's (holding no shard unless ``env`` gives it ALMANAC_ENGINE_SHARDS); its URL once
        ``/health`` answers 200. ``name``: its process and log
        (a second gateway beside the first takes another); ``max_files``: its limit of open files; ``preload``: a
        module of tests/ whose ``plant()`` runs before the gateway is built (tests/planted_leak.py). A port taken
        by another process between the probe and the gateway's bind (test workers start processes side by side)
        is tried again on another."""
        child = CHILD
        if preload is not None:
            tests = str(Path(__file__).resolve().parent.parent)
            child = f"import sys; sys.path.insert(0, {tests!r}); import {preload}; {preload}.plant(); {CHILD}"
        for _ in range(5):
            url = self._spawn_gateway(name, child, max_files, env)
            if url is not None:
                return url
        raise RuntimeError(f"the gateway found no free port in 5 tries: {self.log(name)}")

    def _spawn_gateway(self, name: str, child: str, max_files: int | None, env: dict[str, str]) -> str | None:
        """The gateway's URL once healthy; None if its port was taken before it could bind."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log_path = self.data_dir / f"{name}.log"
        logged = log_path.stat().st_size if log_path.exists() else 0
        log = open(log_path, "ab")  # noqa: SIM115 - the child owns it
        process = self.processes[name] = subprocess.Popen(
            [sys.executable, "-c", child, "gateway"],
            env={**self.env, "ALMANAC_ENGINE_SHARDS": "none", "ALMANAC_HTTP_PORT": str(port), **env},
            stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=None if max_files is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                                  (max_files, max_files)))
        log.close()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.STARTUP_S
        # One client for the polls: httpx.get builds a client, and its TLS context (the CA bundle read and parsed),
        # at each call: ~25 ms of the worker's CPU per poll, taken from the gateway starting beside it.
        with httpx.Client(timeout=1) as http:
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    # Only our process's 200: another worker's process may bind the probed port first (our gateway
                    # then exits, address in use), and its answers would pass for ours until it stops.
                    if http.get(f"{url}/health").status_code == 200 and listens_on(process.pid, port):
                        return url
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        if process.poll() is not None and b"address already in use" in log_path.read_bytes()[logged:]:
            return None
        raise RuntimeError(f"the gateway did not become healthy: {self.log(name)}")

    def log(self, name: str, tail: int = 2000) -> str:
        path = self.data_dir / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def engine_and_projector(redis_url: str, data_dir: Path, env: dict[str, str] | None = None) -> Iterator[Stack]:
    """An emptied Redis with an engine and a projector process on it, ready (the gateway tests' module stack),
    ``env`` on top of the stack's environment; stopped afterwards."""
    redis.Redis.from_url(redis_url).flushdb()
    running = Stack(redis_url, data_dir)
    running.env.update(env or {})
    try:
        running.start("engine")
        running.start("projector")
        running.wait_ready()
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def engine_and_gateway(redis_url: str, data_dir: Path, **gateway_env: str) -> Iterator[tuple[str, Stack]]:
    """An emptied Redis, an engine process and a real gateway process with ``gateway_env`` on top of the
    stack's settings: the gateway's URL and the stack, stopped afterwards."""
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, data_dir)
    try:
        stack.start("engine")
        stack.wait_ready()
        yield stack.start_gateway(**gateway_env), stack
    finally:
        stack.stop()


@contextlib.contextmanager
def client_stack(redis_url: str, data_dir: Path, secret: str) -> Iterator[tuple[str, str, Stack]]:
    """What the packaged clients' stories play against: an emptied Redis, engine, projector and a gateway process
    sharing ``secret``; the gateway's URL, an auditor's token for every room, and the stack, stopped afterwards."""
    from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner  # noqa: PLC0415 - tests only

    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, data_dir)
    stack.env["ALMANAC_SECRET"] = secret
    try:
        stack.start("engine")
        stack.start("projector")
        stack.wait_ready()
        url = stack.start_gateway()
        yield url, TokenSigner(secret, 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR), stack
    finally:
        stack.stop()


def http_answers(raw: bytes, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """``count`` HTTP/1.x answers (status, headers, body) parsed from one connection's bytes."""
    answers = []
    for _ in range(count):
        head, _, raw = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        answers.append((int(lines[0].split()[1]), headers, raw[:length]))
        raw = raw[length:]
    return answers


def open_board_rooms(url: str, prefix: str, count: int) -> list[tuple[str, str]]:
    """(room, token) of ``count`` new board rooms, each with player p seated."""
    rooms = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for index in range(count):
            created = http.post("/rooms", json={"ruleset": "board", "player": "p", "room": f"{prefix}-{index}"})
            assert created.status_code == 201, created.text
            rooms.append((created.json()["room"], created.json()["token"]))
    return rooms


def gateway_settings(stack: Stack, **overrides: object) -> Settings:
    settings = suite_settings(redis_url=stack.redis_url, data_dir=str(stack.data_dir))
    return settings.model_copy(update={"command_timeout_ms": 10_000, "engine_shards": "none", **overrides})


@contextlib.contextmanager
def redis_commands_seen(redis_url: str) -> Iterator[list[str]]:
    """Every command Redis runs (MONITOR, the commands inside scripts too) while the block runs, as Redis prints
    them (``XRANGE key 1-0 1-0 COUNT 1000``); the list is complete once the block has left."""
    seen: list[str] = []
    failed: list[BaseException] = []
    started = threading.Event()
    marker = f"almanac-monitor-done-{os.getpid()}-{time.monotonic_ns()}"  # this watch's own end

    def watch() -> None:
        try:
            with redis.Redis.from_url(redis_url).monitor() as monitor:
                started.set()
                for command in monitor.listen():
                    if command["command"] == f"ECHO {marker}":
                        return
                    seen.append(command["command"])
        except BaseException as error:  # noqa: BLE001 - raised in the test's thread below
            failed.append(error)
            started.set()

    watching = threading.Thread(target=watch, daemon=True)
    watching.start()
    if not started.wait(10) or failed:
        raise RuntimeError(f"MONITOR did not start: {failed}")
    time.sleep(0.2)  # MONITOR is on in Redis before the block sends anything
    try:
        yield seen
    finally:
        client = redis.Redis.from_url(redis_url)
        client.echo(marker)
        client.close()
        watching.join(10)
    if failed:
        raise RuntimeError("MONITOR failed while watching") from failed[0]
    if watching.is_alive():
        raise RuntimeError("MONITOR never saw the end of the block")


def seated_realm_answers(api: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A realm@1 room of alice-X and bob-X (X fresh), both seated through the API: (room, alice's create answer,
    bob's join answer), each answer with its ``player``, ``token`` and ``seat_key``."""
    suffix = secrets.token_hex(3)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    created = api.post("/rooms", json={"ruleset": "realm@1", "player": alice, "options": {"players": [alice, bob]}})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    joined = api.post(f"/rooms/{room}/join", json={"player": bob})
    assert joined.status_code == 200, joined.text
    return room, created.json(), joined.json()


def seated_realm(api: Any) -> tuple[str, str, str, dict[str, str]]:
    """The room of ``seated_realm_answers`` as (room, alice, bob, {player: token})."""
    room, created, joined = seated_realm_answers(api)
    alice, bob = created["player"], joined["player"]
    return room, alice, bob, {alice: created["token"], bob: joined["token"]}
