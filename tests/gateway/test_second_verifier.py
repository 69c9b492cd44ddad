"""The console's JavaScript verifier (WebCrypto, real Chromium) and the Python one give the same verdicts, on dispute
bundles and on player-safe bundles."""

from __future__ import annotations

import asyncio
import base64
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import httpx
import msgspec
import pytest
from bundle_forgery import (
    chain_of,
    copy,
    dropped,
    edited,
    not_resealed,
    records_of,
    stranger_ring,
    swapped,
    truncated,
    with_refusal,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signed_rooms import (
    ANN_PUBLIC,
    DEPLOYMENT,
    OPERATORS_KEY,
    ROOM,
    anns_bundle,
    anns_falsely_refused_roll,
    bobs_receipted_refusal,
    ended_room,
    public,
    signed,
    signing_room,
    whole_bundle,
)
from test_console_browser import (  # noqa: F401 - fixtures: the gateway process, Chromium, screenshots
    CHROMIUM,
    auditor,
    base_url,
    board_room_played,
    board_rules,
    board_state,
    browser,
    page,
    realm_trade_played,
    shots,
)

from almanac.events import codec, commitments as cm
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.forensics.player_check import verify_player_bundle
from almanac.events.forensics.signers import seats_line
from almanac.events.step import CommandRecord, decode_record
from almanac.services.checkpoints import KeyRing, key_ring
from almanac.services.forensics.bundle import dispute_bundle
from almanac.storage.export_store import ExportFileStore

GOLDEN_REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"  # an ended realm game, scheme 1

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"),
]

JS_VERDICT = """async ([bundle, checkpoints, keys]) => {
  const { verifyBundle } = await import("/console/verify.js");
  const v = await verifyBundle(bundle, { checkpoints, keys });
  return [v.ok, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null, v.failed ? v.failed.detail : "",
          v.seats];
}"""


def cases(bundle: dict, held: list, keys: dict, deployment: KeyRing) -> dict[str, tuple[dict, list, dict | None]]:
    """The same honest and tampered bundles, checkpoints and key sets for both verifiers (``deployment``: the
    gateway's own signing keys, as its operator holds them)."""
    last = held[-1]
    # the operator signs a second head for the version of tess's last checkpoint: an equivocation, whatever the bundle
    second = deployment.sign(last["room"], last["version"], bytes.fromhex("ab" * 32))
    ring = stranger_ring()
    forged = edited(bundle, 2, lambda e: e.setdefault("note", "forged"))
    without_commitments = {k: v for k, v in bundle.items() if k not in ("commitments", "checkpoint", "keys")}
    broken = copy(bundle)
    broken["chain"]["envelopes"][0] = "not base64!"
    return {
        "honest, with the player's checkpoints": (bundle, held, keys),
        "honest, no key set": ({**bundle, "checkpoint": None}, [], None),
        "edited earlier event, both chains re-sealed": (forged, held, keys),
        "dropped event, re-sealed": (dropped(bundle, 3), held, keys),
        "swapped events, re-sealed": (swapped(bundle, 2, 3), held, keys),
        "truncated before the last checkpoint": (truncated(bundle, len(chain_of(bundle)) - 1), held, keys),
        "edited, not re-sealed": (not_resealed(bundle, 2), held, keys),
        "forged signature": (bundle, [{**last, "sig": last["sig"][:-2] + ("00" if last["sig"][-2:] != "00" else "11")}], keys),
        "checkpoint moved to another head": (bundle, [{**last, "head": "ab" * 32}], keys),
        "checkpoint from another key": (bundle, [ring.sign(last["room"], last["version"], bytes.fromhex(last["head"]))], keys),
        "key set without the deployment's key": (bundle, held, ring.document),
        "checkpoint of another room": (bundle, [{**last, "room": "elsewhere"}], keys),
        "malformed checkpoint": (bundle, [{**last, "extra": 1}], keys),
        "no commitments but checkpoints": (without_commitments, held, keys),
        "envelope not base64": (broken, held, keys),
        "two heads signed for one version": (bundle, [*held, second], keys),
        "two heads signed for one version, forged bundle": (forged, [second, *held], keys),
    }


