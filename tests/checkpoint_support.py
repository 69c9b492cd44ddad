"""Forgers' tools for the checkpoint tests: re-seal a bundle's chain and its commitment heads as an operator who
holds every secret (the room key, the signing key) would, and the honest and tampered bundle set both verifiers read."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from almanac.events import codec, readable
from almanac.events.hashing import seal
from almanac.services.checkpoints import KeyRing


def chain_of(bundle: dict) -> list:
    return [codec.decode_envelope(base64.b64decode(d), bundle["room"], v)
            for v, d in enumerate(bundle["chain"]["envelopes"], start=1)]


def copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def with_chain(bundle: dict, chain: list) -> dict:
    """``bundle`` carrying ``chain`` (envelopes re-numbered from 1 and re-sealed, as a forger who owns the store
    would), its head and readable entries rebuilt; the room key stays, so every commitment head is recomputable."""
    bundle = copy(bundle)
    previous = chain[0].previous_hash
    sealed = []
    for version, envelope in enumerate(chain, start=1):
        envelope = seal(msgspec.structs.replace(envelope, version=version, previous_hash=previous))
        previous = envelope.hash
        sealed.append(envelope)
    raws = [codec.encode_envelope(e) for e in sealed]
    bundle["chain"]["envelopes"] = [readable.b64(r) for r in raws]
    bundle["head"] = {"version": len(sealed), "hash": sealed[-1].hash}
    bundle["events"] = [readable.event_entry(raws[e["version"] - 1], bundle["room"], e["version"])
                        for e in bundle["events"] if e["version"] <= len(sealed)]
    return bundle


def edited(bundle: dict, version: int, change) -> dict:
    """The event at ``version`` changed by ``change(event as builtins)``, everything re-sealed."""
    chain = chain_of(bundle)
    event = codec.to_builtins(codec.decode_event(chain[version - 1]))
    change(event)
    chain[version - 1] = msgspec.structs.replace(chain[version - 1], payload=codec.encode(event))
    return with_chain(bundle, chain)


def dropped(bundle: dict, version: int) -> dict:
    chain = chain_of(bundle)
    del chain[version - 1]
    return with_chain(bundle, chain)


def swapped(bundle: dict, a: int, b: int) -> dict:
    chain = chain_of(bundle)
    chain[a - 1], chain[b - 1] = chain[b - 1], chain[a - 1]
    return with_chain(bundle, chain)


def stranger_ring() -> KeyRing:
    """A key that is not the deployment's: what a forger signs with."""
    return KeyRing([Ed25519PrivateKey.generate().private_bytes_raw()])
