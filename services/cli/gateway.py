"""`almanac gateway`, `almanac up` (Redis, engine, projector and gateway as supervised children), `almanac demo`, `almanac token`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from almanac.services.bootstrap import UP_FILE, quiet_httpx, running_stack
from almanac.services.cli import app
from almanac.services.cli.common import console, fail, redis_url_for, settings_or_exit
from almanac.services.heap import freeze_startup_heap
from almanac.services.settings import Settings

# Each child runs this CLI again in the same interpreter (the console script may not be on PATH).
_CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


@app.command("gateway")
def gateway_command(
    host: str = typer.Option(None, help="Interface to listen on (ALMANAC_HTTP_HOST, default 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (ALMANAC_HTTP_PORT, default 8000)."),
) -> None:
    """Run the HTTP and WebSocket gateway (uvicorn) on REDIS_URL, or on the data directory's Redis."""
    import uvicorn  # noqa: PLC0415 - keep the CLI start fast

    from almanac.services.gateway import create_app  # noqa: PLC0415
    from almanac.services.gateway.protocol import server_options  # noqa: PLC0415
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    settings = settings_or_exit(http_host=host, http_port=port)
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        settings = _with(settings, redis_url=url)
        # Ready: the start-up heap leaves the collections (services/heap.py).
        # uvloop and httptools (pinned, the fast C paths), proxy headers only from ALMANAC_TRUSTED_PROXIES.
        uvicorn.run(create_app(settings, on_ready=freeze_startup_heap), **server_options(settings))


@app.command("token")
def token_command(
    auditor: bool = typer.Option(False, "--auditor", help="An auditor token (all rooms, read-only audits)."),
    room: str = typer.Option(None, help="The room a player token is bound to."),
    player: str = typer.Option(None, help="The player a player token acts for."),
    ttl: int = typer.Option(None, help="Lifetime in seconds (default ALMANAC_TOKEN_TTL_S)."),
) -> None:
    """Print a signed token made with this data directory's secret (for operators and scripts)."""
    from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner, resolve_secret  # noqa: PLC0415

    settings = settings_or_exit()
    signer = TokenSigner(resolve_secret(settings.secret, settings.data_dir), settings.token_ttl_s)
    if auditor:
        print(signer.issue(room or ANY_ROOM, "auditor", ROLE_AUDITOR, ttl))
    elif room and player:
        print(signer.issue(room, player, ttl_s=ttl))
    else:
        raise fail("give --auditor, or both --room and --player")


@app.command("up")
def up_command(
    port: int = typer.Option(None, help="Gateway port (ALMANAC_HTTP_PORT, default 8000; 0 picks a free one)."),
) -> None:
    """Start everything: Redis (embedded unless REDIS_URL), engine, projector and gateway; Ctrl-C stops all."""
    settings = settings_or_exit(http_port=port)
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    configure_logging(settings.log_format, settings.log_level)
    with Stack(settings) as stack:
        stack.start()
        console.print(f"[bold green]Almanac is up[/] at [bold]{stack.url}[/]  (API docs: {stack.url}/docs)")
        console.print(f"Redis: {stack.redis_url}   data: {stack.data_dir}")
        console.print(f"Auditor token: {stack.auditor_token}", soft_wrap=True, highlight=False)
        console.print("Try: [bold]almanac demo[/] in another terminal.  Ctrl-C stops everything.")
        stack.supervise()


@app.command("demo")
def demo_command(
    url: str = typer.Option(None, help="A running gateway (default: the `almanac up` of this data directory, "
                                       "or start one)."),
    auditor_token: str = typer.Option(None, envvar="ALMANAC_AUDITOR_TOKEN", help="Needed with --url."),
) -> None:
    """Create a room of every rule-set, play a short game of each over HTTP, print scores and verification."""
    from almanac.services.gateway.demo import run_demo  # noqa: PLC0415

    settings = settings_or_exit()
    if url:
        if not auditor_token:
            raise fail("--url needs --auditor-token (printed by `almanac up`, or `almanac token --auditor`)")
        raise typer.Exit(0 if run_demo(url.rstrip("/"), auditor_token, console) else 1)
    running = running_stack(settings.data_dir)
    if running is not None:
        console.print(f"Using the running stack at {running['url']}")
        raise typer.Exit(0 if run_demo(running["url"], running["auditor_token"], console) else 1)
    console.print("No `almanac up` running here: starting one for the demo.")
    with Stack(_with(settings, http_port=0)) as stack:
        stack.start()
        passed = run_demo(stack.url, stack.auditor_token, console)
    raise typer.Exit(0 if passed else 1)


