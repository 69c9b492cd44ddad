"""Every benchmark runs end to end on a tiny budget and prints its figures next to its baseline."""

from __future__ import annotations

import pytest

from almanac.services.bench import rules_board, rules_claim, rules_realm, store as bench_store


@pytest.mark.parametrize("bench", [rules_board, rules_claim, rules_realm], ids=["board", "claim", "realm"])
def test_a_rules_benchmark_prints_its_rates_and_baseline(bench, capsys):
    bench.main(seconds=0.05)
    printed = capsys.readouterr().out
    assert "replay (decode + evolve)" in printed and "events/s" in printed and "baseline" in printed


def test_the_store_benchmark_measures_every_path_against_raw_xadd_on_real_redis(redis_url, capsys):
    bench_store.main(redis_url, events=2_000)
    printed = capsys.readouterr().out
    for path in ("raw redis-py pipelined XADD", "hiredis command packing", "our append, 100 events per call", "our append, 1 event per call",
                 "read (XRANGE", "replay (read + decode + fold)"):
        assert path in printed, path
