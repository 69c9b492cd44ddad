"""A bare ASGI app under uvicorn (httptools, uvloop): the CPU one HTTP request costs on this machine, bench e2e's baseline.

The stack's CPU per command moves with the machine (the same code measured 1.05 ms and 1.96 ms per command on
this VM on different hours), so ``bench e2e`` also offers the same requests, at the same rate and from the
same client, to this app, which reads each body and answers a small JSON document and does nothing else:
what is left of the stack's figure above this floor is what Almanac adds to a request: its own Python
(the decision, the checks), and the messages between its processes and Redis with Redis's own work.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from almanac.bench.children import ServerChild
from almanac.services.heap import collect_less_often

ANSWER = b'{"accepted":true,"room":"bare","first_version":1,"last_version":1}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]
START_TIMEOUT_S = 20.0


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


def bare_server(name: str = "bare HTTP", env: dict[str, str] | None = None) -> ServerChild:
    """The app in a process of its own (``with bare_server() as server:``), not yet asked whether it answers."""
    return ServerChild(name, [sys.executable, "-m", "almanac.bench.bare_http"], env)


def answers(url: str) -> bool:
    """Whether the app at ``url`` answers ``ANSWER`` (``ServerChild.wait_answering``'s question for it)."""
    try:
        return httpx.post(url + "/ready", content=b"{}", timeout=1).content == ANSWER
    except httpx.HTTPError:
        return False


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
