"""Signed checkpoints: a stranger holding one player's checkpoints rejects every history that contradicts them."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from bundle_forgery import chain_of, copy, dropped, edited, stranger_ring, swapped, truncated
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from typer.testing import CliRunner

from almanac.events import codec, commitments as cm
from almanac.events.forensics import checkpoint_check
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.hashing import canonical_bytes, envelope_hash
from almanac.services.checkpoints import KeyRing, key_ring
from almanac.services.cli import _load_commands, app

REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"
ROOM = "golden-realm-v1"

_load_commands()
runner = CliRunner()


def invoke(env: dict, *args: str):
    return runner.invoke(app, list(args), env={**env, "COLUMNS": "200"})


@pytest.fixture
async def held(redis_client, redis_url, tmp_path) -> dict:
    """Given the golden realm game in a real Redis, alice's checkpoints (what her answers carried), the
    deployment's key set, and an auditor's bundle of trade-24."""
    # (the deployment's data directory exists: the CLI keeps its secrets there, and refuses to mint them where none is)
    (tmp_path / "data").mkdir()
    env = {"REDIS_URL": redis_url, "ALMANAC_DATA_DIR": str(tmp_path / "data")}

    def run(*args: str) -> str:
        result = invoke(env, *args)
        assert result.exit_code == 0, result.output
        return result.stdout

    await asyncio.to_thread(run, "import", str(REALM))
    bundle = json.loads(await asyncio.to_thread(run, "dispute", ROOM, "--trade", "trade-24"))
    alice = json.loads(await asyncio.to_thread(run, "checkpoints", ROOM, "--player", "alice"))
    keys = json.loads(await asyncio.to_thread(run, "keys"))
    return {"bundle": bundle, "alice": alice, "keys": keys, "env": env, "path": tmp_path}


def verdict_of(bundle: dict, held: dict, checkpoints: list | None = None, keys: dict | None = None):
    return verify_bundle(bundle, None, checkpoints=held["alice"]["checkpoints"] if checkpoints is None else checkpoints,
                         keys=held["keys"] if keys is None else keys)


def failed(verdict) -> tuple[str, str]:
    assert not verdict.ok, verdict.text()
    return verdict.failed.name, verdict.failed.detail


async def test_the_honest_bundle_passes_through_every_checkpoint_alice_holds(held) -> None:
    alice = held["alice"]["checkpoints"]
    assert len(alice) > 3 and held["alice"]["keys"] == held["keys"]
    verdict = verdict_of(held["bundle"], held)
    assert verdict.ok, verdict.text()
    step = next(s for s in verdict.steps if s.name == "checkpoints")
    assert step.status == "passed" and f"{len(alice)} checkpoint(s)" in step.detail
    # The CLI reads the checkpoint file (its key set included) and says the same.
    bundle_file, checkpoints_file = held["path"] / "bundle.json", held["path"] / "alice.json"
    bundle_file.write_text(json.dumps(held["bundle"]))
    checkpoints_file.write_text(json.dumps(held["alice"]))
    result = await asyncio.to_thread(invoke, {}, "verify-bundle", str(bundle_file), "--checkpoints", str(checkpoints_file))
    assert result.exit_code == 0 and "[passed] checkpoints" in result.stdout, result.output


async def test_an_edited_earlier_event_fails_at_alices_checkpoint_even_resealed_by_the_operator(held) -> None:
    # Given an operator who rewrites bob's stone at version 5 and re-seals both chains with the real room key
    def poorer(event: dict) -> None:
        event["stone"] = -6000 if "stone" in event else event.setdefault("note", "forged")

    forged = edited(held["bundle"], 5, poorer)
    name, detail = failed(verdict_of(forged, held))
    assert name == "checkpoints" and "does not pass through" in detail
    assert f"{ROOM}@" in detail  # the failure names the checkpoint: room@version kid


async def test_an_invented_room_fails_at_the_first_checkpoint(held) -> None:
    # Given a whole room invented under the same id: its first event's seed commitment is the forger's own
    def own_seed(event: dict) -> None:
        event["seed_commitment"] = hashlib.sha256(b"the forger's seed").hexdigest()

    name, detail = failed(verdict_of(edited(held["bundle"], 1, own_seed), held))
    assert name == "checkpoints" and "does not pass through" in detail


async def test_another_head_signed_with_the_deployments_own_key_fails_only_at_the_checkpoint_alice_holds(held) -> None:
    # Given the operator, who holds the deployment's signing key: it edits an early event, re-seals both chains and
    # signs the forged head itself, so the bundle carries a valid signature of the deployment on a history alice never saw
    ring = key_ring(SimpleNamespace(signing_keys="", retired_public_keys="", data_dir=str(held["path"] / "data")))
    assert ring.document == held["keys"]
    forged = edited(held["bundle"], 5, lambda e: e.setdefault("note", "forged"))
    heads = cm.heads(bytes.fromhex(forged["commitments"]["room_key"]), chain_of(forged))
    forged["checkpoint"] = ring.sign(ROOM, len(heads), heads[-1])

    # When it is checked with the deployment's key set alone: nothing notices two signed heads for one version, and
    # the verdict is never VERIFIED: the bundle's own signature is the operator's word, so nothing anchors the head
    alone = verify_bundle(forged, None, checkpoints=[], keys=held["keys"])
    assert next(s for s in alone.steps if s.name == "checkpoints").status == "passed", alone.text()
    assert next(s for s in alone.steps if s.name == "anchor").status == "skipped", alone.text()

    # Then with alice's checkpoints it fails. She holds one of the head's version too: beside the bundle's own
    # signature that is two heads signed for one version, named as the deployment's equivocation
    name, detail = failed(verdict_of(forged, held))
    assert any(c["version"] == len(heads) for c in held["alice"]["checkpoints"])
    assert name == "checkpoints" and detail.startswith(f"equivocation: the deployment signed two heads for version "
                                                       f"{len(heads)}: "), detail
    # and with only her checkpoints before it, naming hers: the history does not pass through it
    earlier = [c for c in held["alice"]["checkpoints"] if c["version"] < len(heads)]
    name, detail = failed(verdict_of(forged, held, earlier))
    assert name == "checkpoints" and "does not pass through" in detail and f"{ROOM}@" in detail


async def test_two_heads_the_deployment_signed_for_one_version_are_named_as_its_equivocation(held) -> None:
    # Given the operator, who holds the deployment's signing key: it showed alice one history and, for a version she
    # holds a checkpoint of, signs the head of another (an early event edited, both chains re-sealed)
    ring = key_ring(SimpleNamespace(signing_keys="", retired_public_keys="", data_dir=str(held["path"] / "data")))
    assert ring.document == held["keys"]
    forged = edited(held["bundle"], 5, lambda e: e.setdefault("note", "forged"))
    heads = cm.heads(bytes.fromhex(forged["commitments"]["room_key"]), chain_of(forged))
    alices = held["alice"]["checkpoints"][-1]
    other = ring.sign(ROOM, alices["version"], heads[alices["version"] - 1])
    assert other["head"] != alices["head"] and other["kid"] == alices["kid"]
    kid = held["keys"]["active"]
    said = (f"equivocation: the deployment signed two heads for version {alices['version']}: {alices['head']} and "
            f"{other['head']}, key {kid}")

    # When a stranger checks the two signed checkpoints, with the honest bundle or with the forged one
    # Then the verdict fails at the checkpoints naming the equivocation: both heads, the version and the key. The two
    # signatures prove it alone, so the bundle's chain does not change the verdict (not "does not pass through")
    for bundle in (held["bundle"], forged):
        name, detail = failed(verdict_of(bundle, held, [alices, other]))
        assert name == "checkpoints" and detail.startswith(said), detail
    assert checkpoint_check.equivocation([alices, other], cm.trusted_keys(held["keys"])) == (alices, other)
    # while alice's own checkpoints, all on one history, hold none, and a forged second signature proves nothing
    assert checkpoint_check.equivocation(held["alice"]["checkpoints"], cm.trusted_keys(held["keys"])) is None
    unsigned = {**other, "sig": alices["sig"]}
    assert "signature is not valid" in failed(verdict_of(held["bundle"], held, [alices, unsigned]))[1]

    # And the CLI says so from alice's checkpoint file and a file holding the second checkpoint
    bundle_file, alice_file, other_file = (held["path"] / name for name in ("b.json", "alice.json", "other.json"))
    bundle_file.write_text(json.dumps(held["bundle"]))
    alice_file.write_text(json.dumps(held["alice"]))
    other_file.write_text(json.dumps([other]))
    result = await asyncio.to_thread(invoke, {}, "verify-bundle", str(bundle_file), "--checkpoints", str(alice_file),
                                     "--checkpoints", str(other_file))
    assert result.exit_code != 0 and "equivocation: the deployment signed two heads" in result.stdout, result.output


@pytest.mark.parametrize("forge", [lambda b: dropped(b, 10), lambda b: swapped(b, 30, 31)], ids=["dropped", "swapped"])
async def test_a_dropped_or_swapped_event_fails_at_a_checkpoint(held, forge) -> None:
    name, detail = failed(verdict_of(forge(held["bundle"]), held))
    assert name == "checkpoints", detail


async def test_a_truncated_history_fails_at_the_checkpoint_past_its_end(held) -> None:
    name, detail = failed(verdict_of(truncated(held["bundle"], 40), held))
    assert name == "checkpoints" and ("ends at version 40" in detail or "does not pass through" in detail), detail


async def test_a_forged_signature_and_a_checkpoint_from_another_key_are_refused(held) -> None:
    forged = edited(held["bundle"], 5, lambda e: e.setdefault("note", "forged"))
    heads = cm.heads(bytes.fromhex(forged["commitments"]["room_key"]), chain_of(forged))
    genuine = held["alice"]["checkpoints"][-1]
    # The forger moves alice's last checkpoint onto the forged head, keeping the signature
    moved = {**genuine, "head": heads[genuine["version"] - 1].hex()}
    name, detail = failed(verdict_of(forged, held, [moved]))
    assert name == "checkpoints" and "signature is not valid" in detail
    # or flips one bit of an honest signature
    flipped = {**genuine, "sig": genuine["sig"][:-1] + ("0" if genuine["sig"][-1] != "0" else "1")}
    assert "signature is not valid" in failed(verdict_of(held["bundle"], held, [flipped]))[1]
    # or signs the forged head with a key of its own, publishing it in the bundle: the stranger's key set wins
    ring = stranger_ring()
    own = ring.sign(ROOM, genuine["version"], heads[genuine["version"] - 1])
    forged["checkpoint"], forged["keys"] = ring.sign(ROOM, len(heads), heads[-1]), ring.document
    name, detail = failed(verdict_of(forged, held, [own]))
    assert name == "checkpoints" and "not in the trusted key set" in detail
    # and a checkpoint of another room is named as such
    other = {**genuine, "room": "another-room"}
    assert "signature is not valid" in failed(verdict_of(held["bundle"], held, [other]))[1]


async def test_a_retired_key_still_verifies_and_rotation_keeps_old_checkpoints(held) -> None:
    from almanac.services.checkpoints import KeyRing

    old_public = bytes.fromhex(held["keys"]["keys"][0]["public_key"])
    fresh = stranger_ring().keys[0].private_bytes_raw()
    rotated = KeyRing([fresh], retired_public=[old_public]).document
    assert rotated["active"] != held["keys"]["active"]
    assert [k["status"] for k in rotated["keys"]] == ["active", "retired"]
    # Every checkpoint the old key signed still verifies under the rotated set, where it is retired...
    verdict = verdict_of(held["bundle"], held, keys=rotated)
    assert verdict.ok, verdict.text()
    # ...and not under a set that dropped it (what publishing a compromised key's removal does).
    dropped_old = KeyRing([fresh]).document
    assert "not in the trusted key set" in failed(verdict_of(held["bundle"], held, keys=dropped_old))[1]


async def test_expect_head_accepts_an_earlier_version_and_its_hash_or_checkpoint_head(held) -> None:
    bundle = held["bundle"]
    chain = chain_of(bundle)
    checkpoint = held["alice"]["checkpoints"][2]
    v = checkpoint["version"]
    # An earlier head is checked and agrees; the versions after it rest on the rules alone, so at best INCOMPLETE
    # (the anchor step names them); the head itself anchors the whole.
    for earlier in (f"{v}:{chain[v - 1].hash}", f"{v}:{checkpoint['head']}"):
        verdict = verify_bundle(bundle, earlier)
        assert verdict.failed is None and verdict.status == "INCOMPLETE" and "anchor" in verdict.unchecked, verdict
    assert verify_bundle(bundle, f"{len(chain)}:{chain[-1].hash}").ok
    wrong = verify_bundle(bundle, f"{v}:{chain[v].hash}")
    assert wrong.failed is not None and wrong.failed.name == "anchor" and wrong.failed.version == v
    forged = edited(bundle, 2, lambda e: e.setdefault("note", "forged"))
    assert verify_bundle(forged, f"{v}:{checkpoint['head']}").failed.name == "anchor"


def test_a_player_cannot_confirm_a_guess_of_a_hidden_value_from_heads() -> None:
    # Given two rooms that differ only in one hidden amount (bob's gold: 100 or 101), with everything else public
    secret = b"\x07" * 32

    def room(gold: int) -> list:
        from almanac.events.envelope import GENESIS_HASH, Envelope
        from almanac.events.hashing import seal

        payloads = [canonical_bytes({"public": 1}), canonical_bytes({"bob_gold": gold}), canonical_bytes({"public": 3})]
        chain, previous = [], GENESIS_HASH
        for version, payload in enumerate(payloads, start=1):
            envelope = seal(Envelope(room="r", version=version, ruleset="realm", type="t", payload=payload,
                                     command_id=f"c{version}", player="bob", server_time_ms=version,
                                     previous_hash=previous))
            previous = envelope.hash
            chain.append(envelope)
        return chain

    a, b = room(100), room(101)
    key = cm.room_key(secret, "r")
    heads_a, heads_b = cm.heads(key, a), cm.heads(key, b)
    assert heads_a[0] == heads_b[0] and heads_a[1] != heads_b[1]

    def confirms(heads: list[bytes], guess: int, shown: dict[int, bytes]) -> bool:
        """Everything alice can try: the heads, every public event's body and salt, the guessed event's body."""
        guessed = msgspec.structs.replace(a[1], payload=canonical_bytes({"bob_gold": guess}))
        body = cm.event_body(guessed)
        for candidate_salt in [*shown.values(), bytes(32), hashlib.sha256(b"r").digest()]:
            if cm.next_head(heads[0], cm.commitment(candidate_salt, body)) == heads[1]:
                return True
        return False

    # Alice sees events 1 and 3 whole (with their salts, as a player-safe bundle shows them) and only heads.
    shown = {1: cm.salt(key, 1), 3: cm.salt(key, 3)}
    for heads in (heads_a, heads_b):
        assert not any(confirms(heads, guess, shown) for guess in range(90, 111))
    # The plain envelope chain would have let her: its hash at version 2 is a function of public bytes and the guess.
    plain = [envelope_hash(msgspec.structs.replace(a[1], payload=canonical_bytes({"bob_gold": g}))) for g in (100, 101)]
    assert plain[0] == a[1].hash and plain[1] == b[1].hash  # the attack that the commitments stop
    # With the salt (the auditor's room key), the guess is checked: the head still proves the full history.
    assert cm.next_head(heads_a[0], cm.commitment(cm.salt(key, 2), cm.event_body(a[1]))) == heads_a[1]
    # Salts are per room: one room's opened key opens no other room.
    assert cm.room_key(secret, "r2") != key and cm.salt(cm.room_key(secret, "r2"), 2) != cm.salt(key, 2)


def test_a_checkpoint_is_signed_as_openssl_signs_it_and_verifies_with_the_published_key() -> None:
    # Given a deployment's key ring (libsodium signs; OpenSSL, through cryptography, made the signatures before)
    seed = hashlib.sha256(b"a deployment's seed").digest()
    ring = KeyRing([seed, hashlib.sha256(b"an older seed").digest()])
    openssl = Ed25519PrivateKey.from_private_bytes(seed)
    published = Ed25519PublicKey.from_public_bytes(bytes.fromhex(ring.document["keys"][0]["public_key"]))
    for version in (1, 2, 2**40):
        head = hashlib.sha256(version.to_bytes(8, "big")).digest()
        # When a checkpoint is signed
        signed = ring.sign("room-é", version, head)
        # Then its signature is byte for byte OpenSSL's, and the key set's active key verifies it
        message = cm.checkpoint_message("room-é", version, head)
        assert signed["sig"] == openssl.sign(message).hex() and signed["kid"] == ring.document["active"]
        published.verify(bytes.fromhex(signed["sig"]), message)


def test_the_format_document_example_bytes_are_what_the_code_hashes() -> None:
    from almanac.events.envelope import Envelope

    envelope = Envelope(room="r", version=1, ruleset="realm", type="t", payload=b"\x01", command_id="c", player="p",
                        server_time_ms=1764800000000, previous_hash="0" * 64)
    assert cm.event_body(envelope).hex() == "98a17201a57265616c6da174c40101a163a170cf0000019ae646f000"
    message = cm.checkpoint_message("r", 1, bytes(32))
    assert message == b"almanac/checkpoint/v1\0" + b"\x00\x01r" + (1).to_bytes(8, "big") + bytes(32)
    assert codec  # the codec decodes the envelopes these bytes come from (chain_of)


async def test_the_player_export_and_the_key_set_are_documents_the_verifier_reads(held) -> None:
    keys = held["keys"]
    assert cm.key_set_problem(keys) is None and keys["keys"][0]["status"] == "active"
    checkpoints, file_keys = cm.read_checkpoint_file(held["alice"])
    assert file_keys == keys and all(cm.checkpoint_problem(c) is None for c in checkpoints)
    assert cm.read_checkpoint_file(copy(checkpoints))[0] == checkpoints  # a bare list reads too
    # The same deployment signs the same way on the next call (keys kept in the data dir), and --new rotates.
    assert json.loads(invoke(held["env"], "keys").stdout) == keys
    fresh = invoke(held["env"], "keys", "--new")
    assert fresh.exit_code == 0 and len(fresh.stdout.strip().splitlines()[-1]) == 64


async def test_a_validly_signed_checkpoint_of_another_room_is_named_as_such(held) -> None:
    # The deployment's own key (read from its data directory, as the operator could) signs another room's head
    from almanac.services.checkpoints import KeyRing

    seed = bytes.fromhex((held["path"] / "data" / "signing-key").read_text().strip())
    other = KeyRing([seed]).sign("another-room", 3, bytes(32))
    name, detail = failed(verdict_of(held["bundle"], held, [other]))
    assert name == "checkpoints" and "is of room 'another-room'" in detail


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=80),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
                     max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_checkpoints_key_sets_and_openings_are_a_failed_step_never_an_exception(held, data) -> None:
    genuine = held["alice"]["checkpoints"][-1]
    field = st.sampled_from(["room", "version", "head", "kid", "sig"])
    checkpoint = data.draw(st.one_of(_JSON, st.builds(lambda f, v: {**genuine, f: v}, field, _JSON)))
    assume(checkpoint != genuine)  # a field replaced by its own value is the honest checkpoint
    keys = data.draw(st.one_of(st.just(held["keys"]), _JSON))
    bundle = copy(held["bundle"])
    if data.draw(st.booleans()):
        bundle["commitments"] = data.draw(st.one_of(_JSON, st.fixed_dictionaries(
            {"scheme": st.just(cm.SCHEME), "room_key": st.text(alphabet="0123456789abcdefg", min_size=64, max_size=64)})))
    verdict = verify_bundle(bundle, None, checkpoints=[checkpoint], keys=keys)
    # (a hostile part of the bundle itself fails its format step, before any checkpoint is read)
    assert verdict.failed is not None and verdict.failed.name in ("format", "checkpoints", "anchor"), verdict.text()


async def test_a_feed_behind_the_kept_heads_signs_from_its_previous_checkpoint_without_rereading_the_room(held) -> None:
    """A spectator delayed past the heads a gateway keeps (or a follower catching up) would hash the room from
    version 1 for every message it sends; from the checkpoint it sent before, it needs only the new event."""
    from almanac.services.checkpoints import RECENT_HEADS, Checkpointer, KeyRing  # noqa: PLC0415
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    chain = chain_of(held["bundle"])
    assert len(chain) > RECENT_HEADS + 2
    signer = Checkpointer(KeyRing([b"\x09" * 32]), b"\x05" * 32)
    empty = MemoryEventStore()  # holds nothing: any version not reached from memory is a LookupError
    room = held["bundle"]["room"]
    # Given a gateway that has seen the whole room (its kept heads: the last RECENT_HEADS versions only)
    honest = await signer.checkpoint(empty, room, len(chain), chain)
    # When a feed RECENT_HEADS + 2 versions behind asks for its next checkpoint, then without its previous one
    # the room must be read again from the store...
    late = len(chain) - RECENT_HEADS - 2
    with pytest.raises(LookupError):
        await signer.checkpoint(empty, room, late + 1, (chain[late],))
    # ...and with it, the next head comes from that one event, equal to the head of the whole chain's fold
    fresh = Checkpointer(signer.ring, b"\x05" * 32)
    previous = await fresh.checkpoint(empty, room, late, chain[:late])
    following = await signer.checkpoint(empty, room, late + 1, (chain[late],), since=previous)
    expected = await Checkpointer(signer.ring, b"\x05" * 32).checkpoint(empty, room, late + 1, chain[:late + 1])
    assert following["head"] == expected["head"] and honest["version"] == len(chain)


async def test_an_answer_about_an_old_version_hashes_from_the_nearest_anchor_not_from_version_1(held) -> None:
    """A page of events or a time-travel answer names an old version, far behind the kept recent heads: the
    gateway starts from the anchor head kept every ANCHOR_EVERY versions, so it hashes at most that many events."""
    from almanac.services.checkpoints import ANCHOR_EVERY, RECENT_HEADS, Checkpointer, KeyRing  # noqa: PLC0415
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    chain = chain_of(held["bundle"])
    assert len(chain) > RECENT_HEADS + ANCHOR_EVERY + 2
    room, empty = held["bundle"]["room"], MemoryEventStore()  # the store holds nothing: memory must suffice
    signer = Checkpointer(KeyRing([b"\x09" * 32]), b"\x05" * 32)
    # Given a gateway that has signed the room's head (it hashed every event once)
    await signer.checkpoint(empty, room, len(chain), chain)
    # When asked for versions older than its recent heads, holding only the events since the anchor below each
    for old in (ANCHOR_EVERY, ANCHOR_EVERY + 1, len(chain) - RECENT_HEADS - 1):
        anchor = old // ANCHOR_EVERY * ANCHOR_EVERY
        assert old < len(chain) - RECENT_HEADS
        answered = await signer.checkpoint(empty, room, old, chain[anchor:old])
        # Then the head is the whole chain's fold up to that version, as a gateway that never saw the room makes it
        expected = await Checkpointer(signer.ring, b"\x05" * 32).checkpoint(empty, room, old, chain[:old])
        assert answered["head"] == expected["head"], old
    # and below the first anchor, with nothing from memory to start at, the room must be read again
    with pytest.raises(LookupError):
        await signer.checkpoint(empty, room, ANCHOR_EVERY - 1, (chain[ANCHOR_EVERY - 2],))


async def test_a_long_head_is_hashed_a_slice_at_a_time_once_with_the_loop_given_back(held, monkeypatch) -> None:
    """The first answer about a long room in a process hashes it from version 1: past HEAD_SLICE versions it reads
    and hashes a slice at a time, giving the loop back every HEAD_PAUSE_EVERY events, and answers asking at once
    wait for the one hashing the room. Its heads are those of the whole chain hashed in one go, byte for byte."""
    from almanac.services import checkpoints  # noqa: PLC0415
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    class CountingStore(MemoryEventStore):
        """A memory store that counts the versions read from it."""

        read_versions = 0

        async def read(self, room: str, start: int = 1, end: int | None = None) -> list:
            found = await super().read(room, start, end)
            self.read_versions += len(found)
            return found

    chain = chain_of(held["bundle"])
    room, store = held["bundle"]["room"], CountingStore()
    await store.append(room, 0, "the-whole-room", chain)
    ring, secret = KeyRing([b"\x09" * 32]), b"\x05" * 32
    # Given the heads of the room hashed in one go (a chain shorter than a slice: the path every command takes)
    whole = checkpoints.Checkpointer(ring, secret)
    expected = {v: await whole.checkpoint(store, room, v, chain[:v]) for v in (len(chain) - 5, len(chain))}
    assert store.read_versions == 0
    # When a process that never answered about it is asked for two of its versions at once, the room longer than a slice
    monkeypatch.setattr(checkpoints, "HEAD_SLICE", 10, raising=False)
    monkeypatch.setattr(checkpoints, "HEAD_PAUSE_EVERY", 3, raising=False)
    fresh, turns = checkpoints.Checkpointer(ring, secret), 0

    async def other_client() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    beside = asyncio.create_task(other_client())
    answers = await asyncio.gather(*(fresh.checkpoint(store, room, v) for v in expected))
    beside.cancel()
    # Then each is the checkpoint hashed in one go, the room read once, and the loop was given back all along
    assert answers == list(expected.values())
    assert store.read_versions == len(chain)
    assert turns >= len(chain) // 4, turns  # a turn every 3 events of a slice of 10 (the memory store's read waits not)


async def test_an_answer_waiting_for_a_long_hash_whose_asker_left_takes_the_hash_over(held, monkeypatch) -> None:
    """A client that asked for a long room's first answer and hung up cancels the hash it started: an answer that
    was waiting for it then hashes the room itself, to the same checkpoint, and no room is left marked as hashing."""
    from almanac.services import checkpoints  # noqa: PLC0415
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    chain = chain_of(held["bundle"])
    room, store = held["bundle"]["room"], MemoryEventStore()
    await store.append(room, 0, "the-whole-room", chain)
    ring, secret = KeyRing([b"\x09" * 32]), b"\x05" * 32
    # Given the room's last checkpoint hashed in one go
    expected = await checkpoints.Checkpointer(ring, secret).checkpoint(store, room, len(chain), chain)
    monkeypatch.setattr(checkpoints, "HEAD_SLICE", 10, raising=False)
    monkeypatch.setattr(checkpoints, "HEAD_PAUSE_EVERY", 3, raising=False)
    fresh = checkpoints.Checkpointer(ring, secret)
    # When a first answer starts hashing the room, a second waits for it, and the first's client goes away
    first = asyncio.create_task(fresh.checkpoint(store, room, len(chain)))
    await asyncio.sleep(0)
    assert room in fresh._hashing  # noqa: SLF001 - the first holds the room's hash
    second = asyncio.create_task(fresh.checkpoint(store, room, len(chain)))
    for _ in range(3):
        await asyncio.sleep(0)
    first.cancel()
    # Then the second answers the very checkpoint hashed in one go, and nothing is left marked as hashing
    assert await second == expected
    assert first.cancelled()
    assert fresh._hashing == {}  # noqa: SLF001
