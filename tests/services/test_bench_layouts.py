"""`bench e2e` starts the layouts the scaling figure compares: two engine processes and two gateways work as one."""

from __future__ import annotations

import pytest

from almanac.services.bench import e2e

pytestmark = pytest.mark.slow


def test_two_engines_and_two_gateways_answer_every_command_and_the_load_is_spread(monkeypatch, tmp_path, capsys):
    # Given a stack of two engine processes (shards 0/2 and 1/2) and two gateway processes on an embedded Redis
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("ALMANAC_DATA_DIR", str(tmp_path))
    # When the benchmark offers a small steady load, its connections spread over both gateways
    figures = e2e.main(rate=60, seconds=2, engines=2, gateways=2)
    # Then the commands were accepted (a loaded test machine may shed a few: 503 overloaded, nothing else),
    # through both gateways, and each process's CPU was measured
    assert set(figures["failures"]) <= {"503 overloaded"}, figures["failures"]
    assert figures["achieved_per_s"] > 30
    assert all(count > 0 for count in figures["answered_per_gateway"]), figures["answered_per_gateway"]
    assert {"engine", "engine-2", "gateway", "gateway-2", "projector", "redis"} <= set(figures["cpu_s"])
    assert set(figures["cpu_ms_per_command_by_service"]) == {"engine", "gateway", "projector", "redis"}
    printed = " ".join(capsys.readouterr().out.split())
    assert "answers per gateway" in printed and "CPU per command across the stack" in printed
