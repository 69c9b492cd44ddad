"""An operator who answers a player's join with its own key is named by the player's bundle and the key they hold.

The operator holds the gateway: when ann joins registering her key, it records a join registering a key of its own
instead, signed by that key, so the join is valid in every respect and every command it later signs "as ann"
verifies. Nothing in the history alone tells the two keys apart (a key is whatever a join says). What ann holds
apart from the operator is her key; given it, `verify-player-bundle --seat-key` checks her bundle (tied to the
checkpoint her join's answer carried) against it and names the key the deployment's signed join registered.
"""

from __future__ import annotations

import asyncio
import json

from signed_rooms import ANN_PUBLIC, OPERATORS_KEY, anns_bundle, public
from typer.testing import CliRunner

from almanac.events.forensics.player_check import verify_player_bundle
from almanac.services.cli import _load_commands, app

_load_commands()
runner = CliRunner()


async def test_a_join_answered_with_the_operators_own_key_is_named_by_the_key_ann_holds():
    bundle, held, keys = await anns_bundle(join_key=OPERATORS_KEY)
    # Without her key the substituted join passes every check: it is a valid signed join
    assert verify_player_bundle(bundle, held, keys).status == "VERIFIED"
    # With the key she holds, the step names the key the deployment's signed join registered instead
    verdict = verify_player_bundle(bundle, held, keys, seat_key=ANN_PUBLIC)
    assert verdict.status == "NOT VERIFIED", verdict.text()
    failed = next(step for step in verdict.steps if step.status == "failed")
    assert failed.name == "seat key" and failed.version == 2, verdict.text()
    assert public(OPERATORS_KEY) in failed.detail and ANN_PUBLIC in failed.detail


async def test_her_own_key_passes_and_a_malformed_one_fails():
    bundle, held, keys = await anns_bundle()
    honest = verify_player_bundle(bundle, held, keys, seat_key=ANN_PUBLIC)
    assert honest.status == "VERIFIED" and honest.steps[-1].name == "seat key", honest.text()
    assert verify_player_bundle(bundle, held, keys, seat_key="ANN").steps[-1].status == "failed"


async def test_her_cli_fails_the_substituted_join_naming_the_key_it_registered(tmp_path):
    # Only ann can see the substitution (only she knows which key she made): her own tool, `almanac
    # verify-player-bundle --seat-key` with the files she holds (her bundle, the checkpoint her join's answer carried,
    # the deployment's key set), exits 1 naming the operator's key; without her key it cannot tell (exit 0)
    bundle, held, keys = await anns_bundle(join_key=OPERATORS_KEY)
    files = {"bundle": bundle, "checkpoints": {"format": "almanac-checkpoints", "format_version": 1, "checkpoints": held},
             "keys": keys}
    for name, document in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    args = ["verify-player-bundle", str(tmp_path / "bundle.json"), "--checkpoints", str(tmp_path / "checkpoints.json"),
            "--keys", str(tmp_path / "keys.json")]
    env = {"ALMANAC_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    blind = await asyncio.to_thread(runner.invoke, app, args, env=env)
    assert blind.exit_code == 0 and "VERIFIED" in blind.stdout, blind.output
    hers = await asyncio.to_thread(runner.invoke, app, [*args, "--seat-key", ANN_PUBLIC], env=env)
    assert hers.exit_code == 1 and "NOT VERIFIED" in hers.stdout, hers.output
    assert "seat key" in hers.stdout and public(OPERATORS_KEY) in hers.stdout, hers.output
