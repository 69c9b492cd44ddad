"""`almanac bench refusal`: the CPU of a command the connection guard refuses, against bare uvicorn in the same run.

Past capacity most command requests are refused (503 ``overloaded``), and each refusal's CPU is taken from the commands
the gateway accepted: with rho a refusal's cost over an accepted command's, goodput at three times capacity is at most
(1 - 3 rho) / (1 - rho) of it (issue 28, item 19). ``bench e2e --overload`` derives a refusal's cost from whole-stack
windows, where a tenth off a command's cost moves it by tens of microseconds; this measures a refusal alone.

Each server is a process of its own under ``uvicorn.run``, offered the request ``bench e2e`` sends (its lean sender's
``POST /rooms/{room}/commands`` with a seat token and the script's first move, no command id) on ``--connections``
keep-alive connections, closed loop, one request at a time on each: the server's CPU (``/proc``) over the 503s it
answered. The servers, in turn each round, so that a machine shared with other work slows them alike:

- ``guard``: ``GuardedConnection`` as ``server_options`` runs it, over an app whose gateway refuses every command:
  ``Gateway.command_refusal`` itself, with admission at its in-flight limit (only the state that rule reads is built;
  no Redis). ``--against PATH``: the same server again from another checkout (``PYTHONPATH=PATH``, e.g. ``git
  archive main`` unpacked under PATH/almanac), alternated with this one;
- ``bare uvicorn``: ``bench e2e``'s baseline (``bare_http``: uvicorn's own httptools protocol and a bare ASGI app that
  reads the body and answers), what one request costs through uvicorn without the guard;
- ``floor``: a protocol that writes a fixed 503 for every read, parsing nothing: the loop's read, write and wake-up,
  which no change to the guard's Python can take off.

Then each guard's Python alone (``--serve python``: its ``data_received`` fed the same request, no socket, CPU time),
what a change to the guard's code can take off; the rest of a refusal is the loop's and the kernel's (the floor).

The server runs this file as a script (``--serve``), so that with ``--against`` it imports the other checkout's guard.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from almanac.bench.children import ServerChild

# A fixed 503 as the guard's, for the floor (its Retry-After and a body of the size ``errors.overloaded`` makes).
_FLOOR_BODY = b'{"error":{"code":"overloaded","message":"' + b"x" * 96 + b'"}}'
FLOOR_ANSWER = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"retry-after: 1\r\nx-request-id: 0123456789abcdef\r\n\r\n%s" % (len(_FLOOR_BODY), _FLOOR_BODY))
ROOM = "e2e-bench-0"  # a room name as ``bench e2e`` opens them
START_TIMEOUT_S = 30.0


# --- the servers (``--serve``: run as a script, under whichever checkout PYTHONPATH names) -------------------------


class _RefusingApp:
    """The gateway's app as the guard reads it (``state``: settings, gateway, cors off); a request the guard hands
    on is answered 500, which the load counts as a failure (the guard should have refused it)."""

    def __init__(self, settings: Any, gateway: Any) -> None:
        from starlette.datastructures import State  # noqa: PLC0415

        self.state = State()  # as the gateway's FastAPI app has it
        self.state.settings = settings
        self.state.gateway = gateway
        self.state.cors = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


class _Floor(asyncio.Protocol):
    """Answers every read with ``FLOOR_ANSWER``: one request per read, as the closed-loop load sends them."""

    def __init__(self, *_: Any, **__: Any) -> None:
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.transport.write(FLOOR_ANSWER)  # type: ignore[union-attr]


def _refusing_app() -> tuple[Any, Any]:
    """(settings, the gateway's app as the guard reads it), its gateway refusing every command."""
    from almanac.services.bootstrap import default_settings  # noqa: PLC0415
    from almanac.services.gateway.gateway import Gateway  # noqa: PLC0415
    from almanac.services.gateway.metrics import GatewayMetrics  # noqa: PLC0415
    from almanac.services.gateway.overload import Admission, FairShare  # noqa: PLC0415

    settings = default_settings()  # the defaults, whatever the environment says: the gateway's own admission
    # The state ``Gateway.command_refusal`` reads (admission, fair share, in flight, the shed count), at its
    # in-flight limit: the real rule refuses every command. The rest of a gateway (Redis, engine) is not built.
    gateway = Gateway.__new__(Gateway)
    gateway.settings = settings
    gateway.admission = Admission(settings.gateway_max_inflight, settings.gateway_target_wait_ms)
    gateway.fair = FairShare(settings.gateway_max_inflight)
    gateway.inflight = settings.gateway_max_inflight
    gateway.metrics = GatewayMetrics()
    return settings, _RefusingApp(settings, gateway)


def _serve(kind: str, port: int) -> None:
    import uvicorn  # noqa: PLC0415

    from almanac.services.gateway.connection_guard import server_options  # noqa: PLC0415
    from almanac.services.heap import collect_less_often  # noqa: PLC0415

    settings, app = _refusing_app()
    options = server_options(settings) | {"host": "127.0.0.1", "port": port, "lifespan": "off"}
    if kind == "floor":
        options["http"] = _Floor
    collect_less_often()  # as every `almanac` process
    uvicorn.run(app, **options)


class _Sink:
    """A transport that takes the guard's writes and does nothing else (``_python_alone``)."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40_000) if name == "peername" else default


def _python_alone(request: bytes, calls: int = 50_000, repeats: int = 5) -> float:
    """The guard's own cost of a refusal, no socket: its ``data_received`` fed the request ``calls`` times (CPU
    time, the least of ``repeats``). The parse (httptools) and the guard's Python: what a change to it can take off."""
    import gc  # noqa: PLC0415

    import uvloop  # noqa: PLC0415
    from uvicorn.config import Config  # noqa: PLC0415
    from uvicorn.server import ServerState  # noqa: PLC0415

    from almanac.services.gateway.connection_guard import GuardedConnection  # noqa: PLC0415

    settings, app = _refusing_app()
    config = Config(app, http=GuardedConnection, lifespan="off", interface="asgi3")
    config.load()
    loop = uvloop.new_event_loop()
    state = ServerState()
    state.default_headers = [(b"date", b"Sat, 05 Dec 2026 15:00:00 GMT"), (b"server", b"uvicorn")]
    guard = GuardedConnection(config, state, {}, _loop=loop)
    guard.connection_made(_Sink())  # type: ignore[arg-type]
    before = app.state.gateway.metrics.shed_pending
    gc.collect()
    gc.freeze()
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(calls):
            guard.data_received(request)
        best = min(best, time.process_time() - started)
    if app.state.gateway.metrics.shed_pending - before != calls * repeats:
        raise RuntimeError("the guard did not shed every request it was fed")
    return best / calls * 1e6


