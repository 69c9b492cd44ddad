"""Every benchmark runs end to end on a tiny budget and prints its figures next to its baseline."""

from __future__ import annotations

import os
import re

import pytest
from suite_settings import suite_settings

from almanac.bench import rules, store as bench_store
from almanac.events import registry

pytestmark = pytest.mark.lasts(65)  # seconds of one worker in a whole run: sent to the workers early (tests/conftest.py)


@pytest.mark.parametrize("name", registry.installed())
def test_every_installed_rule_set_is_benchmarked_by_the_one_runner_from_its_manifests_scenario(name, capsys):
    rules.main(name, seconds=0.05)
    printed = " ".join(capsys.readouterr().out.split())
    assert "replay (decode + evolve)" in printed and "events/s" in printed and "baseline" in printed
    assert registry.manifest(name).bench.description.split("(")[0].strip() in printed
    assert "every replay equals the played state" in printed
    for comparison in registry.manifest(name).bench.comparisons:
        assert comparison.label in printed and comparison.baseline_label in printed


def test_a_rule_set_without_a_scenario_is_refused_in_one_line(capsys):
    # The counter rule-set (tests/conftest.py registers it) is a bare Decider: a manifest of defaults.
    with pytest.raises(rules.BenchError, match="offers no bench scenario"):
        rules.main("counter", seconds=0.05)


def test_the_store_benchmark_measures_every_path_against_raw_xadd_on_real_redis(redis_url, capsys):
    bench_store.main(redis_url, events=2_000)
    printed = capsys.readouterr().out
    for path in ("raw redis-py pipelined XADD", "hiredis command packing", "our append, 100 events per call", "our append, 1 event per call",
                 "read (XRANGE", "replay (read + decode + fold)"):
        assert path in printed, path


def test_the_forensics_tools_benchmark_times_each_tool_against_one_fold_on_real_redis(redis_url, capsys):
    from almanac.bench import forensics_tools  # noqa: PLC0415

    forensics_tools.main(redis_url, events=300, snapshot_every=20)
    printed = " ".join(capsys.readouterr().out.split())
    for label in ("baseline: fold the room once", "explain scores.bob", "bisect --where", "--linear",
                  "bisect --against realm@2", "fork at", "diff room vs its fork"):
        assert label in printed, label


def test_the_engine_benchmark_drains_a_backlog_then_takes_commands_as_they_come_on_real_redis(redis_url):
    """Given the engine benchmark on a tiny budget, then every phase ran to its end (the backlog, the
    commands submitted while the engine runs, the paced ones) and each figure stands beside its baseline."""
    from almanac.bench import engine as bench_engine  # noqa: PLC0415

    figures = bench_engine.run(redis_url, rooms=20, commands=1_000, paced_rate=100, paced_seconds=1)
    assert figures["baseline"] > 0 and figures["drain"] > 0 and figures["engine"] > 0
    assert figures["done"] == 1_000 and figures["rejected"] == 0
    assert figures["accepted"] == 1_000 + 1_000 + 100  # the backlog, the submitted commands, the paced ones
    assert figures["projector"] > 0 and figures["paced_p99"] != "n/a"


def test_the_lifecycle_benchmark_archives_every_ended_room_and_prints_its_aims(redis_url, capsys, monkeypatch):
    from almanac.bench import lifecycle  # noqa: PLC0415

    # wide enough that no label is wrapped inside its table cell (a worker may have COLUMNS set by an earlier test)
    monkeypatch.setenv("COLUMNS", "400")
    lifecycle.main(redis_url, rooms=30, wave=10)
    printed = " ".join(capsys.readouterr().out.split())
    # the first two waves archived, the last one left live; realm rooms played by the seat bots to their end (dozens
    # of commands each) and two claim rooms a wave (three commands each)
    archived = re.search(r"for 20 rooms, (\d+) commands", printed)
    assert archived and int(archived.group(1)) > 16 * 20 + 4 * 3, printed
    assert "verify --all (30 rooms: 20 archived, 10 live)" in printed
    # two passes with no live room after them: what each room archived between them left, by key family
    assert "What each archived room leaves in Redis" in printed and "10 rooms archived between" in printed
    assert re.search(r":archive:pointers:BUCKET[ │]+\+\d+[ │]+\+[\d,]+[ │]+\+[\d.]+", printed), printed
    for figure in ("archiver rooms/s", "baseline", "object cached", "rooms/s", "<= 1.2x", "<= 200 B", "p99 <= 5x",
                   "command-id index"):
        assert figure in printed, figure


def test_the_lifecycle_benchmarks_leftovers_by_key_family_count_families_that_came_and_went_per_room():
    from almanac.bench import lifecycle  # noqa: PLC0415

    # given two measures of the key families with no live room, 100 rooms archived between them
    first = [("p:{sNN}:archive:model:trades", 16, 50_000), ("p:{bots}:removed:ROOMcarol", 10, 1_360)]
    last = [("p:{sNN}:archive:model:trades", 16, 150_000), ("p:{sNN}:archive:pointers:BUCKET", 90, 15_200)]
    # when the leftovers are computed
    rows = lifecycle._left_per_room(first, last, 100)
    # then each family's bytes added are divided by the rooms, largest first, and a family gone counts negative
    assert rows == [("p:{sNN}:archive:model:trades", 0, 100_000, 1_000.0),
                    ("p:{sNN}:archive:pointers:BUCKET", 90, 15_200, 152.0),
                    ("p:{bots}:removed:ROOMcarol", -10, -1_360, -13.6)]


