"""Stored events are read through upcasters: a room created before rule-set versions reads as version 1."""

from __future__ import annotations

import base64
import json

import msgspec
from store_forgery import rewritten

from almanac.events import codec, room as room_rules
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.export_store import ExportFileStore, compact_export
from almanac.storage.memory_store import MemoryEventStore

# room.created as engines stored it before versions: schema 1, no ruleset_version, fingerprint or schema
# (nor dice_scheme, added later still with a default: such rooms draw with scheme 1).
LEGACY_FIELDS = ("ruleset_version", "fingerprint", "schema", "dice_scheme")


def as_schema_1(payload: bytes) -> bytes:
    stored = msgspec.msgpack.decode(payload)
    return msgspec.msgpack.encode({k: v for k, v in stored.items() if k not in LEGACY_FIELDS})


def test_a_schema_1_room_created_is_upcast_to_version_1_with_an_unknown_fingerprint():
    created = room_rules.RoomCreated(ruleset="counter", setup={}, seed_commitment="c", challenge=None,
                                     created_by="alice", created_at_ms=5, ruleset_version=1, fingerprint="sha256:x")
    old_bytes = as_schema_1(codec.encode(created))
    assert set(msgspec.msgpack.decode(old_bytes)) == {"type", "ruleset", "setup", "seed_commitment", "challenge",
                                                      "created_by", "created_at_ms"}

    upcast = codec.upcast("room.created", msgspec.msgpack.decode(old_bytes))

    assert (upcast["ruleset_version"], upcast["fingerprint"], upcast["schema"]) == (1, "", 2)
    assert codec.upcast("room.created", upcast) == upcast  # the current schema passes through unchanged
    assert ("room.created", 1) in codec.UPCASTERS


async def test_a_room_stored_before_versions_still_verifies_byte_for_byte_as_version_1(tmp_path):
    # Given a realm room played to its end, its room.created rewritten as an engine stored it before versions
    store = MemoryEventStore()
    service = RoomService(store)
    for index, (player, body) in enumerate([
        # dice_scheme 1: what every room stored before versions drew with (it stores no scheme, which reads as 1)
        ("alice", {"kind": "create_room", "ruleset": "realm@1", "options": {"players": ["alice", "bob"]},
                   "dice_scheme": 1}),
        ("alice", {"kind": "join_room"}),
        ("bob", {"kind": "join_room"}),
        ("alice", {"kind": "mine", "ore": "gold"}),
        ("alice", {"kind": "end_room"}),
    ]):
        outcome = await service.handle(CommandRecord(command_id=f"c{index}", room="old", player=player,
                                                     server_time_ms=1_000 + index, body=body))
        assert outcome.accepted, outcome.error
    document = await compact_export(store, "old", 0)  # a format_version 1 file, as written before readable exports
    envelopes = [codec.decode_envelope(base64.b64decode(e), "old", v) for v, e in enumerate(document["envelopes"], 1)]
    # room.created (version 1) told in its first schema, the chain sealed again after it
    envelopes = rewritten(envelopes, 1, lambda created: msgspec.structs.replace(
        created, payload=as_schema_1(created.payload)), reseal=True)
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**document, "envelopes": [base64.b64encode(codec.encode_envelope(envelope)).decode()
                                                          for envelope in envelopes]}))

    # When it is read and verified
    exported = ExportFileStore.open(path)
    created = codec.decode_event((await exported.read("old", 1, 1))[0])
    report = await verify_room(exported, "old")

    # Then it is a version-1 room and every command decides again exactly as recorded
    assert (created.ruleset_version, created.fingerprint) == (1, "")
    assert report.ok, report.divergence
    assert (report.ruleset, report.fingerprint_recorded, report.commands_redecided) == ("realm@1", "", 5)
    assert any("created before versions" in note for note in report.notes)