# --- the load and the figures ------------------------------------------------------------------------------------


def _answers(url: str, body: bytes, token: str) -> bool:
    """Whether the server at ``url`` answers a command request (through the sender the load uses)."""
    from almanac.bench.e2e import _run_loop  # noqa: PLC0415
    from almanac.client.command_sender import CommandSender  # noqa: PLC0415

    async def ask() -> bool:
        sender = CommandSender([url], 1)
        try:
            await sender.command(ROOM, body, token)
            return True
        except OSError:
            return False
        finally:
            await sender.close()

    return _run_loop(ask())


async def _flood(port: int, connections: int, seconds: float, body: bytes, token: str, rate: int) -> dict[int, int]:
    """``bench e2e``'s sender's command request for ``seconds``: answers by status. ``rate`` 0: ``connections`` closed
    loops (as fast as the server and the load go); else ``rate``/s on schedule, open loop, as ``bench e2e`` offers a
    rate (the same arrivals for every server, whatever its speed)."""
    from almanac.client.command_sender import CommandSender  # noqa: PLC0415

    sender = CommandSender([f"http://127.0.0.1:{port}"], connections)
    statuses: dict[int, int] = {}

    async def send() -> None:
        status, _, _ = await sender.command(ROOM, body, token)
        statuses[status] = statuses.get(status, 0) + 1

    async def loop() -> None:
        while time.monotonic() < ends:
            await send()

    try:
        if not rate:
            ends = time.monotonic() + seconds
            await asyncio.gather(*(loop() for _ in range(connections)))
        else:
            started, tasks = time.perf_counter(), []
            for index in range(int(rate * seconds)):
                delay = started + index / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send()))
            await asyncio.gather(*tasks)
    finally:
        await sender.close()
    return statuses


def _measure(server: ServerChild, connections: int, seconds: float, body: bytes, token: str,
             rate: int) -> tuple[float, int, float]:
    """(server CPU µs per answer, answers, answers/s) over one window, after a short warm-up."""
    from almanac.bench.e2e import _run_loop, cpu_seconds  # noqa: PLC0415

    _run_loop(_flood(server.port, connections, 0.3, body, token, rate))
    before, started = cpu_seconds(server.pid), time.monotonic()
    statuses = _run_loop(_flood(server.port, connections, seconds, body, token, rate))
    used, elapsed = cpu_seconds(server.pid) - before, time.monotonic() - started
    answers = sum(statuses.values())
    expected = 200 if server.name == "bare uvicorn" else 503
    if set(statuses) != {expected}:
        raise RuntimeError(f"the {server.name} server answered {statuses}, not only {expected}")
    return used / answers * 1e6, answers, answers / elapsed


def _request() -> tuple[bytes, str]:
    """``bench e2e``'s command body (the script's first move, no command id) and a seat token like its rooms'."""
    from almanac.bench.e2e import _run_loop, _script, script_ruleset  # noqa: PLC0415
    from almanac.client.command_sender import CommandSender  # noqa: PLC0415
    from almanac.services.gateway.auth import TokenSigner  # noqa: PLC0415

    ruleset = script_ruleset()
    script = _run_loop(_script(ruleset))
    token = TokenSigner("bench refusal token secret, 32+ bytes", 3_600).issue(ROOM, "p", ruleset=ruleset)
    return CommandSender.body(script[0]), token


