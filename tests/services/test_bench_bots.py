"""`almanac bench bots` times every seat bot against its full-state policy in the same run."""

from __future__ import annotations

from almanac.bench import bots


def test_the_bots_benchmark_times_every_seat_bot_beside_its_policy(capsys) -> None:
    bots.main(12)
    shown = capsys.readouterr().out
    for ref in ("board@1", "claim@1", "realm@1", "realm@2", "sectors@1"):
        assert ref in shown
    assert "seat bot (view)" in shown and "policy (state)" in shown