def test_both_verifiers_agree_on_honest_and_tampered_bundles(page, base_url: str, auditor: str,  # noqa: F811
                                                            shots: Path, stack) -> None:  # noqa: F811 - the fixtures above
    # Given a board room tess played, her checkpoints, the published key set and the auditor's bundle
    room, token = board_room_played(base_url, auditor, "tess", 3)
    with httpx.Client(base_url=base_url, timeout=15) as http:
        keys = http.get("/.well-known/almanac-keys.json").json()
        held = http.get(f"/rooms/{room}/checkpoints", headers={"Authorization": f"Bearer {token}"}).json()["checkpoints"]
        head = http.get(f"/rooms/{room}").json()["version"]
        bundle = http.get(f"/rooms/{room}/dispute?from=1&to={head}", headers={"Authorization": f"Bearer {auditor}"}).json()
    # (a room created now commits per viewer: both verifiers hash scheme v2's leaves, docs/bundle-format.md section 6)
    assert bundle["commitments"]["scheme"] == "almanac-commit-v2"
    page.goto("/")

    # When each case is checked by the Python verifier and by the console's, in Chromium
    verdicts, seats = {}, {}
    deployment = key_ring(SimpleNamespace(signing_keys="", retired_public_keys="", data_dir=str(stack.data_dir)))
    assert deployment.document == keys
    details = {}
    for name, (b, checkpoints, key_set) in cases(bundle, held, keys, deployment).items():
        python = verify_bundle(b, None, checkpoints=checkpoints, keys=key_set)
        python_failed = python.failed
        # The JS verifier checks format, chain and checkpoints: the verdicts compared are "did any step fail, which,
        # at which version" (Python's later steps, the re-decision, pass on these; a live room is INCOMPLETE there).
        js = page.evaluate(JS_VERDICT, [b, checkpoints, key_set])
        verdicts[name] = ((python_failed is None, python_failed.name if python_failed else None,
                           python_failed.version if python_failed else None), tuple(js[:3]), js[3])
        seats[name] = (msgspec.to_builtins(python.seats), js[4])
        details[name] = (python_failed.detail if python_failed else "", js[3])

    # Then they agree on every one: ok or not, the failed step, and the version it names
    for name, (python, js, detail) in verdicts.items():
        assert python == js, f"{name}: python {python}, javascript {js} ({detail})"
    # and on the room's dice scheme and seats, word for word (none when the chain does not hold)
    for name, (python, js) in seats.items():
        assert python == js, f"{name}: python {python}, javascript {js}"
    assert seats["honest, with the player's checkpoints"][0]["dice_scheme"] == 3
    assert verdicts["honest, with the player's checkpoints"][0] == (True, None, None)
    # and on an equivocation, word for word, naming both heads whatever the bundle's chain (a proof in itself)
    for name in ("two heads signed for one version", "two heads signed for one version, forged bundle"):
        python, js = details[name]
        assert python == js and python.startswith(
            f"equivocation: the deployment signed two heads for version {held[-1]['version']}: "), (python, js)
        assert held[-1]["head"] in python and "ab" * 32 in python and deployment.document["active"] in python
    assert sum(not python[0] for python, _, _ in verdicts.values()) == len(verdicts) - 2
    assert {python[1] for python, _, _ in verdicts.values()} == {None, "format", "chain", "checkpoints"}


def test_the_console_keeps_a_players_checkpoints_and_checks_a_bundle_against_them(page, base_url: str,  # noqa: F811
                                                                                 auditor: str, shots: Path,  # noqa: F811
                                                                                 tmp_path: Path) -> None:
    # Given tess's board room, her seat in this browser, and the auditor's bundle (honest and one re-sealed forgery)
    room, token = board_room_played(base_url, auditor, "tess", 2)
    with httpx.Client(base_url=base_url, timeout=15) as http:
        head = http.get(f"/rooms/{room}").json()["version"]
        bundle = http.get(f"/rooms/{room}/dispute?from=1&to={head}", headers={"Authorization": f"Bearer {auditor}"}).json()
    honest, forged = tmp_path / "bundle.json", tmp_path / "forged.json"
    honest.write_text(json.dumps(bundle))
    forged.write_text(json.dumps(edited(bundle, 2, lambda e: e.setdefault("note", "forged"))))
    page.goto("/")
    page.evaluate("([room, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player: 'tess', token}))",
                  [room, token])

    # When she opens the room: every answer's checkpoint is kept in local storage
    page.goto(f"/#/room/{room}")
    panel = page.get_by_role("region", name="Checkpoints")
    page.wait_for_function("(room) => JSON.parse(localStorage.getItem(`almanac-checkpoints:${room}`) || '[]').length > 0",
                           arg=room)
    page.reload()
    assert int(panel.get_by_test_id("checkpoints-held").inner_text()) >= 1

    # Then the honest bundle verifies in the browser and the forgery fails at the checkpoints
    panel.get_by_label("bundle file").set_input_files(str(honest))
    verdict = panel.get_by_test_id("bundle-verdict")
    verdict.get_by_text("chain and checkpoints verified").wait_for()
    # with the room's dice scheme and who signed, in the words Python's verdict prints
    python_seats = verify_bundle(bundle, None).text().splitlines()
    shown = verdict.get_by_test_id("bundle-seats").inner_text()
    assert shown.startswith("seats: dice scheme 3") and f"  {shown}" in python_seats, (shown, python_seats)
    page.screenshot(path=str(shots / "checkpoints-verified.png"), full_page=True)
    panel.get_by_label("bundle file").set_input_files(str(forged))
    verdict.get_by_text("NOT VERIFIED").wait_for()
    assert "checkpoints" in verdict.inner_text() and "does not pass through" in verdict.inner_text()
    panel.screenshot(path=str(shots / "checkpoints-forged.png"))
    # and the export is a checkpoint file with the key set
    with page.expect_download() as download:
        panel.get_by_role("button", name="Export checkpoints").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["format"] == "almanac-checkpoints" and exported["keys"]["keys"]
    assert verify_bundle(bundle, None, checkpoints=exported["checkpoints"], keys=exported["keys"]).failed is None
    assert base64  # envelopes in the bundles are base64 (chain_of decodes them)


