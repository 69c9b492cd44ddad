"""Hostile bundles (hypothesis): mutated honest bundles and random JSON give a verdict, never an exception, never a false VERIFIED."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from forensics_support import RealmTable
from hypothesis import HealthCheck, given, settings, strategies as st

from almanac.events.forensics.bundle_check import INCOMPLETE, NOT_VERIFIED, VERIFIED, verify_bundle
from almanac.services.forensics.bundle import dispute_bundle
from almanac.storage.memory_store import MemoryEventStore

ROOM = "fuzzed"
# Parts the verifier shows but cannot vouch for (the exporter's own fingerprint; a refusal's message beside its
# code): changing them may leave the verdict VERIFIED; an event entry's ``payload`` is an optional copy of the
# chained bytes (checked when present). Everything else, notes and the audience line included, is checked.
UNCHECKED = {"fingerprint_of_exporter", "error", "payload"}


def small_bundle() -> dict:
    """An ended two-player realm room of a few seasons, bundled whole (fast to verify: a few dozen versions)."""
    async def build() -> dict:
        store = MemoryEventStore()
        table = RealmTable(store, ROOM)
        await table.create("realm@1")
        await table.play_mining(2)
        assert (await table.send("alice", {"kind": "end_room"})).accepted
        head = await store.latest_version(ROOM)
        return await dispute_bundle(store, ROOM, 0, versions=(2, head))

    return json.loads(json.dumps(asyncio.run(build())))


HONEST = small_bundle()
HEAD = HONEST["head"]["hash"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.text(max_size=20)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def paths(value: Any, here: tuple = ()) -> list[tuple]:
    """Every path to a part of the bundle (its keys and list indexes)."""
    found = [here] if here else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*here, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:6]):  # a few of each list: the chain is long
            found += paths(item, (*here, index))
    return found


PATHS = paths(HONEST)


def replaced(bundle: Any, path: tuple, value: Any) -> Any:
    bundle = json.loads(json.dumps(bundle))
    target = bundle
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return bundle


_DELETE = object()


def assert_a_verdict(bundle: Any) -> Any:
    verdict = verify_bundle(bundle, HEAD)  # never raises: a hostile part is a failed step
    assert verdict.status in (VERIFIED, INCOMPLETE, NOT_VERIFIED)
    assert verdict.ok == (verdict.status == VERIFIED)
    assert verdict.text().startswith("bundle of room")
    return verdict


def test_the_honest_small_bundle_verifies() -> None:
    assert verify_bundle(HONEST, HEAD).ok, verify_bundle(HONEST, HEAD).text()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(path=st.sampled_from(PATHS), value=json_values | st.just(_DELETE))
def test_a_bundle_with_any_part_replaced_or_removed_gets_a_verdict_and_verifies_only_if_the_evidence_is_intact(
        path: tuple, value: Any) -> None:
    mutated = replaced(HONEST, path, value)
    verdict = assert_a_verdict(mutated)
    if verdict.ok and mutated != HONEST:
        assert any(key in UNCHECKED for key in path if isinstance(key, str)), (path, value, verdict.text())


@settings(max_examples=80, deadline=None, derandomize=True)
@given(which=st.sampled_from(["envelopes", "commands"]), index=st.integers(0, 40), at=st.integers(0, 400),
       flip=st.integers(1, 255))
def test_a_flipped_byte_in_the_chain_or_a_command_record_never_verifies(which: str, index: int, at: int,
                                                                        flip: int) -> None:
    bundle = json.loads(json.dumps(HONEST))
    items = bundle["chain"][which]
    index %= len(items)
    raw = bytearray(base64.b64decode(items[index] if which == "envelopes" else items[index][1]))
    raw[at % len(raw)] ^= flip
    text = base64.b64encode(bytes(raw)).decode()
    if which == "envelopes":
        items[index] = text
    else:
        items[index][1] = text
    verdict = assert_a_verdict(bundle)
    assert verdict.status == NOT_VERIFIED, verdict.text()


@settings(max_examples=100, deadline=None, derandomize=True)
@given(document=json_values)
def test_random_json_is_never_verified(document: Any) -> None:
    assert assert_a_verdict(document).status == NOT_VERIFIED


@pytest.mark.parametrize("shape", [[], None, "x", 7, {"format": "almanac-dispute-bundle", "format_version": 2},
                                   {"format": "almanac-dispute-bundle", "format_version": 2, "room": "r",
                                    "head": {"version": 10**9, "hash": "0"}, "chain": {"envelopes": []}}])
def test_bundle_shaped_nonsense_is_a_failed_format_step(shape: Any) -> None:
    verdict = assert_a_verdict(shape)
    assert verdict.failed.name == "format", verdict.text()