def _command_request(body: bytes, token: str) -> bytes:
    """The bytes ``CommandSender.command`` writes for ``body`` (its own request, built by it, not copied here)."""
    from almanac.client.command_sender import CommandSender  # noqa: PLC0415

    written: list[bytes] = []

    class _Writer:
        def write(self, data: bytes) -> None:
            written.append(data)

        def close(self) -> None:
            pass

    class _Reader:
        async def readuntil(self, _: bytes) -> bytes:
            return b"HTTP/1.1 503 x\r\ncontent-length: 0\r\n\r\n"

        async def readexactly(self, _: int) -> bytes:
            return b""

    sender = CommandSender(["http://127.0.0.1:1"], 1)
    sender.idle[0].put_nowait((_Reader(), _Writer(), 0))
    asyncio.run(sender.command(ROOM, body, token))
    return b"".join(written)


def _python_alone_in(env: dict[str, str], body: bytes, token: str) -> float:
    """``_python_alone`` in a child under ``env`` (its PYTHONPATH says which checkout's guard)."""
    script = [sys.executable, os.path.abspath(__file__), "--serve", "python", "--port", "0"]
    done = subprocess.run(script, input=_command_request(body, token), env=env, capture_output=True, check=True)
    return float(done.stdout.split()[-1])


def main(seconds: float = 4.0, rounds: int = 3, connections: int = 64, against: str | None = None,
         pin: bool = True, rate: int = 0) -> dict[str, Any]:
    from rich.table import Table  # noqa: PLC0415

    from almanac.bench import cores as cpu_cores  # noqa: PLC0415
    from almanac.bench.bare_http import bare_server  # noqa: PLC0415
    from almanac.bench.children import ServerChild  # noqa: PLC0415
    from almanac.bench.common import output_console  # noqa: PLC0415

    console = output_console()
    body, token = _request()
    script = [sys.executable, os.path.abspath(__file__), "--serve"]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    servers = [ServerChild("guard", [*script, "guard"], env)]
    if against:
        servers.append(ServerChild("guard (--against)", [*script, "guard"],
                                   env | {"PYTHONPATH": os.path.abspath(against)}))
    servers.append(bare_server("bare uvicorn", env))
    servers.append(ServerChild("floor", [*script, "floor"], env))
    split = cpu_cores.split(os.sched_getaffinity(0)) if pin else None
    figures: dict[str, list[float]] = {server.name: [] for server in servers}
    rates: dict[str, list[float]] = {server.name: [] for server in servers}
    load = []
    started = []
    try:
        for server in servers:
            started.append(server.__enter__())
            if split is not None:
                cpu_cores.pin(server.pid, split.stack)
        if split is not None:
            cpu_cores.pin(os.getpid(), split.generator)
        for server in servers:
            server.wait_answering(lambda url: _answers(url, body, token), START_TIMEOUT_S)
        for _ in range(rounds):
            load.append(os.getloadavg()[0])
            for server in servers:
                micros, _, achieved = _measure(server, connections, seconds, body, token, rate)
                figures[server.name].append(micros)
                rates[server.name].append(achieved)
        load.append(os.getloadavg()[0])
    finally:
        for server in reversed(started):
            server.__exit__()
    alone = {name: _python_alone_in(env if name == "guard" else env | {"PYTHONPATH": os.path.abspath(against or "")},
                                    body, token)
             for name in figures if name.startswith("guard")}
    offered = f"{rate:,}/s on schedule" if rate else "closed loop"
    table = Table(title=f"CPU per answer of each server process, µs ({connections} keep-alive connections, {offered}, "
                        f"{seconds:g} s a window, {rounds} rounds alternated; load average {min(load):.1f}-{max(load):.1f})")
    table.add_column("server")
    table.add_column("µs per answer, by round")
    table.add_column("median", justify="right")
    table.add_column("answers/s", justify="right")
    table.add_column("of bare uvicorn", justify="right")
    bare = statistics.median(figures["bare uvicorn"])
    for name, values in figures.items():
        median = statistics.median(values)
        table.add_row(name, ", ".join(f"{value:.1f}" for value in values), f"{median:.1f}",
                      f"{statistics.median(rates[name]):,.0f}", f"{median / bare:.2f}")
    console.print(table)
    console.print("the guard's Python alone (data_received fed the request, no socket), µs per refusal: "
                  + ", ".join(f"{name} {micros:.2f}" for name, micros in alone.items()))
    if split is not None:
        console.print(f"servers on CPU {sorted(split.stack)}, the load on CPU {sorted(split.generator)}")
    if against:
        pairs = [new / old for new, old in zip(figures["guard"], figures["guard (--against)"], strict=True)]
        console.print(f"guard / guard (--against), by round: {', '.join(f'{ratio:.2f}' for ratio in pairs)}")
    return {"figures": figures, "rates": rates, "load": load, "python_alone": alone}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", choices=("guard", "floor", "python"), required=True)
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    sys.path.remove(os.path.dirname(os.path.abspath(__file__)))  # not bench/ itself: its modules are almanac.bench's
    if arguments.serve == "python":
        print(f"{_python_alone(sys.stdin.buffer.read()):.3f}")
    else:
        _serve(arguments.serve, arguments.port)