def test_the_console_keeps_a_refusals_receipt_and_exports_it_as_proof(page, base_url: str, auditor: str,  # noqa: F811
                                                                       shots: Path, tmp_path: Path) -> None:  # noqa: F811
    # Given tess's board room (one move played) and her seat in this browser
    room, token = board_room_played(base_url, auditor, "tess", 1)
    keys = httpx.get(f"{base_url}/.well-known/almanac-keys.json").json()
    page.goto("/")
    page.evaluate("([room, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player: 'tess', token}))",
                  [room, token])
    page.goto(f"/#/room/{room}")
    # When she sends a move onto a cell already filled, through the Play form, and it is refused by the rules
    state = board_state(base_url, auditor, room)
    element = board_rules.current_element(state)
    illegal = next(p for p, cells in board_rules.in_map_placements(element) if not board_rules.is_free(state.board, cells))
    page.locator("#command-kind").select_option("place_element")
    page.locator("#cmd-row").fill(str(illegal.row))
    page.locator("#cmd-column").fill(str(illegal.column))
    page.locator("#cmd-rotation").fill(str(illegal.rotation))
    page.locator("#cmd-mirror").set_checked(illegal.mirror)
    page.get_by_role("button", name="Send command").click()
    page.get_by_test_id("refusal").get_by_role("alert").wait_for()
    # Then the browser checked the answer's receipt against the pinned key set and kept it
    page.wait_for_function("(room) => JSON.parse(localStorage.getItem(`almanac-receipts:${room}`) || '[]').length === 1",
                           arg=room)
    (receipt,) = page.evaluate("(room) => JSON.parse(localStorage.getItem(`almanac-receipts:${room}`))", room)
    assert cm.receipt_signature_valid(cm.trusted_keys(keys)[receipt["kid"]], receipt) and receipt["player"] == "tess"
    panel = page.get_by_role("region", name="Checkpoints")
    assert panel.get_by_test_id("receipts-held").inner_text() == "1"
    # and exports it as a receipt file, which, once the room has ended, covers her refusal in the auditor's bundle
    with page.expect_download() as download:
        panel.get_by_role("button", name="Export receipts").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["format"] == "almanac-receipts" and exported["receipts"] == [receipt]
    headers = {"Authorization": f"Bearer {token}"}
    ended = httpx.post(f"{base_url}/rooms/{room}/end", json={"reason": "done"}, headers=headers)
    assert ended.status_code == 200, ended.text
    head = httpx.get(f"{base_url}/rooms/{room}").json()["version"]
    bundle = httpx.get(f"{base_url}/rooms/{room}/dispute?from=1&to={head}",
                       headers={"Authorization": f"Bearer {auditor}"}).json()
    # (with the checkpoint her end's answer carried, on the head: what anchors the whole history)
    verdict = verify_bundle(bundle, keys=exported["keys"], receipts=exported["receipts"],
                            checkpoints=[ended.json()["checkpoint"]])
    assert verdict.ok and next(s for s in verdict.steps if s.name == "receipts").status == "passed", verdict.text()
    # and the console's own check of that bundle takes the receipts it kept (their signatures and history)
    kept = tmp_path / "bundle.json"
    kept.write_text(json.dumps(bundle))
    page.reload()
    panel.get_by_label("bundle file").set_input_files(str(kept))
    shown = panel.get_by_test_id("bundle-verdict")
    shown.get_by_text("chain and checkpoints verified").wait_for()
    assert "[skipped] receipts" in shown.inner_text()
    page.screenshot(path=str(shots / "refusal-receipt-kept.png"), full_page=True)


