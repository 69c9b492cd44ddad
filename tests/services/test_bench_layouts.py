"""`bench e2e` starts the layouts the scaling figure compares: two engine processes and two gateways work as one."""

from __future__ import annotations

import pytest
from suite_settings import suite_settings

from almanac.bench import e2e
from almanac.storage.keys import engine_heartbeat_key, engines_key

pytestmark = pytest.mark.slow


def test_two_engines_and_two_gateways_answer_every_command_and_the_load_is_spread(monkeypatch, tmp_path, capsys):
    # Given a stack of two engine processes (shards 0/2 and 1/2) and two gateway processes on an embedded Redis
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("ALMANAC_DATA_DIR", str(tmp_path))
    # When the benchmark offers a small steady load, its connections spread over both gateways
    figures = e2e.main(rate=60, seconds=2, engines=2, gateways=2)
    # Then the commands were accepted (a loaded test machine may shed a few: 503 overloaded, nothing else),
    # through both gateways, and each process's CPU was measured
    assert all(kind.startswith("503 overloaded") for kind in figures["failures"]), figures["failures"]
    assert figures["achieved_per_s"] > 30
    assert all(count > 0 for count in figures["answered_per_gateway"]), figures["answered_per_gateway"]
    assert {"engine", "engine-2", "gateway", "gateway-2", "projector", "redis"} <= set(figures["cpu_s"])
    # (the default stack's notifier, archiver and bots run too, and count in the stack's CPU)
    assert {"engine", "gateway", "projector", "redis"} <= set(figures["cpu_ms_per_command_by_service"]) <= {
        "engine", "gateway", "projector", "redis", "notifier", "archiver", "bots"}
    # and the same requests cost a bare uvicorn app less CPU than the stack: the same run's baseline
    assert 0 < figures["bare_http_cpu_ms"] < figures["cpu_ms_per_command"]
    printed = " ".join(capsys.readouterr().out.split())
    assert "answers per gateway" in printed and "CPU per command across the stack" in printed
    assert "CPU per command / bare request" in printed
    # and each room's first command of the load (120 commands over ceil(120 / 17) = 8 rooms) is told apart
    assert 0 < figures["first_count"] <= 8 < figures["later_count"]
    assert figures["first_p50_ms"] > 0 and figures["later_p99_ms"] >= figures["later_p50_ms"] > 0
    assert "rooms' first commands" in printed and "later commands" in printed


def test_two_deciding_gateways_split_the_shards_and_no_engine_process_runs(monkeypatch, tmp_path):
    # Given a stack whose gateways decide their own commands (the default shape), two of them
    import json  # noqa: PLC0415

    import httpx  # noqa: PLC0415
    import redis  # noqa: PLC0415

    from almanac.services.supervisor import Stack  # noqa: PLC0415

    monkeypatch.delenv("REDIS_URL", raising=False)
    settings = suite_settings(data_dir=str(tmp_path), http_port=0, log_level="warning")  # the default shape
    with Stack(settings, gateways=2) as stack:
        stack.start()
        # Then no engine process runs, and each gateway's engine holds its half of the shards (as engine groups)
        assert "engine" not in stack.children and {"gateway", "gateway-2"} <= set(stack.children)
        client = redis.Redis.from_url(stack.redis_url)
        held = {}
        for name in client.smembers(engines_key()):
            beat = client.get(engine_heartbeat_key(name.decode()))
            if beat:
                held[name.decode()] = sorted(json.loads(beat)["shards_held"])
        client.close()
        assert sorted(held.values()) == [list(range(0, 16, 2)), list(range(1, 16, 2))], held
        # And a room created and played through either gateway is decided (by whichever holds its shard)
        for url in stack.urls:
            room = f"split-{url.rsplit(':', 1)[1]}"
            created = httpx.post(f"{url}/rooms", json={"ruleset": "board", "player": "ann", "room": room}, timeout=10)
            assert created.status_code == 201 and created.json()["joined"], created.text


def test_commands_routed_by_shard_to_two_deciding_gateways_are_all_answered(monkeypatch, tmp_path, capsys):
    # Given two deciding gateways (shards 0/2 and 1/2) and a load generator that routes each command to the
    # gateway holding its room's shard, as a shard-aware load balancer would, with the rooms out of step
    # (8 slots: the first rooms played 0-7 moves before the clock, a fresh room after each but the first)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("ALMANAC_DATA_DIR", str(tmp_path))
    figures = e2e.main(rate=60, seconds=2, engines=0, gateways=2, route_by_shard=True,
                       out_of_step=True)
    # Then every command is answered, through both gateways, and no engine process ran
    assert all(kind.startswith("503 overloaded") for kind in figures["failures"]), figures["failures"]
    assert figures["achieved_per_s"] > 30
    assert all(count > 0 for count in figures["answered_per_gateway"]), figures["answered_per_gateway"]
    assert "engine" not in figures["cpu_s"] and {"gateway", "gateway-2"} <= set(figures["cpu_s"])
    # and the run says its rooms were out of step, its schedule kept for the peer (8 slots, 15 rooms)
    assert figures["out_of_step"] and "out of step" in " ".join(capsys.readouterr().out.split())
    assert len(figures["schedule"]["slots"]) == 8 and len(figures["schedule"]["played_before"]) == 15


def test_with_engine_processes_the_gateways_hold_no_shard_and_the_engines_decide(monkeypatch, tmp_path):
    # Given `almanac up`'s stack with two engine processes (the layout `bench e2e --engines 2` compares)
    import json  # noqa: PLC0415

    import httpx  # noqa: PLC0415
    import redis  # noqa: PLC0415

    from almanac.services.supervisor import Stack  # noqa: PLC0415
    from almanac.storage.keys import lease_key  # noqa: PLC0415

    monkeypatch.delenv("REDIS_URL", raising=False)
    settings = suite_settings(data_dir=str(tmp_path), http_port=0, log_level="warning")
    with Stack(settings, engines=2, gateways=2) as stack:
        stack.start()
        # Then every lease is an engine process's, and only they beat as engines: the gateways hold none
        client = redis.Redis.from_url(stack.redis_url)
        holders = {value.decode().split("|")[0] for value in client.mget([lease_key(s) for s in range(16)])}
        beats = sorted(json.loads(beat)["name"] for name in client.smembers(engines_key())
                       if (beat := client.get(engine_heartbeat_key(name.decode()))))
        client.close()
        assert holders == {"engine", "engine-2"} and beats == ["engine", "engine-2"], (holders, beats)
        # And a room created through either gateway is decided by them, through its shard's stream
        for url in stack.urls:
            room = f"held-elsewhere-{url.rsplit(':', 1)[1]}"
            created = httpx.post(f"{url}/rooms", json={"ruleset": "board", "player": "ann", "room": room}, timeout=10)
            assert created.status_code == 201 and created.json()["joined"], created.text
