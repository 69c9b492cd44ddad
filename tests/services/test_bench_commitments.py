"""`almanac bench commitments` runs: every rule-set with a bench scenario gets a row, its v2 heads checked equal.

Given the rule-sets installed, when the commitment benchmark runs briefly, then it prints a row per rule-set with a
bench scenario (it stops with an error instead when the v2 path's heads differ from the first implementation's).
"""

from __future__ import annotations

from typer.testing import CliRunner

from almanac.events import registry
from almanac.services.cli import _load_commands, app

_load_commands()


def test_the_commitment_benchmark_prints_a_row_per_rule_set_with_heads_checked() -> None:
    result = CliRunner().invoke(app, ["bench", "commitments", "--events", "20", "--seconds", "0.1"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "every v2 head checked equal" in result.stdout
    benched = [name for name in registry.names() if registry.manifest(name).bench is not None]
    assert benched and all(f"│ {name} " in result.stdout for name in benched), result.stdout
