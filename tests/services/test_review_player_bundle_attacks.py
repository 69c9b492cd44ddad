"""Adversarial review of player-safe bundles: what the player verifier accepts that it should not."""

from __future__ import annotations

import json

from test_player_bundles import room, verdict  # noqa: F401 - the fixture the golden realm room comes from


def test_a_bundle_whose_versions_are_floats_is_not_verified(room) -> None:  # noqa: F811
    # Given alice's bundle, every version re-spelt as a float (1.0 == 1 in Python, so main compared it equal)
    bundle = json.loads(json.dumps(room["alice"]))
    for entry in bundle["events"]:
        entry["version"] = float(entry["version"])
    # Then the verifier reads the spelling it defines, a whole number, and refuses the other
    result = verdict(bundle, room)
    assert result.status == "NOT VERIFIED", result.text()
    assert any(step.name == "views" and step.status == "failed" for step in result.steps), result.text()