def test_the_webhooks_benchmark_delivers_everything_and_stands_beside_bare_posts_on_real_redis(redis_url, tmp_path):
    import asyncio  # noqa: PLC0415

    from almanac.bench import webhooks  # noqa: PLC0415

    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path))
    figures = asyncio.run(webhooks.run(settings, rooms=100, rate=50, seconds=1))
    assert figures["received"] == 100 + 100 + 50  # the backlog, the bare baseline's POSTs, the paced rooms
    assert figures["latency_ms"]["samples"] == 50 and figures["dead"] == 0
    assert figures["notifier_deliveries_per_s"] > 0 and figures["bare_posts_per_s"] > 0


def test_the_clock_benchmark_sends_every_due_deadline_and_prints_lateness_and_cpu_on_real_redis(redis_url, capsys):
    """Given the clock benchmark on a tiny budget, then every due deadline was sent once and the figures print
    beside their baseline."""
    from almanac.bench import clock as bench_clock  # noqa: PLC0415

    bench_clock.main(redis_url, pending=2_000, due=200, seconds=1.0)
    printed = " ".join(capsys.readouterr().out.split())
    assert "200 (of 200 due; 1,800 still pending)" in printed
    for label in ("lateness p50", "lateness p99", "clock CPU per deadline sent", "pipelined XADD per record"):
        assert label in printed, label


def test_the_signing_benchmark_plays_both_arms_to_the_end_and_prints_their_ratio_on_real_redis(redis_url, tmp_path,
                                                                                                 capsys, monkeypatch):
    """Given the signing benchmark on a tiny budget (one pair of windows, one room each), then both arms play every
    command of the room with nothing refused, and the figures print with the signed / unsigned ratio."""
    from almanac.bench import signing  # noqa: PLC0415
    from almanac.bench.common import output_console  # noqa: PLC0415

    monkeypatch.delenv("COLUMNS", raising=False)  # pytest-xdist's workers run with COLUMNS=80
    monkeypatch.setattr(signing, "console", output_console())  # as `almanac bench signing | tee` gets it

    figures = signing.main(suite_settings(redis_url=redis_url, data_dir=str(tmp_path)), rounds=1, rooms=1,
                           clients=2)
    windows = {window["arm"]: window for window in figures["windows"]}
    assert sorted(windows) == ["signed", "unsigned"]
    for window in windows.values():
        assert window["accepted"] == signing.SEASONS * len(signing.CYCLE) and not window["failures"], window
        # CPU comes from /proc in 10 ms ticks: a 48-command window may read 0 for the client
        assert window["stack_cpu_ms"] > 0 and window["generator_cpu_ms"] >= 0 and window["per_s"] > 0
    assert figures["ratios"]["per_s"][0] > 0 and figures["ratios"]["stack_cpu_ms"][0] > 0
    printed = " ".join(capsys.readouterr().out.split())
    # piped (as here), a table is never cut at 80 columns: each label stays whole on its line
    for label in ("round 1 unsigned:", "round 1 signed:", "signed seats against unsigned seats",
                  "accepted commands/s", "stack CPU ms/command", "signed / unsigned, per pair",
                  "signing costs the stack", "of which, per process"):
        assert label in printed, label


def test_the_live_benchmark_holds_more_feeds_than_one_address_may_and_times_the_end_event_on_real_redis(
        redis_url, tmp_path, monkeypatch):
    """Given the live benchmark holding 70 feeds from its one address (past the gateway's default cap of 64 per
    address), when it runs through almanac.client's live feed, then every feed opens and reads its history (a
    refused one raises), the ended event reaches them all, and the figures stand beside the no-feeds baseline."""
    from almanac.bench import live  # noqa: PLC0415

    for name in ("ALMANAC_LOG_LEVEL", "ALMANAC_REDIS_IDLE_S", "ALMANAC_LIVE_MAX_FEEDS",
                 "ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # the bench sets them for its stack: restored after
    figures = live.main(suite_settings(redis_url=redis_url, data_dir=str(tmp_path)), feeds=70, requests=100)
    assert figures["open_s"] > 0 and figures["fan_out_ms"] > 0
    assert figures["feeds"]["redis_clients"][0] >= figures["none"]["redis_clients"][0]
    assert figures["none"]["p50_ms"] > 0 and figures["feeds"]["p50_ms"] > 0


def test_the_refusal_benchmark_measures_the_guards_refusals_against_bare_uvicorn_and_a_floor(capsys, tmp_path):
    """Given the refusal benchmark on a tiny budget, against this checkout's own guard as the other (a folder holding
    it as almanac/), then every server answered the flood (the guards only 503: ``_measure`` checks) and each figure
    stands beside bare uvicorn's."""
    from pathlib import Path  # noqa: PLC0415

    from almanac.bench import refusal  # noqa: PLC0415

    (tmp_path / "almanac").symlink_to(Path(__file__).resolve().parents[2])
    result = refusal.main(seconds=0.5, rounds=1, connections=4, against=str(tmp_path), pin=False)
    assert set(result["figures"]) == {"guard", "guard (--against)", "bare uvicorn", "floor"}
    assert all(value > 0 for values in result["figures"].values() for value in values)
    assert set(result["python_alone"]) == {"guard", "guard (--against)"} and min(result["python_alone"].values()) > 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "of bare uvicorn" in printed and "guard / guard (--against)" in printed and "Python alone" in printed