JS_PLAYER_VERDICT = """async ([bundle, checkpoints, keys]) => {
  const { verifyPlayerBundle } = await import("/console/verify.js");
  const v = await verifyPlayerBundle(bundle, { checkpoints, keys });
  return [v.status, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null,
          v.failed ? v.failed.detail : "", v.limits];
}"""


def _trade_bundles(url: str) -> tuple[dict, dict, list, dict]:
    """Alice's and bob's bundles of a live realm room where they traded, alice's checkpoints, the key set."""
    room, _, tokens = realm_trade_played(url)
    (_, alice_token), (_, bob_token) = tokens.items()
    with httpx.Client(base_url=url, timeout=15) as http:
        mine, theirs = (http.get(f"/rooms/{room}/player-bundle", headers={"Authorization": f"Bearer {token}"}).json()
                        for token in (alice_token, bob_token))
        held = http.get(f"/rooms/{room}/checkpoints", headers={"Authorization": f"Bearer {alice_token}"}).json()
        keys = http.get("/.well-known/almanac-keys.json").json()
    return mine, theirs, held["checkpoints"], keys


def player_cases(mine: dict, theirs: dict, held: list, keys: dict) -> dict[str, tuple[dict, list, dict | None]]:
    player = mine["player"]
    own = next(i for i, e in enumerate(mine["events"]) if player in e["opened"])
    greedy, hides, missing, moved_leaf, bad_leaf = (copy(mine) for _ in range(5))
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
        "the limits reworded": ({**mine, "limits": "proves everything"}, held, keys),
        "the first line says it is for anyone": ({**mine, "audience": {**mine["audience"], "who": "anyone"}}, held, keys),
    }


def test_both_verifiers_agree_on_player_bundles(page, base_url: str, shots: Path) -> None:  # noqa: F811
    # Given alice's and bob's bundles of their trade in a live room, alice's checkpoints and the key set
    mine, theirs, held, keys = _trade_bundles(base_url)
    page.goto("/")
    # When each honest and tampered case is checked by both verifiers
    verdicts = {}
    for name, (bundle, checkpoints, key_set) in player_cases(mine, theirs, held, keys).items():
        python = verify_player_bundle(bundle, checkpoints, key_set)
        js = page.evaluate(JS_PLAYER_VERDICT, [bundle, checkpoints, key_set])
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


JS_SEAT_KEY = """async ([bundle, checkpoints, keys, seatKey]) => {
  const { verifyPlayerBundle } = await import("/console/verify.js");
  const v = await verifyPlayerBundle(bundle, { checkpoints, keys, seatKey });
  return [v.status, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null, v.failed ? v.failed.detail : ""];
}"""


def test_both_verifiers_name_a_join_answered_with_the_operators_own_key(page, base_url: str) -> None:  # noqa: F811
    # Given ann's bundle of a room where her join registered her key, and one where the operator answered her join
    # with a key of its own, signed by that key (tests/signed_rooms.anns_bundle)
    def built() -> tuple[tuple, tuple]:
        async def both():
            return await anns_bundle(), await anns_bundle(join_key=OPERATORS_KEY)
        return asyncio.run(both())

    with ThreadPoolExecutor(1) as pool:  # (in a thread: Playwright's sync API keeps an event loop running here)
        honest, substituted = pool.submit(built).result()
    page.goto("/")
    cases = {"her own key": (honest, ANN_PUBLIC), "the operator's key in her join": (substituted, ANN_PUBLIC),
             "a malformed key": (honest, "ANN")}
    # When each is checked against the key she holds, by the Python verifier and by the console's
    seen = {}
    for name, ((bundle, held, keys), seat_key) in cases.items():
        python = verify_player_bundle(bundle, held, keys, seat_key=seat_key)
        js = page.evaluate(JS_SEAT_KEY, [bundle, held, keys, seat_key])
        seen[name] = ((python.status, python.failed.name if python.failed else None,
                       python.failed.version if python.failed else None), tuple(js[:3]), js[3])
    # Then they agree, and the substituted join is named at its version with the key it registered
    for name, (python, js, detail) in seen.items():
        assert python == js, f"{name}: python {python}, javascript {js} ({detail})"
    assert {name: python[0] for name, (python, _, _) in seen.items()} == {
        "her own key": "VERIFIED", "the operator's key in her join": "NOT VERIFIED", "a malformed key": "NOT VERIFIED"}
    assert seen["the operator's key in her join"][0][1:] == ("seat key", 2)
    assert public(OPERATORS_KEY) in seen["the operator's key in her join"][2]


JS_REFUSALS = """async ([bundle]) => {
  const { verifyBundle } = await import("/console/verify.js");
  const v = await verifyBundle(bundle, {});
  const step = v.steps.find((s) => s.name === "refusals");
  return [v.ok, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null, step && !v.failed ? step.status : null,
          step ? step.detail : "", v.seats];
}"""


