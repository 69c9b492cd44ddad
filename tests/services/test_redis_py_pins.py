"""The redis-py internals the project still reaches are still the ones it was written against: the Cluster client's MOVED
hook and its command path (FailoverCluster.execute_command's read that is not sent twice), the stream a timed send
writes, and the streams the raw lines read and write."""

# Given redis-py as installed, when its Cluster node map handles two MOVED redirections to a promoted replica (the
# second handled after the first had patched the map), then the slot routes to the promoted node and that node is a
# primary; and the hook FailoverCluster overrides for it (NodesManager._update_moved_slots, services/redis_client.py
# _MovedToItsOwner) is there with the signature, caller and body it was written against. An upgrade of redis-py that
# changes any of that fails here, before any Cluster test (which need redis-server) could show it: then delete the
# backport (redis-py 7.2+ has the fix) or write it again against the new hook. No server is needed: the map is
# bookkeeping, filled here as a refresh would fill it.

from __future__ import annotations

import hashlib
import inspect

import redis
from redis.asyncio.cluster import ClusterNode, NodesManager
from redis.cluster import PRIMARY, REPLICA
from redis.exceptions import MovedError

from almanac.services.redis_client import _GentleNodesManager

SLOT = 1234
OLD, PROMOTED = ("127.0.0.1", 7001), ("127.0.0.1", 7002)
# sha256 of redis-py 5.3.1's NodesManager._update_moved_slots source, which _MovedToItsOwner was written against.
HOOK_SHA256 = "fbe61536684c24918c14ed82ddd9cc6130d4da953936e9dc802b9c310f5c66a5"


def map_before_the_failover(manager_class: type[NodesManager]) -> NodesManager:
    """A node map whose slot SLOT is served by OLD, PROMOTED its replica (as the map stood before the failover)."""
    old, promoted = ClusterNode(*OLD, server_type=PRIMARY), ClusterNode(*PROMOTED, server_type=REPLICA)
    manager = manager_class([old], require_full_coverage=False, connection_kwargs={})
    manager.nodes_cache = {old.name: old, promoted.name: promoted}
    manager.slots_cache = {SLOT: [old, promoted]}
    manager.default_node = old
    return manager


def redirected_twice(manager: NodesManager) -> ClusterNode:
    """Two commands for SLOT came back MOVED to PROMOTED; each follows it as redis-py's client does."""
    for _ in range(2):
        manager._moved_exception = MovedError(f"{SLOT} {PROMOTED[0]}:{PROMOTED[1]}")
        node = manager.get_node_from_slot(SLOT)
    return node


def primaries(manager: NodesManager) -> list[str]:
    return sorted(node.name for node in manager.get_nodes_by_server_type(PRIMARY))


def test_a_second_moved_to_the_promoted_node_keeps_it_a_primary() -> None:
    manager = map_before_the_failover(_GentleNodesManager)
    assert redirected_twice(manager).name == f"{PROMOTED[0]}:{PROMOTED[1]}"
    assert primaries(manager) == [f"{PROMOTED[0]}:{PROMOTED[1]}"]  # INFO or SCRIPT LOAD to the primaries reach it
    assert [node.name for node in manager.slots_cache[SLOT]] == [f"{PROMOTED[0]}:{PROMOTED[1]}", f"{OLD[0]}:{OLD[1]}"]


def test_redis_py_still_marks_the_promoted_node_a_replica_so_the_backport_is_still_needed() -> None:
    manager = map_before_the_failover(NodesManager)
    assert redirected_twice(manager).name == f"{PROMOTED[0]}:{PROMOTED[1]}"
    assert primaries(manager) == [], (
        f"redis-py {redis.__version__} keeps the promoted node a primary on its own: delete _MovedToItsOwner")


def test_the_private_hook_is_the_one_the_backport_was_written_against() -> None:
    hook = getattr(NodesManager, "_update_moved_slots", None)
    assert hook is not None, f"redis-py {redis.__version__} has no NodesManager._update_moved_slots"
    assert str(inspect.signature(hook)) == "(self) -> None"
    assert "_moved_exception" in NodesManager.__slots__
    caller = inspect.getsource(NodesManager.get_node_from_slot)
    assert "if self._moved_exception:\n            self._update_moved_slots()" in caller
    assert hashlib.sha256(inspect.getsource(hook).encode()).hexdigest() == HOOK_SHA256, (
        f"redis-py {redis.__version__} changed NodesManager._update_moved_slots: check _MovedToItsOwner against it")


