"""The console's JavaScript verifier and the Python one give the same verdicts on honest and tampered player-safe
bundles of a live realm trade (docs/bundle-format.md section 6.5)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import httpx
import pytest
from checkpoint_support import stranger_ring
from test_console_browser import (  # noqa: F401 - fixtures: the gateway process, Chromium, screenshots
    CHROMIUM,
    auditor,
    base_url,
    browser,
    page,
    shots,
)

from almanac.events import commitments as cm
from almanac.events.forensics.player_check import verify_player_bundle

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"),
]

JS_VERDICT = """async ([bundle, checkpoints, keys]) => {
  const { verifyPlayerBundle } = await import("/console/verify.js");
  const v = await verifyPlayerBundle(bundle, { checkpoints, keys });
  return [v.status, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null,
          v.failed ? v.failed.detail : "", v.limits];
}"""


def _copy(value):
    return json.loads(json.dumps(value))


def _trade_room(url: str) -> tuple[dict, dict, list, dict]:
    """Alice's and bob's bundles of a live realm room where they traded, alice's checkpoints, the key set."""
    suffix = secrets.token_hex(3)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    with httpx.Client(base_url=url, timeout=15) as http:
        created = http.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {"players": [alice, bob]}})
        assert created.status_code == 201, created.text
        room, tokens = created.json()["room"], {alice: created.json()["token"]}
        tokens[bob] = http.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]

        def play(who: str, command: dict) -> dict:
            answer = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {tokens[who]}"},
                               json={"command": command})
            assert answer.status_code == 200, answer.text
            return answer.json()

        sent = play(alice, {"kind": "send_merchant", "to": bob, "load": {"food": 6000, "gold": 2000}})
        trade = f"trade-{sent['first_version']}"
        play(alice, {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1})
        play(bob, {"kind": "counter_offer", "trade_id": trade, "want": "gold"})
        play(alice, {"kind": "agree_trade", "trade_id": trade})
        play(bob, {"kind": "agree_trade", "trade_id": trade})
        bundles = {who: http.get(f"/rooms/{room}/player-bundle", headers={"Authorization": f"Bearer {token}"}).json()
                   for who, token in tokens.items()}
        held = http.get(f"/rooms/{room}/checkpoints", headers={"Authorization": f"Bearer {tokens[alice]}"}).json()
        keys = http.get("/.well-known/almanac-keys.json").json()
    return bundles[alice], bundles[bob], held["checkpoints"], keys


def cases(mine: dict, theirs: dict, held: list, keys: dict) -> dict[str, tuple[dict, list, dict | None]]:
    player = mine["player"]
    own = next(i for i, e in enumerate(mine["events"]) if player in e["opened"])
    greedy, hides, missing, moved_leaf, bad_leaf = (_copy(mine) for _ in range(5))
    other = theirs["player"]
    shared = next(i for i, e in enumerate(theirs["events"]) if other in e["opened"] and other in mine["events"][i]["leaves"])
    greedy["events"][shared]["opened"][other] = theirs["events"][shared]["opened"][other]
    del greedy["events"][shared]["leaves"][other]
    hides["events"][own]["leaves"][player] = "00" * 32
    del hides["events"][own]["opened"][player]
    del missing["events"][2]
    moved_leaf["events"][own]["leaves"][cm.FULL] = "ab" * 32
    bad_leaf["events"][own]["leaves"][cm.FULL] = "AB" * 32
    last = held[-1]
    return {
        "honest, with alice's checkpoints": (mine, held, keys),
        "honest, no key set": (mine, held, None),
        "honest, none of her checkpoints": (mine, [], keys),
        "opens another seat's view": (greedy, held, keys),
        "hides her own view": (hides, held, keys),
        "a version missing": (missing, held, keys),
        "the whole event's leaf changed": (moved_leaf, held, keys),
        "a leaf not lowercase hex": (bad_leaf, held, keys),
        "checkpoint from another key": (mine, [stranger_ring().sign(last["room"], last["version"],
                                                                    bytes.fromhex(last["head"]))], keys),
        "checkpoint moved to another head": (mine, [{**last, "head": "cd" * 32}], keys),
        "not a player bundle": ({"format": "almanac-dispute-bundle"}, held, keys),
    }


def test_both_verifiers_agree_on_player_bundles(page, base_url: str, shots: Path) -> None:  # noqa: F811
    # Given alice's and bob's bundles of their trade in a live room, alice's checkpoints and the key set
    mine, theirs, held, keys = _trade_room(base_url)
    page.goto("/")
    # When each honest and tampered case is checked by both verifiers
    verdicts = {}
    for name, (bundle, checkpoints, key_set) in cases(mine, theirs, held, keys).items():
        python = verify_player_bundle(bundle, checkpoints, key_set)
        js = page.evaluate(JS_VERDICT, [bundle, checkpoints, key_set])
        verdicts[name] = ((python.status, python.failed.name if python.failed else None,
                           python.failed.version if python.failed else None), tuple(js[:3]), js[3], js[4])
    # Then they agree on every one: the verdict, the failed step and the version it names
    for name, (python, js, detail, _) in verdicts.items():
        assert python == js, f"{name}: python {python}, javascript {js} ({detail})"
    assert verdicts["honest, with alice's checkpoints"][0][0] == "VERIFIED"
    assert verdicts["honest, no key set"][0][0] == verdicts["honest, none of her checkpoints"][0][0] == "INCOMPLETE"
    assert sum(python[0] == "NOT VERIFIED" for python, *_ in verdicts.values()) == len(verdicts) - 3
    # and the console's verdict says, as Python's does, that no command was re-decided
    assert all("NOT PROVABLE" in limits for *_, limits in verdicts.values())
