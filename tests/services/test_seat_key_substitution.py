"""An operator who answers a player's join with its own key is named by the player's bundle and the key they hold.

The operator holds the gateway: when ann joins registering her key, it records a join registering a key of its own
instead, signed by that key, so the join is valid in every respect and every command it later signs "as ann"
verifies. Nothing in the history alone tells the two keys apart (a key is whatever a join says). What ann holds
apart from the operator is her key; given it, `verify-player-bundle --seat-key` checks her bundle (tied to the
checkpoint her join's answer carried) against it and names the key the deployment's signed join registered.
"""

from __future__ import annotations

from signed_rooms import ANN_PUBLIC, OPERATORS_KEY, anns_bundle, public

from almanac.events.forensics.player_check import verify_player_bundle


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