def refusal_cases() -> dict[str, dict]:
    """Bundles of ann's room (tests/signed_rooms.py) whose refusals are hers signed over the version she saw, bob's
    unsigned, hers signed in the v1 form, and the operator's: hers moved to another version, shown twice, and one
    signed by its own key over the version."""
    def built() -> tuple[dict, dict, dict]:
        async def all_three():
            return tuple([(await ended_room(who, old_form=old))[1] for who, old in (("ann", False), ("bob", False),
                                                                                     ("ann", True))])
        return asyncio.run(all_three())

    # (in a thread: Playwright's sync API keeps an event loop running in this one)
    with ThreadPoolExecutor(1) as pool:
        ann, bob, old = pool.submit(built).result()
    real = decode_record(base64.b64decode(ann["refusals"][0]["raw"]))
    at = real.refused_at_version
    moved = with_refusal(ann, msgspec.structs.replace(real, refused_at_version=at - 1), "nonce_mismatch")
    moved["refusals"] = moved["refusals"][1:]
    twice = copy(ann)
    twice["refusals"].append(twice["refusals"][0])
    mallory = Ed25519PrivateKey.from_private_bytes(bytes(32))
    invented = CommandRecord(command_id=f"{ROOM}:ann:invented", room=ROOM, player="ann", server_time_ms=4_500,
                             body={"kind": "roll", "dice": 6})
    by_operator = msgspec.structs.replace(signed(invented, key=mallory, seen_version=at), refused_at_version=at)
    accepted = next(record for record in records_of(ann) if record.command_id == "a1")  # ann's signed roll
    accepted_shown_refused = with_refusal(
        ann, msgspec.structs.replace(accepted, refused_at_version=accepted.seen_version), "nonce_mismatch")
    return {
        "ann's refusal, signed over the version she saw": ann,
        "bob's refusal, unsigned": bob,
        "ann's refusal, signed in the v1 form": old,
        "ann's refusal moved to another version": moved,
        "ann's refusal shown twice": twice,
        "a refusal signed by the operator's key": with_refusal(ann, by_operator, "signature_invalid"),
        "ann's accepted roll shown refused at the version she saw": accepted_shown_refused,
    }


def test_both_verifiers_agree_on_which_refusals_a_signature_covers(page, base_url: str) -> None:  # noqa: F811
    # Given ann's ended room and the refusal bundles an honest server and a forging operator would show
    cases = refusal_cases()
    page.goto("/")

    # When each is checked by the Python verifier and by the console's, in Chromium
    seen, seats = {}, {}
    for name, bundle in cases.items():
        python = verify_bundle(bundle, bundle["head"]["hash"])
        step = next((s for s in python.steps if s.name == "refusals"), None)
        failed = python.failed
        mine = (failed is None, failed.name if failed else None, failed.version if failed else None,
                None if failed else step.status)
        js = page.evaluate(JS_REFUSALS, [bundle])
        seen[name] = (mine, tuple(js[:4]), js[4])
        seats[name] = (msgspec.to_builtins(python.seats), js[5])

    # Then they agree: the failed step and the version it names, or whether the refusals are covered
    for name, (python, js, detail) in seen.items():
        assert python == js, f"{name}: python {python}, javascript {js} ({detail})"
    # and both name ann's seat signing and bob's not, with the same caveat
    for name, (python, js) in seats.items():
        assert python == js and python["unsigned_players"] == ["bob"], f"{name}: python {python}, javascript {js}"
    assert {name: python[3] if python[0] else python[1] for name, (python, _, _) in seen.items()} == {
        "ann's refusal, signed over the version she saw": "passed",
        "bob's refusal, unsigned": "skipped",
        "ann's refusal, signed in the v1 form": "skipped",
        "ann's refusal moved to another version": "refusals",
        "ann's refusal shown twice": "refusals",
        "a refusal signed by the operator's key": "skipped",
        "ann's accepted roll shown refused at the version she saw": "refusals",
    }


JS_RECEIPTS = """async ([bundle, receipts, keys]) => {
  const { verifyBundle } = await import("/console/verify.js");
  const v = await verifyBundle(bundle, { receipts, keys });
  const step = v.steps.find((s) => s.name === "refusals");
  return [v.ok, v.failed ? v.failed.name : null, v.failed ? v.failed.version : null, step && !v.failed ? step.status : null,
          v.failed ? v.failed.detail : ""];
}"""


