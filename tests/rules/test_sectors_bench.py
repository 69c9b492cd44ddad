"""The sectors benchmark runs end to end on a short budget and checks its own replay."""

from __future__ import annotations

from almanac.services.bench import rules_sectors


def test_the_benchmark_plays_folds_and_replays_full_colonies(capsys):
    rules_sectors.main(seconds=0.05)
    printed = capsys.readouterr().out
    assert "seasons/s" in printed and "events/s" in printed and "raw msgspec decode" in printed
    # And it describes the colony it really plays
    sectors = rules_sectors.full_colony_options()["setup"]["sectors"]
    buildings = sum(len(sector["buildings"]) for sector in sectors)
    assert f"({len(sectors)} explored sectors, {buildings} buildings)" in printed
