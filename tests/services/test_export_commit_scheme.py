"""Exports carry the room's commitment scheme (docs/bundle-format.md 6.1), so an imported room keeps its heads.

Given a scheme-v2 room played in one store, when it is exported and imported into a real Redis (as itself, as a
copy, or from a file written before exports carried the scheme), then the imported room commits under the scheme
the file records: the same heads as before for v2, scheme v1 for an old file, v2 for a copy; a file naming an
unknown scheme is refused.
"""

from __future__ import annotations

import json

from test_cli_operator import ainvoke
from test_copies_and_imports import counter_room

from almanac.events import commitments as cm
from almanac.services.checkpoints import Checkpointer, KeyRing
from almanac.storage.export_store import export_document
from almanac.storage.memory_store import MemoryEventStore
from almanac.storage.redis_store import RedisEventStore

SECRET = bytes(range(32))


async def scheme_and_heads(store, room: str) -> tuple[str, list[bytes]]:
    """What a gateway signs for ``room``: its scheme and every head under it."""
    checkpointer = Checkpointer(KeyRing([bytes(32)], []), SECRET)
    scheme = await checkpointer.scheme(store, room)
    return scheme, cm.heads(checkpointer.room_key(room), await store.read(room), scheme)


async def played_elsewhere(tmp_path, room: str = "table") -> tuple[MemoryEventStore, dict, str]:
    origin = MemoryEventStore()
    await counter_room(origin, room, amount=7)
    document = await export_document(origin, room, 1)
    path = tmp_path / f"{room}.json"
    path.write_text(json.dumps(document))
    return origin, document, str(path)


async def test_an_exported_v2_room_imports_with_the_same_v2_heads(redis_client, redis_url, tmp_path):
    origin, document, path = await played_elsewhere(tmp_path)
    assert document["commit_scheme"] == cm.SCHEME_V2  # the engine recorded it when the room was created
    before = await scheme_and_heads(origin, "table")

    imported = await ainvoke(redis_url, "import", path)
    assert imported.exit_code == 0, imported.output
    after = await scheme_and_heads(RedisEventStore(redis_client), "table")
    assert after == before and after[0] == cm.SCHEME_V2
    # Had the scheme been dropped, the heads would be v1's: the test can tell the two apart.
    events = await origin.read("table")
    assert after[1] != cm.heads(cm.room_key(SECRET, "table"), events, cm.SCHEME)
    # And exporting it again says the same.
    assert (await export_document(RedisEventStore(redis_client), "table", 1))["commit_scheme"] == cm.SCHEME_V2


async def test_an_export_file_written_before_the_field_imports_as_v1(redis_client, redis_url, tmp_path):
    origin, document, path = await played_elsewhere(tmp_path)
    del document["commit_scheme"]  # as every file written before exports carried it
    (tmp_path / "old.json").write_text(json.dumps(document))

    imported = await ainvoke(redis_url, "import", str(tmp_path / "old.json"))
    assert imported.exit_code == 0, imported.output
    store = RedisEventStore(redis_client)
    assert await store.load_commit_scheme("table") is None
    scheme, heads = await scheme_and_heads(store, "table")
    assert scheme == cm.SCHEME
    assert heads == cm.heads(cm.room_key(SECRET, "table"), await origin.read("table"), cm.SCHEME)
    assert "commit_scheme" not in await export_document(store, "table", 1)  # and it stays a file without one


async def test_a_copy_keeps_the_scheme_of_its_origin_like_its_seed_and_nonces(redis_client, redis_url, tmp_path):
    origin, _, path = await played_elsewhere(tmp_path)
    copied = await ainvoke(redis_url, "import", path, "--as", "table-copy")
    assert copied.exit_code == 0, copied.output
    store = RedisEventStore(redis_client)
    scheme, heads = await scheme_and_heads(store, "table-copy")
    assert scheme == cm.SCHEME_V2 and await store.load_seed("table-copy") == await origin.load_seed("table")
    # Re-sealed under its own id, the copy's heads are its own (its room key is derived from the new id).
    assert heads != (await scheme_and_heads(origin, "table"))[1]
    assert (await ainvoke(redis_url, "verify", "table-copy")).exit_code == 0


async def test_a_file_naming_an_unknown_scheme_is_refused(redis_client, redis_url, tmp_path):
    _, document, _ = await played_elsewhere(tmp_path)
    document["commit_scheme"] = "almanac-commit-v9"
    (tmp_path / "odd.json").write_text(json.dumps(document))
    refused = await ainvoke(redis_url, "import", str(tmp_path / "odd.json"))
    assert refused.exit_code != 0 and "commit_scheme" in refused.output, refused.output
    assert await RedisEventStore(redis_client).latest_version("table") == 0
