"""`bench e2e --peer`: boardgame.io's server is offered the run's own schedule, and its figures sit beside ours."""

from __future__ import annotations

import shutil

import pytest

from almanac.services.bench import e2e
from almanac.services.bench.e2e import RoomSlots
from almanac.services.bench.peer import peer_figures

pytestmark = pytest.mark.slow
needs_node = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                                reason="the peer runs on node, installed by npm")


@needs_node
def test_the_peer_plays_the_same_schedule_out_of_step_and_answers_every_move():
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
def test_the_run_prints_the_peer_beside_almanac_with_the_cpu_ratio(capsys):
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
