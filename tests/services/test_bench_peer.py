"""`bench e2e --peer`: boardgame.io's server is offered the run's own schedule, and its figures sit beside ours."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading
import time

import pytest

from almanac.bench import e2e
from almanac.bench.e2e import RoomSlots
from almanac.bench.peer import PeerOffline, installed_peer, peer_figures

pytestmark = pytest.mark.slow
needs_node = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                                reason="the peer runs on node, installed by npm")


def peer_or_skip() -> None:
    """The peer installed, or the test skipped with the reason when npm cannot reach its registry (offline)."""
    try:
        installed_peer()
    except PeerOffline as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def peer() -> None:
    """Once per module: offline, every peer test skips after one try, not one wait each."""
    peer_or_skip()


@needs_node
def test_without_the_npm_registry_the_peer_tests_skip_and_say_why(monkeypatch, tmp_path):
    # Given a machine with node and npm but no registry it can reach, and nothing installed or cached yet
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm"))
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    # When a peer test asks for the peer, Then it is skipped, naming the registry it could not reach
    with pytest.raises(pytest.skip.Exception, match=r"cannot reach the npm registry \(ECONNREFUSED: request to "
                                                     r"http://127\.0\.0\.1:9/"):
        peer_or_skip()


@needs_node
def test_a_registry_that_answers_404_for_every_package_skips_the_peer_tests(monkeypatch, tmp_path):
    # Given a machine whose network answers every request with 404 (as a proxy here does for hosts it cannot
    # reach), and nothing installed or cached yet
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{server.server_address[1]}/")
        # When a peer test asks for the peer, Then it is skipped, saying the registry does not serve the packages
        with pytest.raises(pytest.skip.Exception, match=r"the npm registry here does not serve the pinned packages "
                                                         r"\(E404: "):
            peer_or_skip()
    finally:
        server.shutdown()
        server.server_close()


class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error":"Not found"}')

    def log_message(self, *_: object) -> None:
        pass


@needs_node
def test_a_registry_that_takes_connections_and_never_answers_skips_the_peer_tests_within_seconds(monkeypatch, tmp_path):
    # Given a registry that accepts every connection and never answers (a loopback listener nobody reads), npm's
    # fetch timeout and retries left at the peer's defaults, and nothing installed or cached yet
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm"))
    for name in ("npm_config_fetch_timeout", "npm_config_fetch_retries"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(256)  # the kernel completes the handshakes; nothing ever reads or writes
        registry = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        monkeypatch.setenv("npm_config_registry", registry)
        # When a peer test asks for the peer
        started = time.monotonic()
        with pytest.raises(pytest.skip.Exception) as skipped:
            peer_or_skip()
        waited = time.monotonic() - started
    # Then it is skipped, saying the registry timed out, within seconds rather than npm ci's 5 minutes
    assert f"cannot reach the npm registry (FETCH_ERROR: network timeout at: {registry}" in str(skipped.value)
    assert waited < 40, waited


@needs_node
def test_the_peer_plays_the_same_schedule_out_of_step_and_answers_every_move(peer):
    # Given bench e2e's schedule for 60 moves/s over 2 s out of step: 8 slots, the first matches 0-7 moves played
    # before the clock, a fresh match after each but the first (15 matches in all)
    schedule = RoomSlots.out_of_step(8, 17).schedule(17)
    # When it is offered to boardgame.io's server
    figures = peer_figures(60, 2, schedule)
    # Then every move of the load was answered by the server and made by it, with its CPU counted over the load
    assert figures["matches"] == 15 and figures["version"] == "0.50.2"
    assert figures["answered"] == figures["applied"] == 120 and figures["unanswered"] == 0, figures
    assert figures["p99_ms"] >= figures["p50_ms"] > 0 and figures["server_cpu_ms_per_move"] > 0


@needs_node
def test_the_run_prints_the_peer_beside_almanac_with_the_cpu_ratio(peer, capsys):
    # Given a run's figures (its CPU per command, its load generator's CPU, its schedule: in step, 4 rooms of 17 moves)
    figures = {"cpu_ms_per_command": 1.0, "cpu_s": {"load generator": 0.5}, "schedule": RoomSlots.in_step(4).schedule(17)}
    # When the peer is offered the same schedule
    e2e.offer_peer(figures, 34, 2)
    # Then its figures are kept and printed, with our CPU per command over its CPU per move
    printed = " ".join(capsys.readouterr().out.split())
    assert figures["peer"]["answered"] == 68 and figures["cpu_to_peer"] == 1.0 / figures["peer"]["server_cpu_ms_per_move"]
    assert "peer, the same schedule: boardgame.io 0.50.2" in printed and "Almanac's CPU per command / the peer's" in printed


def test_without_node_the_run_says_the_peer_was_not_measured_and_goes_on(monkeypatch, tmp_path, capsys):
    # Given a machine where neither node nor npm is on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    figures = {"cpu_ms_per_command": 1.0, "schedule": RoomSlots.in_step(4).schedule(17)}
    # When the peer is asked for
    e2e.offer_peer(figures, 34, 2)
    # Then the run says why it was not measured, and keeps no peer figures
    assert "peer: not measured (node and npm are not on PATH)" in " ".join(capsys.readouterr().out.split())
    assert "peer" not in figures and "cpu_to_peer" not in figures