def receipt_cases() -> tuple[dict[str, tuple[dict, list]], dict, str]:
    """Bundles of rooms where a refusal was answered with the deployment's receipt (tests/signed_rooms.py), with the
    receipts a player hands in: bob's honest one, it altered, one a stranger signed, his refusal shown with another
    code than signed; and ann's receipt of a roll the operator falsely refused. With the key set, and the name of
    the false refusal's case."""
    def built():
        async def both():
            honest_room, receipt, record = await bobs_receipted_refusal()
            false_room, false_receipt, _ = await anns_falsely_refused_roll()
            # the operator invents an unsigned refusal for ann, who signs, and signs a receipt of it itself
            signing_room, _ = await ended_room("ann")
            made_up = CommandRecord(command_id=f"{ROOM}:ann:invented", room=ROOM, player="ann", server_time_ms=4_500,
                                    body={"kind": "roll", "dice": 6}, refused_at_version=2)
            own = await DEPLOYMENT.refusal_receipt(signing_room.store, codec.encode(made_up), "signature_required")
            made_up_bundle = with_refusal({**await whole_bundle(signing_room), "refusals": []}, made_up,
                                          "signature_required")
            # and one for mallory, who never joined bob's room, with a receipt it signs itself
            mallorys = CommandRecord(command_id=f"{ROOM}:mallory:1", room=ROOM, player="mallory", server_time_ms=4_500,
                                     body={"kind": "roll", "dice": 6}, refused_at_version=2)
            for_mallory = await DEPLOYMENT.refusal_receipt(honest_room.store, codec.encode(mallorys), "not_joined")
            mallory_bundle = with_refusal({**await whole_bundle(honest_room), "refusals": []}, mallorys, "not_joined")
            return (await whole_bundle(honest_room), receipt, record, await whole_bundle(false_room), false_receipt,
                    made_up_bundle, own, mallory_bundle, for_mallory)
        return asyncio.run(both())

    with ThreadPoolExecutor(1) as pool:  # (Playwright's sync API keeps an event loop running in this thread)
        (bundle, receipt, record, false_bundle, false_receipt, made_up_bundle, own, mallory_bundle,
         for_mallory) = pool.submit(built).result()
    invented = msgspec.structs.replace(record, command_id=f"{ROOM}:bob:invented")
    forged = stranger_ring().sign_refusal(ROOM, receipt["version"], bytes.fromhex(receipt["head"]), invented,
                                          codec.encode(invented), "nonce_mismatch")
    recoded = copy(bundle)
    recoded["refusals"][0]["error"]["code"] = "nonce_reused"
    false_refusal = "ann's receipt of a roll the operator falsely refused"
    return {
        "bob's honest receipt": (bundle, [receipt]),
        "no receipt": (bundle, []),
        "bob's receipt, its code altered": (bundle, [{**receipt, "code": "nonce_reused"}]),
        "a receipt a stranger signed": (bundle, [forged]),
        "a receipt of another room": (bundle, [{**receipt, "room": "elsewhere"}]),
        "a malformed receipt": (bundle, [{**receipt, "extra": 1}]),
        "bob's refusal shown with another code than signed": (recoded, [receipt]),
        false_refusal: (false_bundle, [false_receipt]),
        "the operator's receipt of a refusal it invented for a signing seat": (made_up_bundle, [own]),
        "the operator's receipt of a refusal it invented for a name never seated": (mallory_bundle, [for_mallory]),
    }, DEPLOYMENT.ring.document, false_refusal


def test_both_verifiers_agree_on_refusal_receipts_but_only_python_decides_a_false_one(page, base_url: str) -> None:  # noqa: F811
    # Given the receipts players hand in with the bundles of their rooms
    cases, keys, false_refusal = receipt_cases()
    page.goto("/")

    # When each is checked by the Python verifier and by the console's, in Chromium
    seen = {}
    for name, (bundle, receipts) in cases.items():
        python = verify_bundle(bundle, keys=keys, receipts=receipts)
        step = next((s for s in python.steps if s.name == "refusals"), None)
        failed = python.failed
        mine = (failed is None, failed.name if failed else None, failed.version if failed else None,
                None if failed else step.status)
        js = page.evaluate(JS_RECEIPTS, [bundle, receipts, keys])
        seen[name] = (mine, tuple(js[:4]), js[4])

    # Then they agree on every case but the false refusal: the receipt's signature, room, record and history, and
    # whether the bundle's refusal is the one signed (then covered: "passed", where without it "skipped")
    assert {name: python[3] if python[0] else python[1] for name, (python, _, _) in seen.items()} == {
        "bob's honest receipt": "passed",
        "no receipt": "skipped",
        "bob's receipt, its code altered": "receipts",
        "a receipt a stranger signed": "receipts",
        "a receipt of another room": "receipts",
        "a malformed receipt": "receipts",
        "bob's refusal shown with another code than signed": "refusals",
        false_refusal: "receipts",
        "the operator's receipt of a refusal it invented for a signing seat": "skipped",  # covers nothing
        "the operator's receipt of a refusal it invented for a name never seated": "skipped",  # nor this
    }
    for name, (python, js, detail) in seen.items():
        if name != false_refusal:
            assert python == js, f"{name}: python {python}, javascript {js} ({detail})"
    # and the false refusal is the known limit of the console's verifier: deciding the command again needs the
    # rules, so it takes the validly signed receipt on this history without judging the refusal (docs/bundle-
    # format.md section 8.3); the Python verifier fails it, naming the receipt
    python, js, _ = seen[false_refusal]
    assert python[:2] == (False, "receipts") and js[:2] == (True, None), (python, js)