def test_redis_py_still_sends_a_timed_command_through_a_task_so_the_inline_send_is_still_needed() -> None:
    # Given redis-py's asyncio Connection as installed: with a socket timeout, its send_packed_command still runs
    # the write through asyncio.wait_for (a task of its own per send on Python 3.11, 17-21% of a deciding gateway's
    # samples: docs/capacity.md), and the stream it writes is still the connection's ``_writer``, which
    # HiredisPackConnection (services/redis_client.py) writes inline instead, as redis-py's own connection classes
    # do. When either changes (a redis-py that sends without a task, or another stream), this fails: then delete
    # HiredisPackConnection.send_packed_command, or write it again against the new send.
    from redis.asyncio.connection import Connection

    from almanac.services.redis_client import HiredisPackConnection

    source = inspect.getsource(Connection.send_packed_command)
    assert "asyncio.wait_for(" in source and "self._send_packed_command(command)" in source
    assert "self._writer.writelines(command)" in inspect.getsource(Connection._send_packed_command)
    assert "self._writer" in inspect.getsource(HiredisPackConnection.send_packed_command)


def test_redis_py_still_keeps_a_connections_streams_where_the_raw_lines_read_and_write_them() -> None:
    # Given redis-py's asyncio Connection as installed: connecting still keeps the socket's asyncio streams as
    # ``_reader`` and ``_writer``, which storage/raw_connection.py reads and writes directly for the gateway's
    # pipelined submit line and the engine's batch connection (redis-py's own read cost about as much as the socket
    # read at one command a batch). Its public send and read were tried instead (stop 44) and not kept: a send that
    # awaits its drain makes a caller's cancellation close the shared line, and its handshake, without a socket
    # timeout, hung on a frozen Redis (docs/capacity.md). When the streams move, this fails: rewrite the raw lines.
    from redis.asyncio.connection import Connection

    source = inspect.getsource(Connection._connect)
    assert "self._reader = reader" in source and "self._writer = writer" in source


# sha256 of redis-py 5.3.1's asyncio RedisCluster.execute_command source, which FailoverCluster.execute_command's
# path for a read of new stream entries (services/redis_client.py) copies in part.
EXECUTE_COMMAND_SHA256 = "06737cce91e66e6ef3d4e8282c6beca0c1f286c0290d0659e5afcc5a3942e1cd"


def test_the_cluster_command_path_the_read_not_sent_twice_copies_is_the_one_it_was_written_against() -> None:
    # Given redis-py's asyncio RedisCluster as installed: FailoverCluster.execute_command sends XREADGROUP ... > itself,
    # with redis-py's own private parts (the refresh flag, the slot, the node map, the one-node send, the retry
    # count) and without the result callbacks, which have none for it. An upgrade that changes that path fails here,
    # before a Cluster test (which needs redis-server) could: then write the override again against the new one.
    from redis.asyncio.cluster import RedisCluster  # noqa: PLC0415 - only this story needs the Cluster client

    from almanac.services.redis_client import FailoverCluster  # noqa: PLC0415

    source = inspect.getsource(RedisCluster.execute_command)
    for part in ("self._initialize", "await self.initialize()", "self.cluster_error_retry_attempts",
                 "await self._execute_command(target_nodes[0], *args, **kwargs)"):
        assert part in source, f"redis-py {redis.__version__}'s RedisCluster.execute_command no longer has {part}"
    assert "XREADGROUP" not in RedisCluster.RESULT_CALLBACKS
    assert str(inspect.signature(RedisCluster._determine_slot)) == "(self, command: str, *args: Any) -> int"
    assert "target_node" in inspect.signature(RedisCluster._execute_command).parameters
    assert callable(getattr(NodesManager, "get_node_from_slot", None))
    assert hashlib.sha256(source.encode()).hexdigest() == EXECUTE_COMMAND_SHA256, (
        f"redis-py {redis.__version__} changed RedisCluster.execute_command: check FailoverCluster.execute_command "
        "against it")
    assert FailoverCluster.execute_command is not RedisCluster.execute_command