def _with(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


class Stack:
    """Redis (embedded unless REDIS_URL) plus engine, projector and gateway children, restarted if one dies.

    ``engines`` > 1 splits the shards into that many groups (``ALMANAC_ENGINE_SHARDS=i/N``, one process
    each); ``gateways`` > 1 starts that many gateway processes, each on its own port (``urls``), for a
    load balancer or a client that spreads its connections (``almanac bench e2e --gateways``).
    """

    RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)

    def __init__(self, settings: Settings, engines: int | None = None, gateways: int = 1) -> None:
        self.settings = settings
        # With ALMANAC_GATEWAY_ENGINE the gateways hold the leases and decide: no engine process by default.
        self.engines = engines if engines is not None else (0 if settings.gateway_engine else 1)
        self.gateways = gateways
        self.data_dir = Path(settings.data_dir).resolve()
        self.children: dict[str, subprocess.Popen] = {}
        # Child name -> (service command, its own environment on top of the stack's)
        self._child_specs: dict[str, tuple[str, dict[str, str]]] = {}
        self.restarts: dict[str, int] = {}
        self._redis_context = redis_url_for(settings, create=True)
        self.redis_url = ""
        self.url = ""
        self.urls: list[str] = []
        self.auditor_token = ""
        self._stopping = False

    def __enter__(self) -> Stack:
        self.data_dir.mkdir(parents=True, exist_ok=True)
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
            "ALMANAC_GATEWAY_ENGINE": "true" if self.settings.gateway_engine else "false",
        }
        for service in self._services():
            copies = {"engine": self.engines, "gateway": self.gateways}.get(service, 1)
            for index in range(copies):
                name = service if index == 0 else f"{service}-{index + 1}"
                own_env = {}
                if service == "engine" and copies > 1:
                    own_env = {"ALMANAC_ENGINE_SHARDS": f"{index}/{copies}", "ALMANAC_ENGINE_NAME": name}
                elif service == "gateway":
                    own_env = {"ALMANAC_HTTP_PORT": str(ports[index])}
                    if self.settings.gateway_engine and copies > 1:
                        # Deciding gateways split the shards as engine groups do (else the first takes them all).
                        own_env["ALMANAC_ENGINE_SHARDS"] = f"{index}/{copies}"
                self._child_specs[name] = (service, own_env)
                self._spawn(name)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._wait_ready(timeout_s)
        self._write_up_file()

    def _services(self) -> list[str]:
        from almanac.services.cli import _load_commands  # noqa: PLC0415 - used outside the CLI too (benchmarks, tests)

        _load_commands()
        # Only the services whose commands are installed: the stack grows as they land.
        registered = {command.name for command in app.registered_commands}
        return [name for name in ("engine", "projector") if name in registered] + ["gateway"]

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
        while time.monotonic() < deadline:
            for name, child in self.children.items():
                if child.poll() is not None:
                    tail = (self.data_dir / f"{name}.log").read_text(errors="replace")[-1500:]
                    raise fail(f"the {name} exited with code {child.returncode} while starting:\n{tail}")
            try:
                for url in self.urls:  # every gateway answers, and the engines hold every shard
                    with quiet_httpx():  # a 503 per try until ready is not news
                        health = httpx.get(f"{url}/health", timeout=1.0).json()
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
        raise fail(f"the stack did not become healthy within {timeout_s:.0f} s; logs are in {self.data_dir}")

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
                        console.print(f"[yellow]{name} exited with code {child.returncode}; restarting in "
                                      f"{pause:g} s (log: {self.data_dir / (name + '.log')})[/]")
                        time.sleep(pause)
                        self.restarts[name] = count + 1
                        self._spawn(name)
                        self._write_up_file()
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        console.print("Stopping...")

    def _on_sigterm(self, signum: int, frame: object) -> None:
        self._stopping = True
        raise KeyboardInterrupt

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(FileNotFoundError):
            path = self.data_dir / UP_FILE
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        # The gateway first (no new commands), then the engine, then the projector drains what is left.
        for service in ("gateway", "engine", "projector"):
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
