"""A bare ASGI app under uvicorn (httptools, uvloop): the CPU one HTTP request costs on this machine, bench e2e's baseline.

The stack's CPU per command moves with the machine (the same code measured 1.05 ms and 1.96 ms per command on
this VM on different hours), so ``bench e2e`` also offers the same requests, at the same rate and from the
same client, to this app, which reads each body and answers a small JSON document and does nothing else:
what is left of the stack's figure above this floor is what Almanac adds to a request: its own Python
(the decision, the checks), and the messages between its processes and Redis with Redis's own work.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from typing import Any

import httpx

from almanac.bench.children import stop
from almanac.services.heap import collect_less_often

ANSWER = b'{"accepted":true,"room":"bare","first_version":1,"last_version":1}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def app(scope: dict, receive: Any, send: Any) -> None:
    """Read the request's body, answer 200 with ``ANSWER``; the lifespan protocol is not supported (uvicorn
    goes on without it)."""
    if scope["type"] != "http":
        raise RuntimeError("only HTTP")
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class BareServer:
    """The app in a process of its own (``with BareServer() as url:``), so its CPU is its own."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        self.process = subprocess.Popen([sys.executable, "-m", "almanac.bench.bare_http",
                                         "--port", str(self.port)])
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                # Its own answer, from its own process: another server may have taken the port meanwhile.
                if httpx.post(url + "/ready", content=b"{}", timeout=1).content == ANSWER and self.process.poll() is None:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"the bare HTTP server did not start on port {self.port}")

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            stop(self.process)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


def main() -> None:
    import uvicorn  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    collect_less_often()  # as the gateway (every `almanac` process)
    # As the gateway runs: uvloop and httptools, no access log line (the gateway counts, not logs, its commands).
    uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", lifespan="off",
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
