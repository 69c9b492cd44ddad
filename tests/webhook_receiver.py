"""A real HTTP receiver of webhooks for tests and the bench: records every POST, can answer 5xx or be down."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from almanac.services.embedded_redis import free_port


class Receiver:
    """POSTs to any path on 127.0.0.1:<port>: each recorded as (path, headers, body, json, arrival time)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.received: list[dict[str, Any]] = []
        self.failing = 0  # answer 503 to this many more POSTs
        self.delay_s = 0.0  # answer each POST this long after it arrived (a slow receiver)
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.time()
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with receiver.lock:
                    if receiver.failing > 0:
                        receiver.failing -= 1
                        status = 503
                    else:
                        status = 200
                        receiver.received.append({"path": self.path, "headers": dict(self.headers.items()),
                                                  "body": body, "json": json.loads(body),
                                                  "at": arrived})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until ``start`` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def wait_for(self, predicate: Any, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                got = list(self.received)
            if predicate(got):
                return got
            time.sleep(0.05)
        with self.lock:
            raise AssertionError(f"the receiver did not get what was expected: {[r['json'].get('kind') for r in self.received]}")