JS_SEATS = """async ([bundle]) => {
  const { verifyBundle, seatsLine } = await import("/console/verify.js");
  const v = await verifyBundle(bundle, {});
  return [v.ok, v.seats, v.seats ? seatsLine(v.seats) : null];
}"""


def test_both_verifiers_name_the_rooms_dice_scheme_and_which_seats_signed(page, base_url: str) -> None:  # noqa: F811
    # Given bundles of rooms where nobody signs, only ann signs, and both sign (tests/signed_rooms.signing_room), and
    # the golden realm game from before dice schemes
    def built() -> dict[str, dict]:
        async def all_of_them():
            return {name: (await signing_room(**signs))[1] for name, signs in (
                ("nobody signs", {}), ("ann signs", {"ann_signs": True}),
                ("both sign", {"ann_signs": True, "bob_signs": True}))}
        return asyncio.run(all_of_them())

    with ThreadPoolExecutor(1) as pool:  # (in a thread: Playwright's sync API keeps an event loop running here)
        bundles = pool.submit(built).result()
    golden = ExportFileStore.open(GOLDEN_REALM)
    with ThreadPoolExecutor(1) as pool:
        bundles["before schemes"] = json.loads(json.dumps(pool.submit(
            asyncio.run, dispute_bundle(golden, "golden-realm-v1", 0, versions=(1, 3))).result()))
    page.goto("/")

    # When each is checked by the Python verifier and by the console's
    seen = {}
    for name, bundle in bundles.items():
        python = verify_bundle(bundle, bundle["head"]["hash"])
        js = page.evaluate(JS_SEATS, [bundle])
        seen[name] = (msgspec.to_builtins(python.seats), js[1], seats_line(python.seats), js[2], python.status)

    # Then both state the same scheme, the same seats signing and not, and the same caveats in the same words
    for name, (python, js, python_line, js_line, _) in seen.items():
        assert python == js and python_line == js_line, f"{name}: python {python}, javascript {js}"
    assert {name: (s["dice_scheme"], s["signing_players"], s["unsigned_players"], len(s["notes"]))
            for name, (s, *_) in seen.items()} == {
        "nobody signs": (3, [], ["ann", "bob"], 1), "ann signs": (3, ["ann"], ["bob"], 1),
        "both sign": (3, ["ann", "bob"], [], 0),
        "before schemes": (1, [], seen["before schemes"][0]["unsigned_players"], 2)}
    assert seen["nobody signs"][0]["notes"] == ["players who do not sign (ann, bob): the operator could have acted "
                                                "for them with a token it minted"]
    assert all(status == "VERIFIED" for name, (*_, status) in seen.items() if name != "before schemes")


def test_a_seated_player_fetches_and_checks_their_own_bundle_in_the_console(page, base_url: str,  # noqa: F811
                                                                             shots: Path) -> None:  # noqa: F811
    # Given alice's realm room where she traded with bob, her seat in this browser
    room, _, tokens = realm_trade_played(base_url)
    alice, token = next(iter(tokens.items()))
    page.goto("/")
    page.evaluate("([room, player, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player, token}))",
                  [room, alice, token])
    # When she opens the room (each answer's checkpoint is kept) and asks for her bundle
    page.goto(f"/#/room/{room}")
    page.wait_for_function("(room) => JSON.parse(localStorage.getItem(`almanac-checkpoints:${room}`) || '[]').length > 0",
                           arg=room)
    panel = page.get_by_role("region", name="Player bundle")
    panel.get_by_role("button", name="Fetch and check my bundle").click()
    verdict = panel.get_by_test_id("player-bundle-verdict")
    verdict.wait_for()
    panel.screenshot(path=str(shots / "player-bundle.png"))
    # Then it is checked in this browser against her checkpoints: the history verified, and the limits said
    assert verdict.inner_text().startswith("VERIFIED"), verdict.inner_text()
    assert "[passed] checkpoints" in verdict.inner_text()
    assert "NOT PROVABLE" in panel.get_by_test_id("player-bundle-limits").inner_text()
    # and each version says what it opens to her: her trade steps as her view, bob's only as hashes
    table = panel.get_by_test_id("player-bundle-events").inner_text()
    assert "your view" in table and "whole event" in table


