"""`almanac up`'s process supervisor: Redis (embedded unless REDIS_URL) and the engine, projector, notifier, bots and gateway
processes, each a child running the CLI again, restarted when it dies. The CLI's `up` and `demo` and the
benchmarks start stacks through it (it imports neither)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from almanac.services import bootstrap
from almanac.services.bootstrap import UP_FILE, quiet_httpx
from almanac.services.settings import Settings

# Each child runs this CLI again in the same interpreter (the console script may not be on PATH).
_CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


class StackError(Exception):
    """A child of the stack did not start (it exited, or the stack never became healthy): one line and its log."""


class Stack:
    """Redis (embedded unless REDIS_URL) plus projector and gateway children, restarted if one dies.

    The gateways decide the commands of the shards they hold (the deployment shape, ALMANAC_ENGINE_SHARDS):
    ``gateways`` > 1 starts that many, each on its own port (``urls``) with its share of the shards
    (``ALMANAC_ENGINE_SHARDS=i/N``), for a load balancer or a client that spreads its connections
    (``almanac bench e2e --gateways``). ``engines`` > 0 starts that many `almanac engine` processes holding the
    shards instead (groups ``i/N``), and gateways that hold none (``ALMANAC_ENGINE_SHARDS=none``): the same
    engine, in other processes (``almanac bench e2e --engines N`` compares the two).
    """

    RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)

    def __init__(self, settings: Settings, engines: int = 0, gateways: int = 1,
                 say: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.say = say  # a line for the operator
        self.engines = engines  # 0: the gateways hold the leases and decide, no engine process
        self.gateways = gateways
        self.data_dir = Path(settings.data_dir).resolve()
        self.children: dict[str, subprocess.Popen] = {}
        # Child name -> (service command, its own environment on top of the stack's)
        self._child_specs: dict[str, tuple[str, dict[str, str]]] = {}
        self.restarts: dict[str, int] = {}
        self._redis_context = bootstrap.redis_url(settings, create=True)
        self.redis_url = ""
        self.url = ""
        self.urls: list[str] = []
        self.auditor_token = ""
        self._stopping = False

    def __enter__(self) -> Stack:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # its secrets, logs, AOF: its user's only
        self.redis_url = self._redis_context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._redis_context.__exit__(None, None, None)

    # --- starting ---------------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> None:
        from almanac.services.embedded_redis import free_port  # noqa: PLC0415
        from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner, resolve_secret  # noqa: PLC0415

        port = self.settings.http_port or free_port()
        host = self.settings.http_host
        ports = [port] + [free_port() for _ in range(self.gateways - 1)]
        self.urls = [f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{p}" for p in ports]
        self.url = self.urls[0]
        secret = resolve_secret(self.settings.secret, str(self.data_dir))
        signer = TokenSigner(secret, self.settings.token_ttl_s)
        self.auditor_token = signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        self.env = {
            **os.environ,
            "REDIS_URL": self.redis_url,
            "REDIS_CLUSTER": "true" if self.settings.redis_cluster else "false",
            "ALMANAC_DATA_DIR": str(self.data_dir),
            "ALMANAC_HTTP_PORT": str(port),
            "ALMANAC_HTTP_HOST": host,
            "ALMANAC_SECRET": secret,
            # the bots process plays every bot seat through the stack's (first) gateway, by its public API
            "ALMANAC_BOTS_GATEWAY_URL": self.url,
        }
        for service in self._services():
            copies = {"engine": self.engines, "gateway": self.gateways}.get(service, 1)
            for index in range(copies):
                name = service if index == 0 else f"{service}-{index + 1}"
                own_env = {}
                if service == "engine":  # its group, whatever the stack's environment says
                    own_env = {"ALMANAC_ENGINE_SHARDS": f"{index}/{copies}" if copies > 1 else "all"}
                    if copies > 1:
                        own_env["ALMANAC_ENGINE_NAME"] = name
                elif service == "gateway":
                    own_env = {"ALMANAC_HTTP_PORT": str(ports[index])}
                    if self.engines:  # the engine processes hold the shards: the gateways hold none
                        own_env["ALMANAC_ENGINE_SHARDS"] = "none"
                    elif copies > 1:
                        # Deciding gateways split the shards as engine groups do (else the first takes them all).
                        own_env["ALMANAC_ENGINE_SHARDS"] = f"{index}/{copies}"
                self._child_specs[name] = (service, own_env)
                self._spawn(name)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._wait_ready(timeout_s)
        self._write_up_file()

    def _services(self) -> list[str]:
        # the archiver (ALMANAC_ARCHIVER, on by default) moves ended rooms out of Redis (services.archiver)
        # the bots play the seats handed to them (services.bots); idle, one pipelined read of the bot seats a round
        return ["engine", "projector", "notifier", "bots", "gateway"] + (["archiver"] if self.settings.archiver else [])

    def _spawn(self, name: str) -> None:
        service, own_env = self._child_specs[name]
        log = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it from here
        self.children[name] = subprocess.Popen(
            [sys.executable, "-c", _CHILD, service], env={**self.env, **own_env}, stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the supervisor only, which stops children in order
        )
        log.close()

    def _wait_ready(self, timeout_s: float) -> None:
        import httpx  # noqa: PLC0415

        deadline = time.monotonic() + timeout_s
        # One client for every poll: httpx.get builds a client (and reads the CA bundle for its TLS context) at
        # each call, ~25 ms of CPU ten times a second, taken from the children starting on the same cores.
        with httpx.Client(timeout=1.0) as http:
            while time.monotonic() < deadline:
                for name, child in self.children.items():
                    if child.poll() is not None:
                        tail = (self.data_dir / f"{name}.log").read_text(errors="replace")[-1500:]
                        raise StackError(f"the {name} exited with code {child.returncode} while starting:\n{tail}")
                try:
                    for url in self.urls:  # every gateway answers, and the engines hold every shard
                        with quiet_httpx():  # a 503 per try until ready is not news
                            health = http.get(f"{url}/health").json()
                        engine = health.get("engine", {})
                        engine_ok = ((engine.get("ok", True) and engine.get("ready", True))
                                     or "engine" not in self.children)
                        shards_held = health.get("engine", {}).get("shards_held", self.settings.shard_count)
                        if not (engine_ok and shards_held >= self.settings.shard_count):
                            break
                    else:
                        return
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(0.1)
        raise StackError(f"the stack did not become healthy within {timeout_s:.0f} s; logs are in {self.data_dir}")

    def _write_up_file(self) -> None:
        path = self.data_dir / UP_FILE
        payload = {"pid": os.getpid(), "url": self.url, "redis_url": self.redis_url,
                   "auditor_token": self.auditor_token,
                   "children": {name: child.pid for name, child in self.children.items()}}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a token
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle)

    # --- running and stopping ----------------------------------------------------------------------

    def supervise(self) -> None:
        """Restart a child that dies (with a growing pause) until Ctrl-C or SIGTERM."""
        try:
            while not self._stopping:
                for name, child in list(self.children.items()):
                    if child.poll() is not None and not self._stopping:
                        count = self.restarts.get(name, 0)
                        pause = self.RESTART_BACKOFF_S[min(count, len(self.RESTART_BACKOFF_S) - 1)]
                        self.say(f"{name} exited with code {child.returncode}; restarting in {pause:g} s "
                                 f"(log: {self.data_dir / (name + '.log')})")
                        time.sleep(pause)
                        self.restarts[name] = count + 1
                        self._spawn(name)
                        self._write_up_file()
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        self.say("Stopping...")

    def _on_sigterm(self, signum: int, frame: object) -> None:
        self._stopping = True
        raise KeyboardInterrupt

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(FileNotFoundError):
            path = self.data_dir / UP_FILE
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        # The gateway first (no new commands), then the engine, then the projector drains what is left; the
        # notifier last (what it has not delivered stays in its outbox for the next start); the archiver after.
        for service in ("gateway", "bots", "engine", "projector", "notifier", "archiver"):
            group = [child for name, child in self.children.items()
                     if self._child_specs[name][0] == service and child.poll() is None]
            for child in group:  # every process of a service stops together, then the next service
                child.send_signal(signal.SIGTERM)
            for child in group:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        self.children.clear()
