"""One client code path: a benchmark that plays a game client speaks to the gateway through almanac.client only."""

from __future__ import annotations

import ast
from pathlib import Path

from allow_lists import stale, unexcused

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# What a module would use to open its own HTTP or WebSocket conversation instead of almanac.client (whose
# ``Client``/``AsyncClient`` create rooms, join, send commands, read views and follow live feeds, and whose
# ``command_sender.CommandSender`` sends a load generator's prepared commands).
OWN_CONNECTIONS = {"httpx", "websockets", "aiohttp", "requests", "urllib.request", "http.client",
                   "fastapi.testclient", "starlette.testclient", "open_connection"}
# Each exception, and why it is no game client's conversation with a gateway. A construct listed here must still be
# found in its file (test_the_allow_list_names_only_what_is_there), so the list shrinks as the exceptions go.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "bench/bare_http.py": ({"httpx"}, "asks its own bare uvicorn app (e2e's baseline server, no gateway) whether it "
                                      "is ready"),
    "bench/webhooks.py": ({"httpx"}, "its baseline is what a webhook delivery costs as bare POSTs to the bench's own "
                                     "receiver (the notifier's side, no gateway)"),
    "bench/failover.py": ({"httpx"}, "its figures are the gateway's raw answers during a Cluster failover: every "
                                     "status (202, 503, a dropped connection) counted per answer and resent with the "
                                     "same command id by its own loop, which the client's retries would hide"),
    "bench/listing.py": ({"fastapi.testclient"}, "times the listing routes' handlers in process (an ASGI app, no "
                                                 "socket): its figures are the routes' cost, not a client's"),
}
BUILT_COPIES = {"build", "dist", "node_modules"}


def own_connections(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each import of an HTTP/WebSocket library and each raw ``open_connection`` call in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            names = [node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id]
        else:
            continue
        hits = {what for name in names for what in OWN_CONNECTIONS if name == what or name.startswith(what + ".")}
        found += [(node.lineno, what) for what in hits]
    return sorted(set(found))


def _scanned() -> dict[str, list[tuple[int, str]]]:
    return {str(path.relative_to(ROOT)): own_connections(path) for path in sorted(BENCH.rglob("*.py"))
            if not BUILT_COPIES & set(path.relative_to(ROOT).parts)}


def test_no_benchmark_opens_its_own_http_or_websocket_connection_to_a_gateway():
    """Given every benchmark module, when its imports and calls are listed, then none opens an HTTP or WebSocket
    connection of its own (httpx, websockets, raw streams, a test client) that the allow-list does not name: rooms,
    joins, commands, views and live feeds go through almanac.client, the code path studios use too."""
    assert unexcused(_scanned(), ALLOWED) == {}


def test_the_allow_list_names_only_what_is_there():
    """Given the allow-list, when each file is read, then each connection it excuses is still opened there."""
    assert stale(_scanned(), ALLOWED) == {}


def test_the_scan_sees_a_benchmark_that_opens_its_own(tmp_path):
    """Given a module that talks to a gateway by hand, when it is scanned, then each way in is found."""
    probe = tmp_path / "probe.py"
    probe.write_text("import asyncio\n"
                     "import httpx\n"
                     "from websockets.asyncio.client import connect\n"
                     "from fastapi.testclient import TestClient\n"
                     "async def f():\n"
                     "    await asyncio.open_connection('127.0.0.1', 8000)\n")
    assert [what for _, what in own_connections(probe)] == ["httpx", "websockets", "fastapi.testclient",
                                                           "open_connection"]
