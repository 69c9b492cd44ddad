"""One composition root: no process builds its own settings, Redis client, key names, store or room loader; services/bootstrap.py
does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from allow_lists import stale, unexcused

ROOT = Path(__file__).resolve().parents[2]
# Where processes and their parts live. storage/ is left out: it defines the stores and key names (a store builds
# its Keys, the archive its object store). tests/ is left out: a test stands up the very parts it checks, with
# the shard count, prefix and client options the story needs (a second Keys, a raw client to forge or pause).
SCANNED = ("services", "projections", "bench", "client", "examples", "games", "events")
THE_ROOT = "services/bootstrap.py"
# What only the root builds: settings (from an environment, or by hand), key names, stores, clients (from a URL, or
# by hand).
BUILT_BY_THE_ROOT = {"load_settings", "Settings", "Keys", "RedisEventStore", "ArchivingStore", "RoomLoader", "Redis",
                     "StrictRedis", "RedisCluster", "EmbeddedRedis"}
# services.redis_client's client factory, called by name (``connect(...)``) or through its module: the root's
# ``redis_client`` applies each role's options, a direct call skips them.
FACTORY = "connect"
FACTORY_MODULE = "redis_client"
# ``X.from_url(...)`` builds a client (or its pool) when X is a Redis client or pool class.
REDIS_CALLEE = re.compile(r"redis|cluster|pool", re.IGNORECASE)

# Each exception, and why it is not the root's to build. A construct listed here must still be found in its file
# (test_the_allow_list_names_only_what_is_there), so the list shrinks as the exceptions go.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "services/redis_client.py": ({"from_url"}, "the client factory the root calls (connect, live_seed): the "
                                               "root's Redis options are applied here"),
    "services/embedded_redis.py": ({"Redis", "from_url"}, "the embedded redis-server's supervisor pings and shuts "
                                                          "down the server it started: no process runs on that client"),
    "services/gateway/outcomes.py": ({"Redis"}, "a plain client on one Cluster node, made from the gateway's "
                                                "Cluster client's own connection settings (the root's)"),
    "services/room_service.py": ({"RoomLoader"}, "the part's default when its caller hands no loader (`almanac sim`, "
                                               "tests); the engine hands its runtime's"),
    "services/clock.py": ({"RoomLoader"}, "as services/room_service.py: the engine's housekeeping hands its runtime's"),
    "services/forensics/verify.py": ({"RoomLoader"}, "a loader caching nothing on the store being verified (an export "
                                                     "file, a copy shown as its origin), never the process's own"),
    "bench/lifecycle.py": ({"RoomLoader"}, "a loader caching nothing on the benchmark's own tool_store (no runtime)"),
    "services/engine/shard_engine.py": ({"RedisEventStore"}, "the part's default when its caller hands no store; "
                                                             "every engine process hands the root's"),
    "projections/projector.py": ({"RedisEventStore", "RoomLoader"}, "projections/ may not import services/ (test_layering): "
                                                      "the part's default when its caller hands no store; the "
                                                      "projector process hands the root's"),
    "projections/rebuild.py": ({"RedisEventStore", "RoomLoader"}, "as projections/projector.py: the CLI hands the "
                                                                   "root's store; a fork's base is read on it"),
    "projections/read_model_queries.py": ({"Keys"}, "as projections/projector.py: the gateway and the CLI hand the root's keys"),
    "bench/faststream.py": ({"from_url"}, "its baseline is redis-py as it comes, as FastStream's broker "
                                                   "builds it (the module says so)"),
    "bench/redis_cluster.py": ({"Redis"}, "starts, kills and restarts the nodes of a local Cluster and asks each node "
                                          "by its port (CLUSTER INFO, ROLE, FAILOVER): a client per node, no process's"),
    "bench/store.py": ({"from_url"}, "its baseline is redis-py as it comes, against the root's client"),
}


def constructions(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each key-names, store or client construction in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in BUILT_BY_THE_ROOT:
            found.append((node.lineno, name))
        elif name == FACTORY and (isinstance(func, ast.Name) or FACTORY_MODULE in ast.unparse(func.value)):
            found.append((node.lineno, name))
        elif name == "from_url" and REDIS_CALLEE.search(ast.unparse(func.value)):  # type: ignore[union-attr]
            found.append((node.lineno, name))
    return sorted(found)


# Copies a build leaves in the tree (bench/build/ after a wheel is built: tests/kernel/test_packaging.py), not code.
BUILT_COPIES = {"build", "dist", "node_modules"}


def _scanned() -> dict[str, list[tuple[int, str]]]:
    return {str(path.relative_to(ROOT)): constructions(path)
            for folder in SCANNED for path in sorted((ROOT / folder).rglob("*.py"))
            if str(path.relative_to(ROOT)) != THE_ROOT and not BUILT_COPIES & set(path.relative_to(ROOT).parts)}


def test_no_process_builds_its_own_client_keys_or_store_outside_the_composition_root():
    """Given every process's code (services, projections, the benchmarks), when its constructions are listed,
    then none builds a Redis client, a Keys or a store that the allow-list does not name: they ask services.bootstrap."""
    assert unexcused(_scanned(), ALLOWED) == {}


def test_the_allow_list_names_only_what_is_there():
    """Given the allow-list, when each file is read, then each construct it excuses is still built there."""
    assert stale(_scanned(), ALLOWED) == {}


def test_the_scan_sees_a_process_that_builds_its_own(tmp_path):
    """Given a module that builds its own client, keys and store, when it is scanned, then each is found."""
    probe = tmp_path / "probe.py"
    probe.write_text("import redis.asyncio as aioredis\n"
                     "from almanac.storage.keys import Keys\n"
                     "from almanac.storage.archive import ArchivingStore\n"
                     "client = aioredis.Redis.from_url('redis://x')\n"
                     "keys = Keys(16)\n"
                     "store = ArchivingStore(client, None, 16)\n"
                     "plain = aioredis.Redis(host='x')\n"
                     "blob = obstore.store.from_url('file:///tmp')\n"
                     "own = load_settings({}, shard_count=4)\n")
    assert [what for _, what in constructions(probe)] == ["from_url", "Keys", "ArchivingStore", "Redis",
                                                          "load_settings"]
