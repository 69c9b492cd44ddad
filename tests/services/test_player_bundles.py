"""Player-safe bundles (scheme almanac-commit-v2): a player checks a live room's history against their own signed
checkpoints without learning anything hidden from them, and the operator's edits and split views are caught."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from almanac.events import codec, commitments as cm
from almanac.events.forensics.player_check import compare_player_bundles, player_heads, verify_player_bundle
from almanac.events.hashing import canonical_bytes
from almanac.services.checkpoints import Checkpointer
from almanac.services.cli import _load_commands, app
from almanac.services.settings import load_settings
from almanac.storage.redis_store import RedisEventStore

REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"
ROOM = "golden-realm-v1"

_load_commands()
runner = CliRunner()


@pytest.fixture
async def room(redis_client, redis_url, tmp_path) -> dict:
    """Given the golden realm game (alice and bob trade) in a real Redis, recorded as a room created on scheme v2,
    each player's bundle and checkpoints as the deployment issues them, and the published key set."""
    # (the deployment's data directory exists: the CLI keeps its secrets there, and refuses to mint them where none is)
    (tmp_path / "data").mkdir()
    env = {"REDIS_URL": redis_url, "ALMANAC_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}

    def run(*args: str) -> str:
        result = runner.invoke(app, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    await asyncio.to_thread(run, "import", str(REALM))
    store = RedisEventStore(redis_client)
    assert await store.save_commit_scheme(ROOM, cm.SCHEME_V2)  # as the engine records it when a room is created
    held = {"env": env, "path": tmp_path, "store": store, "keys": json.loads(await asyncio.to_thread(run, "keys")),
            "envelopes": await store.read(ROOM, 1, None)}
    for player in ("alice", "bob"):
        held[player] = json.loads(await asyncio.to_thread(run, "player-bundle", ROOM, "--player", player))
        held[f"{player}_checkpoints"] = json.loads(await asyncio.to_thread(run, "checkpoints", ROOM, "--player",
                                                                           player))["checkpoints"]
    held["checkpointer"] = Checkpointer.from_settings(load_settings(env))  # the operator's own secrets
    return held


def verdict(bundle: dict, held: dict, player: str = "alice", checkpoints: list | None = None):
    mine = held[f"{player}_checkpoints"] if checkpoints is None else checkpoints
    return verify_player_bundle(bundle, mine, held["keys"])


def opened_view(bundle: dict, version: int, label: str) -> list:
    return msgspec.msgpack.decode(base64.b64decode(bundle["events"][version - 1]["opened"][label]["view"]))


def first_trade_step(held: dict) -> int:
    """A version where alice and bob each see holdings of their own the other may not see."""
    for envelope in held["envelopes"]:
        views = cm.views(envelope)
        if {"alice", "bob"} <= set(views) and views["alice"] != views["bob"]:
            return envelope.version
    raise AssertionError("the golden game has a trade step")


def resign(held: dict, bundle: dict, version: int, label: str, view: bytes) -> dict:
    """The operator (who holds the room key and the signing key) opens ``label`` at ``version`` as ``view`` and signs
    the new head: a forgery as good as the operator can make it."""
    forged = json.loads(json.dumps(bundle))
    forged["events"][version - 1]["opened"][label]["view"] = base64.b64encode(view).decode()
    forged["checkpoint"] = held["checkpointer"].ring.sign(ROOM, len(forged["events"]), player_heads(forged)[-1])
    return forged


def test_alices_bundle_verifies_against_her_checkpoints_and_says_what_it_cannot_prove(room) -> None:
    # When alice verifies her bundle with the checkpoints her answers carried and the published key set
    result = verdict(room["alice"], room)
    # Then it is VERIFIED, every step ran, and the verdict says it re-decided nothing
    assert result.status == "VERIFIED", result.text()
    assert [s.name for s in result.steps] == ["format", "views", "checkpoints", "anchor", "redaction"]
    assert "NOT PROVABLE" in result.text() and "cannot be re-decided" in result.text()
    # Without a key set from outside, or without her own checkpoints, it is INCOMPLETE and names what did not run
    assert verify_player_bundle(room["alice"], room["alice_checkpoints"], None).unchecked == ["checkpoints", "anchor"]
    assert verify_player_bundle(room["alice"], [], room["keys"]).unchecked == ["anchor"]
    # And her bundle's first line says whose it is
    text = (room["path"] / "alice.json")
    text.write_text(json.dumps(room["alice"]))
    assert json.loads(text.read_text())["audience"]["player"] == "alice"


def test_a_bundle_opens_exactly_what_its_player_receives_during_play(room) -> None:
    from almanac.events.shown import shown_to

    # Every view opened to alice is exactly what the gateway sends her (or the public) for that event (one function,
    # events.shown, makes both: this is the check that it stays so); the whole event and bob's views are never
    # opened, only hashed
    for envelope, entry in zip(room["envelopes"], room["alice"]["events"], strict=True):
        assert set(entry["opened"]) <= {cm.PUBLIC, "alice"} and cm.FULL in entry["leaves"]
        for label, opening in entry["opened"].items():
            shown = msgspec.msgpack.decode(base64.b64decode(opening["view"]))
            sent = shown_to(envelope, label)
            if sent.get("hidden"):
                assert shown == [ROOM, envelope.version]
            else:
                assert shown[2:] == [envelope.ruleset, sent["type"], sent["player"], sent["server_time_ms"],
                                     json.loads(json.dumps(sent["event"]))]
    assert any("alice" in e["opened"] for e in room["alice"]["events"])  # her own trade steps, opened


def _hidden_number(mine: object, theirs: object, path: tuple = ()) -> tuple | None:
    """A path to an integer bob sees and alice's view hides."""
    if theirs == {"hidden": True} and isinstance(mine, int) and not isinstance(mine, bool):
        return path
    if theirs == {"hidden": True} and isinstance(mine, dict):
        theirs = {key: {"hidden": True} for key in mine}
    if isinstance(mine, dict) and isinstance(theirs, dict):
        return next((p for k in mine if k in theirs and (p := _hidden_number(mine[k], theirs[k], (*path, k)))), None)
    return None


def _with(value: object, path: tuple, new: int) -> object:
    if not path:
        return new
    return {**value, path[0]: _with(value[path[0]], path[1:], new)}  # type: ignore[index]


def test_a_rival_holding_alices_bundle_cannot_confirm_a_guess_of_bobs_hidden_amount(room) -> None:
    # Given a trade step where bob's view shows a number of his own that alice's view hides
    version = first_trade_step(room)
    envelope = room["envelopes"][version - 1]
    bobs = msgspec.msgpack.decode(cm.views(envelope)["bob"])
    path = _hidden_number(bobs[6], opened_view(room["alice"], version, "alice")[6])
    assert path is not None, "the golden trade hides one of bob's numbers from alice"
    truth = bobs[6]
    for part in path:
        truth = truth[part]
    entry = room["alice"]["events"][version - 1]
    salts = [bytes.fromhex(o["salt"]) for e in room["alice"]["events"] for o in e["opened"].values()]

    def confirms(guess: int, salt_candidates: list[bytes]) -> bool:
        """Everything a rival with alice's bundle can try: bob's view with the guess, under every salt they hold."""
        view = canonical_bytes([*bobs[:6], _with(bobs[6], path, guess)])
        return any(cm.leaf("bob", salt, view).hex() == entry["leaves"]["bob"] for salt in salt_candidates)

    # When they try every guess around the truth (the truth included) with every salt the bundle opens
    guesses = range(max(truth - 20, 0), truth + 21)
    # Then no guess is confirmed, not even the true one
    assert not any(confirms(guess, [*salts, bytes(32)]) for guess in guesses)
    # (the test can fail: with bob's salt, which only the operator and bob's bundle hold, the truth is confirmed)
    bob_salt = bytes.fromhex(room["bob"]["events"][version - 1]["opened"]["bob"]["salt"])
    assert [g for g in guesses if confirms(g, [bob_salt])] == [truth]
    # and nothing of bob's view is in alice's bundle in the clear
    assert "bob" not in entry["opened"] and len(entry["leaves"]["bob"]) == 64


def test_an_operator_who_edits_a_hidden_part_after_signing_is_caught_by_alices_checkpoints(room) -> None:
    # Given alice's checkpoints, signed during play; the operator then changes a value hidden from alice (bob's own
    # holdings) and issues her a bundle from the edited history, every leaf and the head recomputed and re-signed
    version = first_trade_step(room)
    envelope = room["envelopes"][version - 1]
    event = codec.to_builtins(codec.decode_event(envelope))
    side = next(name for name in ("host_after", "home_after") if isinstance(event.get(name), dict)
                and cm.views(envelope).get("bob") and name in json.dumps(msgspec.msgpack.decode(cm.views(envelope)["bob"])))
    first = next(k for k, v in event[side].items() if isinstance(v, int))
    event[side][first] += 1000
    edited = msgspec.structs.replace(envelope, payload=codec.encode(event))
    key = room["checkpointer"].room_key(ROOM)
    forged = json.loads(json.dumps(room["alice"]))
    leaves = cm.leaves_of(key, edited)
    assert leaves[cm.FULL].hex() != forged["events"][version - 1]["leaves"][cm.FULL]  # the edit is not visible to her
    forged["events"][version - 1]["leaves"] = {k: v.hex() for k, v in sorted(leaves.items())
                                               if k not in forged["events"][version - 1]["opened"]}
    forged["checkpoint"] = room["checkpointer"].ring.sign(ROOM, len(forged["events"]), player_heads(forged)[-1])
    # Then her bundle alone looks fine (the server re-signed it), but her own checkpoints catch the edit: the one she
    # holds of the head's version, beside the re-signed head, is the deployment's equivocation
    assert verify_player_bundle(forged, [], room["keys"]).failed is None
    result = verdict(forged, room)
    assert result.status == "NOT VERIFIED" and result.failed.name == "checkpoints", result.text()
    assert result.failed.detail.startswith(f"equivocation: the deployment signed two heads for version "
                                           f"{len(forged['events'])}: "), result.failed.detail
    # and those before the head name hers: the history does not pass through it
    earlier = [c for c in room["alice_checkpoints"] if c["version"] < len(forged["events"])]
    result = verdict(forged, room, checkpoints=earlier)
    assert result.status == "NOT VERIFIED" and result.failed.name == "checkpoints", result.text()
    assert "does not pass through it" in result.failed.detail and f"{ROOM}@" in result.failed.detail


def test_an_operator_who_shows_alice_another_public_part_than_bob_saw_is_caught_when_the_bundles_are_compared(room):
    # Given the operator showed alice a different public part of a trade step than bob saw, and signed her
    # checkpoints on that history all along (equivocation: each alone verifies)
    version = first_trade_step(room)
    public = opened_view(room["alice"], version, cm.PUBLIC)
    changed = json.loads(json.dumps(public))
    changed[5] += 1  # the time the step happened, a public fact
    forged = resign(room, room["alice"], version, cm.PUBLIC, canonical_bytes(changed))
    alices_own = verify_player_bundle(forged, [forged["checkpoint"]], room["keys"])
    # (her own view still names the true time, so the redaction step already notices the public part lies)
    assert alices_own.failed is not None and alices_own.failed.name == "redaction"
    # Then comparing with bob's honest bundle names the version where the public parts differ and the histories split
    found = compare_player_bundles(forged, room["bob"])
    assert any(f"version {version}: the public part" in line for line in found), found
    assert any(f"version {version}: the signed histories diverge" in line for line in found), found
    assert compare_player_bundles(room["alice"], room["bob"]) == []  # honest bundles agree


def test_a_public_part_that_shows_a_value_other_than_alices_view_fails_the_redaction_step(room) -> None:
    # Given the operator re-signs alice's bundle with a public part at a version where she has her own view,
    # giving a field another value than hers (a public part is only ever her view with fields hidden)
    version = first_trade_step(room)
    mine, public = opened_view(room["alice"], version, "alice"), opened_view(room["alice"], version, cm.PUBLIC)
    field = next(k for k, v in public[6].items() if v == mine[6][k] and isinstance(v, str) and k != "type")
    public[6][field] = public[6][field] + "-forged"
    forged = resign(room, room["alice"], version, cm.PUBLIC, canonical_bytes(public))
    result = verify_player_bundle(forged, [], room["keys"])
    assert result.failed is not None and result.failed.name == "redaction" and f".{field}" in result.failed.detail


@pytest.mark.parametrize("damage", ["opens_whole_event", "opens_bobs_view", "hides_her_view", "missing_version",
                                    "bad_hex", "trailing_bytes", "other_room", "not_a_bundle"])
def test_a_damaged_or_greedy_bundle_is_a_failed_step_never_an_exception(room, damage: str) -> None:
    bundle = json.loads(json.dumps(room["alice"]))
    version = first_trade_step(room)
    entry = bundle["events"][version - 1]
    if damage == "opens_whole_event":
        entry["opened"][cm.FULL] = entry["opened"][cm.PUBLIC]
        del entry["leaves"][cm.FULL]
    elif damage == "opens_bobs_view":
        entry["opened"]["bob"] = room["bob"]["events"][version - 1]["opened"]["bob"]
        del entry["leaves"]["bob"]
    elif damage == "hides_her_view":
        entry["leaves"]["alice"] = "00" * 32
        del entry["opened"]["alice"]
    elif damage == "missing_version":
        del bundle["events"][3]
    elif damage == "bad_hex":
        entry["leaves"][cm.FULL] = "ZZ" * 32
    elif damage == "trailing_bytes":
        view = canonical_bytes(opened_view(room["alice"], version, cm.PUBLIC))
        entry["opened"][cm.PUBLIC]["view"] = base64.b64encode(view + b"\x00").decode()
    elif damage == "other_room":
        bundle["room"] = "another-room"
    else:
        bundle = ["not", "a", "bundle"]
    result = verify_player_bundle(bundle, room["alice_checkpoints"], room["keys"])
    assert result.status == "NOT VERIFIED" and result.failed is not None, result.text()


async def test_a_room_on_the_old_scheme_gets_no_player_bundle_and_keeps_its_v1_checkpoints(room, redis_client) -> None:
    from almanac.services.forensics.errors import ForensicsError
    from almanac.services.forensics.player_bundle import player_bundle

    store, checkpointer = room["store"], room["checkpointer"]
    # Given a room with no recorded scheme (created before v2): a copy of the golden room under another id
    await asyncio.to_thread(lambda: runner.invoke(app, ["import", str(REALM), "--as", "old-room"], env=room["env"]))
    assert await store.load_commit_scheme("old-room") is None
    assert await checkpointer.scheme(store, "old-room") == cm.SCHEME
    with pytest.raises(ForensicsError) as refused:
        await player_bundle(store, checkpointer, "old-room", "alice", 0)
    assert refused.value.code == "scheme_v1"
    # and its checkpoints are still the v1 heads (checkpoints issued before v2 stay valid)
    envelopes = await store.read("old-room", 1, None)
    signed = await checkpointer.checkpoint(store, "old-room", len(envelopes))
    assert signed["head"] == cm.heads(checkpointer.room_key("old-room"), envelopes)[-1].hex()
    # while the v2 room's differ from what v1 would give
    v2 = await checkpointer.checkpoint(store, ROOM, len(room["envelopes"]))
    assert v2["head"] != cm.heads(checkpointer.room_key(ROOM), room["envelopes"])[-1].hex()
    assert v2["head"] == cm.heads(checkpointer.room_key(ROOM), room["envelopes"], cm.SCHEME_V2)[-1].hex()


def test_the_cli_verifies_a_player_bundle_and_compares_two(room) -> None:
    files = {}
    for name in ("alice", "bob"):
        files[name] = room["path"] / f"{name}.json"
        files[name].write_text(json.dumps(room[name]))
        (room["path"] / f"{name}-checkpoints.json").write_text(json.dumps(
            {"format": "almanac-checkpoints", "format_version": 1, "checkpoints": room[f"{name}_checkpoints"]}))
    (room["path"] / "keys.json").write_text(json.dumps(room["keys"]))
    args = ["verify-player-bundle", str(files["alice"]), "--checkpoints", str(room["path"] / "alice-checkpoints.json"),
            "--keys", str(room["path"] / "keys.json"), "--compare", str(files["bob"])]
    result = runner.invoke(app, args, env=room["env"])
    assert result.exit_code == 0 and "VERIFIED" in result.stdout and "NOT PROVABLE" in result.stdout, result.output
    without_keys = runner.invoke(app, ["verify-player-bundle", str(files["alice"])], env=room["env"])
    assert without_keys.exit_code == 3 and "INCOMPLETE" in without_keys.stdout, without_keys.output


_json = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**64) | st.text(max_size=70),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_hostile_change_to_a_player_bundle_is_a_verdict_never_an_exception(room, data) -> None:
    # Given alice's bundle with one part anywhere in it replaced by any JSON value
    bundle = json.loads(json.dumps(room["alice"]))
    holder, key = None, None
    node = bundle
    for _ in range(data.draw(st.integers(1, 5))):
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        holder, key = node, data.draw(st.sampled_from(keys))
        node = node[key]
    if holder is not None:
        holder[key] = data.draw(_json)
    # When alice verifies it, Then it is a verdict (the honest bundle's only when nothing changed), never an exception
    result = verify_player_bundle(bundle, room["alice_checkpoints"], room["keys"])
    assert result.status in ("VERIFIED", "INCOMPLETE", "NOT VERIFIED")
    changed = {part for part in set(bundle) | set(room["alice"]) if bundle.get(part) != room["alice"].get(part)}
    if result.status == "VERIFIED":  # only the parts no step reads may change: the key set is a convenience
        assert changed <= {"keys", "exported_at_ms"}, changed


def test_the_v2_bytes_are_those_docs_bundle_format_section_6_describes(room) -> None:
    import hashlib
    import hmac

    # Recomputed from the document alone (section 6.3), for a trade step with four audiences
    version = first_trade_step(room)
    envelope = room["envelopes"][version - 1]
    key = room["checkpointer"].room_key(ROOM)

    def lbl(label: str) -> bytes:
        return len(label.encode()).to_bytes(2, "big") + label.encode()

    views = cm.views(envelope)
    assert views[cm.FULL] == cm.event_body(envelope) and set(views) >= {"", "*", "alice", "bob"}
    leaves = {}
    for label, view in views.items():
        salt = hmac.new(key, b"almanac/salt/v2\0" + version.to_bytes(8, "big") + label.encode(), hashlib.sha256).digest()
        leaves[label] = hashlib.sha256(b"almanac/leaf/v2\0" + lbl(label) + salt + view).digest()
    ordered = sorted(leaves, key=str.encode)
    assert ordered[:2] == ["", "*"]
    c_v = hashlib.sha256(b"almanac/event/v2\0" + len(ordered).to_bytes(2, "big")
                         + b"".join(lbl(a) + leaves[a] for a in ordered)).digest()
    assert c_v == cm.event_commitment(key, envelope, cm.SCHEME_V2)
    heads = cm.heads(key, room["envelopes"][:version], cm.SCHEME_V2)
    assert heads[-1] == hashlib.sha256(b"almanac/head/v2\0" + (heads[-2] if version > 1 else bytes(32)) + c_v).digest()
    # and the public view is the canonical msgpack of [room, version, ruleset, type, player, time, redacted event]
    public = msgspec.msgpack.decode(views[cm.PUBLIC])
    assert public[:6] == [ROOM, version, envelope.ruleset, envelope.type, envelope.player, envelope.server_time_ms]
