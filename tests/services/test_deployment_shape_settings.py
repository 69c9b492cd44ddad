"""One deployment shape, its layouts a matter of which shards a process holds (issue 29, point 3).

Given ALMANAC_ENGINE_SHARDS, a gateway may hold every shard, a group of them, or none ("none": in front of `almanac
engine` processes); an engine process told to hold none is refused at its start, as is a CLI command's --shards that
selects none. And a deployment that still sets ALMANAC_GATEWAY_ENGINE, the setting that made an HTTP-only gateway a
mode of its own, is refused at start whatever its value, with one line naming what replaced it: silently ignoring
"false" would have its gateways lease every shard. So is one that still sets an admission setting that went when
overload became one policy of two settings (ALMANAC_GATEWAY_MAX_INFLIGHT, ALMANAC_GATEWAY_TARGET_WAIT_MS).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from almanac.services.cli import _load_commands, app
from almanac.services.settings import SettingsError, load_settings, parse_shard_selection

_load_commands()
runner = CliRunner()


def test_a_process_may_hold_no_shard_when_it_says_none_and_nothing_else_selects_none() -> None:
    assert parse_shard_selection("none", 16) == []
    assert load_settings({"ALMANAC_ENGINE_SHARDS": "none"}).engine_shards == "none"
    # A misspelling is refused, not taken for "none": the line names what is accepted.
    for spelled in ("None", "nothing", ""):
        with pytest.raises(ValueError, match="all, none"):
            parse_shard_selection(spelled, 16)
    with pytest.raises(SettingsError) as refused:
        load_settings({"ALMANAC_ENGINE_SHARDS": "off"})
    assert refused.value.problems[0].startswith("ALMANAC_ENGINE_SHARDS='off' is not valid")


@pytest.mark.parametrize("value", ["false", "true"])
def test_a_deployment_still_setting_gateway_engine_is_refused_with_what_replaced_it(value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"ALMANAC_GATEWAY_ENGINE": value})
    [line] = refused.value.problems
    assert line.startswith("ALMANAC_GATEWAY_ENGINE is no longer a setting") and "ALMANAC_ENGINE_SHARDS=none" in line


@pytest.mark.parametrize("gone", ["ALMANAC_GATEWAY_MAX_LAG_MS", "ALMANAC_GATEWAY_WAIT_INTERVAL_MS",
                                  "ALMANAC_GATEWAY_LIMIT_WAIT_MS"])
def test_a_deployment_still_setting_a_gone_admission_rule_is_told_the_two_that_remain(gone: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({gone: "50"})
    [line] = refused.value.problems
    assert line.startswith(f"{gone} is no longer a setting")
    assert "ALMANAC_GATEWAY_MAX_INFLIGHT" in line and "ALMANAC_GATEWAY_TARGET_WAIT_MS" in line


def test_a_gateway_started_with_gateway_engine_exits_at_once_naming_the_setting(tmp_path) -> None:
    # Given a gateway's environment from before, with no Redis anywhere: it is refused before it would need one
    result = runner.invoke(app, ["gateway"], env={"ALMANAC_GATEWAY_ENGINE": "false", "ALMANAC_DATA_DIR": str(tmp_path),
                                                  "REDIS_URL": "redis://127.0.0.1:1", "COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "ALMANAC_GATEWAY_ENGINE is no longer a setting" in output and "ALMANAC_ENGINE_SHARDS=none" in output


def test_an_engine_process_told_to_hold_no_shard_is_refused_at_its_start(tmp_path) -> None:
    result = runner.invoke(app, ["engine", "--shards", "none"], env={"ALMANAC_DATA_DIR": str(tmp_path),
                                                                     "REDIS_URL": "redis://127.0.0.1:1",
                                                                     "COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "holds no shard" in " ".join(result.output.split())
    # and so is any other command's --shards that selects none (it would do nothing)
    result = runner.invoke(app, ["projector", "--shards", "none"],
                           env={"ALMANAC_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://127.0.0.1:1",
                                "COLUMNS": "200"})
    assert result.exit_code == 1 and "selects no shard" in " ".join(result.output.split()), result.output