HELD = "(room) => JSON.parse(localStorage.getItem(`almanac-checkpoints:${room}`) || '[]')"


def test_the_console_checks_each_answers_checkpoint_and_warns_of_a_forgery_or_a_second_signed_head(
        page, base_url: str, auditor: str, shots: Path, stack) -> None:  # noqa: F811 - the fixtures above
    # Given tess's board room, her seat in this browser, and the operator, who holds the deployment's signing key
    room, token = board_room_played(base_url, auditor, "tess", 2)
    deployment = key_ring(SimpleNamespace(signing_keys="", retired_public_keys="", data_dir=str(stack.data_dir)))
    page.goto("/")
    page.evaluate("([room, token]) => sessionStorage.setItem(`almanac.seat.${room}`, JSON.stringify({player: 'tess', token}))",
                  [room, token])

    # When she opens the room: each answer's checkpoint is checked against the key set pinned at first contact
    page.goto(f"/#/room/{room}")
    page.wait_for_function(f"(room) => ({HELD})(room).length > 0", arg=room)
    pinned = page.evaluate("() => JSON.parse(localStorage.getItem(`almanac-keys-pinned:${location.host}`))")
    assert pinned == deployment.document
    warning = page.get_by_test_id("checkpoint-warning")
    assert warning.count() == 0
    last = page.evaluate(HELD, room)[-1]

    def answering(checkpoint: dict):
        """The room's answer as the gateway gives it, its checkpoint swapped for ``checkpoint``."""
        def handle(route) -> None:
            answer = route.fetch()
            route.fulfill(response=answer, json={**answer.json(), "checkpoint": checkpoint})
        return handle

    # When an answer carries a checkpoint whose signature does not verify (its head moved, the signature kept)
    page.route(f"**/rooms/{room}", answering({**last, "head": "cd" * 32}))
    page.reload()
    # Then a warning says so and the checkpoint is not kept
    warning.get_by_text("does not verify under the key set pinned").wait_for()
    assert all(c["head"] != "cd" * 32 for c in page.evaluate(HELD, room))

    # When an answer carries a second head for the same version, validly signed by the deployment's own key
    second = deployment.sign(room, last["version"], bytes.fromhex("ab" * 32))
    page.unroute_all(behavior="wait")  # a handler still fulfilling a request of the last page must not race the next
    page.route(f"**/rooms/{room}", answering(second))
    page.reload()
    # Then the warning names the equivocation, both heads and the key, and both checkpoints are kept as the proof
    said = f"equivocation: the deployment signed two heads for version {last['version']}: {last['head']} and {'ab' * 32}"
    warning.get_by_text(said).wait_for()
    assert deployment.document["active"] in warning.inner_text()
    heads = {c["head"] for c in page.evaluate(HELD, room) if c["version"] == last["version"]}
    assert heads == {last["head"], "ab" * 32}
    page.screenshot(path=str(shots / "checkpoint-equivocation.png"), full_page=True)

    # When she dismisses the warning and the deployment rotates: a new active key, the old one kept as retired
    page.unroute_all(behavior="wait")  # a handler still fulfilling a request of the last page must not race the next
    warning.get_by_role("button", name="Dismiss").click()
    old_public = bytes.fromhex(deployment.document["keys"][0]["public_key"])
    rotated = KeyRing([stranger_ring().keys[0].private_bytes_raw()], retired_public=[old_public]).document
    page.route("**/.well-known/almanac-keys.json", lambda route: route.fulfill(json=rotated))
    page.reload()
    # Then the added key is pinned beside the first, with no warning
    page.wait_for_function("(n) => (JSON.parse(localStorage.getItem(`almanac-keys-pinned:${location.host}`)) || {keys: []})"
                           ".keys.length === n", arg=2)
    assert warning.count() == 0

    # When the published key set later drops the pinned key (a rotation only adds keys, keeping old ones as retired)
    page.unroute_all(behavior="wait")
    page.route("**/.well-known/almanac-keys.json", lambda route: route.fulfill(json=stranger_ring().document))
    page.reload()
    # Then that is flagged too, and the pinned key still checks her checkpoints
    warning.get_by_text(f"no longer lists key(s) {deployment.document['active']}").wait_for()
    page.screenshot(path=str(shots / "checkpoint-key-dropped.png"), full_page=True)
