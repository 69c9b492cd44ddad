"""Connecting to Redis: a single server, or a Redis Cluster (every key of a room shares one slot).

Commands are packed by hiredis (C) instead of redis-py's Python packer: packing arguments was the
largest single cost of a pipelined command on these machines (about 40 us of 60 us), and
hiredis.pack_command produces the same bytes about five times faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from urllib.parse import urlsplit

import hiredis
import redis.asyncio as aioredis
from redis import exceptions
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, NodesManager, RedisCluster
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.cluster import PRIMARY, get_node_name
from redis.commands.core import AsyncScript
from redis.crc import key_slot

# Where they live now (storage/, beside the stores that classify and read with them); imported from here too.
from almanac.storage.redis_errors import CLUSTER_ERRORS, refuses_writes  # noqa: F401

# True while redis-py's cluster client handles an error of one command (see FailoverCluster.aclose).
_HANDLING_ERROR: contextvars.ContextVar[bool] = contextvars.ContextVar("almanac_cluster_error", default=False)
# After an error, the slot map is refreshed at most once in this long (FailoverCluster.initialize).
REFRESH_EVERY_S = 0.25
IDLE_CLOSE_WAIT_S = 30.0
_closing: set[asyncio.Task] = set()


class FailoverCluster(RedisCluster):
    """redis-py's asyncio Cluster client, except that one node's failure does not cut the others' commands.

    On a connection error to one node, redis-py 5.3 closes every connection of every node (``aclose``)
    and then rebuilds its node objects, disconnecting the old ones: every command in flight on the live
    nodes fails too (as a ConnectionError, or as an AttributeError/RuntimeError from a connection closed
    under it), so a dead primary stalled the shards of the live ones and the gateway answered 500. Here
    that error path only marks the slot map for a refresh, and a replaced node object is closed once its
    connections are idle. ``aclose()`` called by the application still closes everything.

    A script run by its SHA (EVALSHA: ``register_script``'s scripts, alone or in a pipeline) on a node that does
    not know it is sent whole instead (EVAL, to the same keys' node, which caches it there): a Cluster replicates
    no script cache, so a replica promoted in a failover knows none, and redis-py's own reload (SCRIPT LOAD to the
    primaries its node map names) misses a node the map does not name a primary, and fails whole while any primary
    of the map is down. A call that was redirected (MOVED) is sent by its text to its first node again, and follows
    the redirection as before.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._refreshed_at = float("-inf")  # monotonic time the last refresh after an error ended
        self.script_texts: dict[str, str | bytes] = {}  # SHA -> text of every script registered on this client
        self.nodes_manager.__class__ = _GentleNodesManager
        self.nodes_manager.startup_nodes = _SeedNodes(self.nodes_manager.startup_nodes)

    def register_script(self, script: str | bytes) -> AsyncScript:  # type: ignore[override]
        registered = super().register_script(script)
        self.script_texts[registered.sha] = registered.script
        return registered

    def script_text_call(self, args: tuple) -> tuple | None:
        """``args`` of an EVALSHA of a script registered here, as the same call by its text (EVAL); else None."""
        if len(args) < 2 or str(args[0]).upper() != "EVALSHA":
            return None
        sha = args[1].decode() if isinstance(args[1], bytes) else str(args[1])
        text = self.script_texts.get(sha.lower())
        return None if text is None else ("EVAL", text, *args[2:])

    async def execute_command(self, *args: object, **kwargs: object) -> object:
        """redis-py's, except that a read of new stream entries for a group (XREADGROUP ... ``>``) is never sent again
        after a ConnectionError or TimeoutError.

        Redis marks what such a read delivers pending under its consumer the moment it runs it, and never delivers
        it again. redis-py sends a command again after those errors (``cluster_error_retry_attempts``): a read
        whose answer was lost or came after the socket timeout (the gateway's engine has one, and a starved host's
        event loop can read a ready answer late) was sent again and the second answer returned as the read's,
        the first one's commands left pending with no error for the engine to take the shard over on
        (tests/cluster/test_cluster_read_not_resent.py). The error now reaches the caller; a refusal before the
        read ran (the Cluster down, a slot not covered) is still sent again, as redis-py does."""
        if "target_nodes" in kwargs or not _reads_new_entries(args):
            return await super().execute_command(*args, **kwargs)
        attempts = 1 + self.cluster_error_retry_attempts
        for attempt in range(attempts):
            if self._initialize:
                await self.initialize()
            try:
                node = self.nodes_manager.get_node_from_slot(await self._determine_slot(*args))
                return await self._execute_command(node, *args, **kwargs)
            except (exceptions.ClusterDownError, exceptions.SlotNotCoveredError) as error:
                if type(error) not in (exceptions.ClusterDownError, exceptions.SlotNotCoveredError) \
                        or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _execute_command(self, target_node: ClusterNode, *args: object, **kwargs: object) -> object:
        token = _HANDLING_ERROR.set(True)
        try:
            try:
                return await super()._execute_command(target_node, *args, **kwargs)  # type: ignore[arg-type]
            except exceptions.NoScriptError:
                # As storage.redis_store.eval_by_text, but on the node redis-py chose (its text looked up by SHA).
                by_text = self.script_text_call(args)
                if by_text is None:
                    raise
                # The node the keys route to (after any MOVED) does not know the script: run it by its text there.
                return await super()._execute_command(target_node, *by_text, **kwargs)  # type: ignore[arg-type]
        finally:
            _HANDLING_ERROR.reset(token)

    async def initialize(self) -> RedisCluster:
        """The first time as redis-py does; later (a refresh after an error) only the slot map and nodes, and at
        most once in REFRESH_EVERY_S.

        redis-py also reloads its command table from the default node, which may be the dead one: the
        refresh then fails and closes every connection, for as long as that node stays dead.

        Every command waits for a refresh under way, and every failed call to a dead node asks for one (each of
        redis-py's three tries of it): an engine retrying a dead node's shards asked for some 35 a second, and
        the live nodes' commands spent most of their time waiting for them (issue 28, `almanac bench failover`:
        the live shards' answers 0.5-1.5 s late until the promotion). Within REFRESH_EVERY_S of the last one the
        map is kept and the refresh stays due: a dead node's call fails again at once, and the next call after
        the interval refreshes (the promoted replica is found at most that much later).
        """
        if not self._initialize or not self.commands_parser.commands:
            return await super().initialize()
        if not self._lock:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._initialize and time.monotonic() - self._refreshed_at >= REFRESH_EVERY_S:
                try:
                    await self.nodes_manager.initialize()
                finally:
                    self._refreshed_at = time.monotonic()  # a failed one (no seed answered) counts too
                self._initialize = False
        return self

    async def _determine_slot(self, command: str, *args: object) -> int:
        # XREADGROUP and XREAD have "movable" keys: redis-py asks the node it loaded its command table from
        # (COMMAND GETKEYS, one more round trip per read) and every read fails while that node is down.
        # The streams follow STREAMS: the first half of what follows are the keys.
        if str(command).upper() in ("XREADGROUP", "XREAD"):
            words = [arg.decode() if isinstance(arg, bytes) else str(arg) for arg in args]
            upper = [word.upper() for word in words]
            if "STREAMS" in upper:
                rest = words[upper.index("STREAMS") + 1:]
                slots = {key_slot(key.encode()) for key in rest[: len(rest) // 2]}
                if len(slots) == 1:
                    return slots.pop()
        return await super()._determine_slot(command, *args)  # type: ignore[arg-type]

    def pipeline(self, transaction: object = None, shard_hint: object = None) -> ClusterPipeline:
        super().pipeline(transaction, shard_hint)  # its checks
        return _FailoverPipeline(self)

    async def aclose(self) -> None:
        if _HANDLING_ERROR.get():
            self._initialize = True  # the next command refreshes the slot map first; no connection is cut
            return
        await super().aclose()


def _reads_new_entries(args: tuple) -> bool:
    """Whether ``args`` are an XREADGROUP for new entries (an id ``>`` after STREAMS): one not safe to send twice."""
    if not args or str(args[0]).upper() != "XREADGROUP":
        return False
    words = [arg.decode() if isinstance(arg, bytes) else str(arg) for arg in args[1:]]
    upper = [word.upper() for word in words]
    if "STREAMS" not in upper:
        return False
    rest = words[upper.index("STREAMS") + 1:]
    return ">" in rest[len(rest) // 2:]


async def _node_pipeline(node: ClusterNode, cmds: list) -> None:
    """redis-py's ``ClusterNode.execute_pipeline``, giving its connection back when the send fails: redis-py
    keeps a connection whose send raised out of the node's pool for good, so a node that keeps failing
    (a failover) would use up its connections one failed pipeline at a time."""
    connection = node.acquire_connection()
    try:
        await connection.send_packed_command(connection.pack_commands(cmd.args for cmd in cmds), False)
    except BaseException:
        with contextlib.suppress(Exception):
            await connection.disconnect()  # its state is unknown: it connects afresh when next used
        node._free.append(connection)
        raise
    for cmd in cmds:
        try:
            cmd.result = await node.parse_response(connection, cmd.args[0], **cmd.kwargs)
        except Exception as error:  # noqa: BLE001 - the command's result, as in redis-py
            cmd.result = error
    node._free.append(connection)


class _FailoverPipeline(ClusterPipeline):
    """A Cluster pipeline whose commands for a dead node fail alone, at once.

    redis-py sends each node's part concurrently but lets one node's connection error fail the whole
    pipeline, then retries all of it three times 0.25 s apart: during a failover every batch of the
    engine (and every outcome it published, every acknowledgement) waited about a second and then
    failed for the live nodes' shards too, which stalled every shard until the promotion. Here a node
    that cannot be reached sets that error as the result of its own commands only; the slot map is
    refreshed before the next command (the promoted replica is found as soon as the Cluster has one).
    ``raise_on_error`` then raises the first error as redis-py does, after every node has answered.
    """

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list:
        if not self._command_stack:
            return []
        token = _HANDLING_ERROR.set(True)
        try:
            if self._client._initialize:
                # A failed refresh (no seed answers yet) keeps the old map: its live nodes still serve.
                with contextlib.suppress(exceptions.RedisError, OSError):
                    await self._client.initialize()
            return await self._execute(self._client, self._command_stack, raise_on_error, allow_redirections)
        finally:
            self._command_stack = []
            _HANDLING_ERROR.reset(token)

    async def _execute(self, client: RedisCluster, stack: list, raise_on_error: bool = True,
                       allow_redirections: bool = True) -> list:
        nodes: dict[str, tuple[ClusterNode, list]] = {}
        for cmd in stack:
            target = cmd.kwargs.pop("target_nodes", None)
            try:
                targets = (client._parse_target_nodes(target) if target and not client._is_node_flag(target)
                           else await client._determine_nodes(*cmd.args, node_flag=target))
                if len(targets) != 1:
                    raise exceptions.RedisClusterException(f"{len(targets)} targets for command {cmd.args[0]!r}")
            except (exceptions.RedisError, OSError) as error:
                cmd.result = error  # e.g. a slot no live primary covers: this command alone
                continue
            nodes.setdefault(targets[0].name, (targets[0], []))[1].append(cmd)
        failures = await asyncio.gather(*(_node_pipeline(node, cmds) for node, cmds in nodes.values()),
                                        return_exceptions=True)
        for (_node, cmds), failure in zip(nodes.values(), failures, strict=True):
            if isinstance(failure, BaseException):
                for cmd in cmds:
                    cmd.result = failure
        if any(isinstance(cmd.result, (exceptions.ConnectionError, exceptions.TimeoutError, OSError,
                                       exceptions.ClusterDownError, exceptions.MovedError))
               for cmd in stack):
            client._initialize = True  # refresh the slot map before the next command, cutting no connection
        if allow_redirections:
            for cmd in stack:
                if isinstance(cmd.result, (exceptions.TryAgainError, exceptions.MovedError, exceptions.AskError)):
                    try:
                        cmd.result = await client.execute_command(*cmd.args, **cmd.kwargs)
                    except Exception as error:  # noqa: BLE001 - the command's result, as in redis-py
                        cmd.result = error
            # A script its node did not know, run by its text there (FailoverCluster). Only with redirections: a
            # caller that forbids them (a WAIT after each node's part) must not see a command sent after its WAIT.
            # The EVAL is sent after the whole pipeline has answered, so it runs AFTER the commands that followed its
            # EVALSHA on that node (no current caller depends on that order; one that does must not rely on this).
            for cmd in stack:  # each a result, not raised: a single command's is FailoverCluster._execute_command's
                if isinstance(cmd.result, exceptions.NoScriptError) and (
                        by_text := client.script_text_call(cmd.args)) is not None:
                    try:
                        cmd.result = await client.execute_command(*by_text, **cmd.kwargs)
                    except Exception as error:  # noqa: BLE001 - the command's result, as in redis-py
                        cmd.result = error
        if raise_on_error:
            for cmd in stack:
                if isinstance(cmd.result, Exception):
                    raise cmd.result
        return [cmd.result for cmd in stack]


class _SeedNodes(dict):
    """The seed nodes: redis-py drops a seed whose connection failed, from under a refresh that iterates
    them in another task (RuntimeError: dictionary changed size). A dead seed is kept: the refresh skips
    a seed that does not answer, and it may come back."""

    def pop(self, key: object, default: object = None) -> object:
        return self.get(key, default)


class _MovedToItsOwner(NodesManager):
    """redis-py 7.2's handling of a MOVED that names the node the slot map already gives the slot (redis-py
    pull request 3899), on the pinned redis-py 5.3.1: the map is kept as it is.

    Two commands for one slot sent to its old primary during a failover both come back MOVED; the second is
    handled after the first has patched the map. redis-py 5.3.1 takes it for a failover away from the promoted
    node: it marks that node a replica (and drops the old primary from the slot's list), so every command sent
    to the primaries (INFO, SCRIPT LOAD) missed the promoted node until the next refresh
    (tests/cluster/test_cluster_noscript.py). No public option avoids it: ``reinitialize_steps=0`` patches the
    same way, and with 1 the asyncio client follows the redirection on the unrefreshed map until "TTL exhausted".

    The only way in is this private hook (redis-py calls it from ``get_node_from_slot``), so it is pinned:
    pyproject names redis==5.3.1, and tests/services/test_redis_py_pins.py fails on a redis-py whose hook is not
    the one this was written against (gone, another signature, another body). Delete this class on redis-py 7.2+.
    """

    __slots__ = ()

    def _update_moved_slots(self) -> None:
        moved = self._moved_exception
        owners = self.slots_cache.get(moved.slot_id)
        if owners and owners[0].name == get_node_name(moved.host, moved.port):
            owners[0].server_type = PRIMARY
            self._moved_exception = None
            return
        super()._update_moved_slots()


class _GentleNodesManager(_MovedToItsOwner):
    """Keeps one ClusterNode object per address across slot-map refreshes.

    redis-py builds new node objects for every node at each refresh and drops the old ones: their
    connections were cut (or garbage-collected) under the commands still using them, so a refresh caused
    by one dead node broke commands on the live ones ("Connection lost", "TCPTransport closed"). Here an
    address that is still in the Cluster keeps its object (and its connections); only a node gone from
    the map is closed, once its connections are idle.
    """

    __slots__ = ()  # the same layout, so the client's manager can take this class

    async def initialize(self) -> None:
        await super().initialize()
        # The slot map refers to the refresh's new objects: point it at the kept ones.
        kept = self.nodes_cache
        remapped: dict[int, list] = {}
        for slot, nodes in self.slots_cache.items():
            shared = remapped.get(id(nodes))
            if shared is None:
                shared = remapped[id(nodes)] = [kept.get(node.name, node) for node in nodes]
            self.slots_cache[slot] = shared
        if self.default_node is not None:
            self.default_node = kept.get(self.default_node.name, self.default_node)

    def set_nodes(self, old: dict, new: dict, remove_old: bool = False) -> None:
        for name in list(old):
            if remove_old and name not in new:
                _close_when_idle(old[name])
                dict.pop(old, name)
        for name, node in new.items():
            current = old.get(name)
            if current is None:
                old[name] = node
            elif current is not node:
                current.server_type = node.server_type  # a replica promoted, a primary demoted


def _close_when_idle(node: ClusterNode) -> None:
    """Disconnect a replaced node object once no command uses its connections (or after IDLE_CLOSE_WAIT_S)."""

    async def close() -> None:
        deadline = asyncio.get_running_loop().time() + IDLE_CLOSE_WAIT_S
        while len(node._free) < len(node._connections) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        await node.disconnect()

    task = asyncio.get_running_loop().create_task(close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


class HiredisPackConnection(Connection):
    def pack_command(self, *args):  # noqa: ANN002, ANN201 - same signature as redis-py's
        # redis-py accepts a first argument like "CLIENT SETNAME" and splits it; keep that behaviour.
        if args and isinstance(args[0], str) and " " in args[0]:
            args = (*args[0].split(), *args[1:])
        return [hiredis.pack_command(args)]

    async def send_packed_command(self, command: object, check_health: bool = True) -> None:
        """redis-py's send, with the same timeout and errors, but no task per send.

        With a socket timeout redis-py sends through ``asyncio.wait_for``, which on Python 3.11 runs every send as
        a task of its own (created, scheduled, stepped, its timer armed and cancelled): 17-21% of the deciding
        gateway's samples under bench e2e. A write the socket takes whole cannot block, so only a write that
        leaves bytes in the transport's buffer waits for the drain, under ``asyncio.timeout`` (a timer, no task).
        """
        if not self.socket_timeout or not self.is_connected:
            return await super().send_packed_command(command, check_health)  # type: ignore[arg-type]
        if check_health:
            await self.check_health()
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        try:
            writer = self._writer
            writer.writelines(command)  # type: ignore[arg-type]
            if writer.transport.get_write_buffer_size():
                async with asyncio.timeout(self.socket_timeout):
                    await writer.drain()
            else:
                await writer.drain()  # returns at once (raises if the connection was lost)
        except TimeoutError:
            await self.disconnect(nowait=True)
            raise exceptions.TimeoutError("Timeout writing to socket") from None
        except OSError as error:
            await self.disconnect(nowait=True)
            raise exceptions.ConnectionError(f"Error while writing to socket: {error}") from error
        except BaseException:
            await self.disconnect(nowait=True)  # sent in part, or cancelled mid-send: its state is unknown
            raise


def reconnecting(retries: int = 4, base_s: float = 0.05, cap_s: float = 1.0) -> dict[str, object]:
    """Options for ``connect``: a command whose connection failed reconnects and is sent again, up to
    ``retries`` times with exponential backoff (redis-py's Retry), before the error reaches the caller.

    Only for callers whose commands are safe to send twice: reads, and writes guarded by an id or a
    compare-and-set (the projector's commit script). Not for the engine: a lost XREADGROUP answer must
    reach it, so it takes its shards over again and re-reads what was delivered but not seen.
    """
    # OSError too: a refused connect surfaces as the socket's own error, and redis-py 5 takes a pooled
    # connection (and reconnects it) before its command retry starts; the connect has its own retry.
    return {"retry": Retry(ExponentialBackoff(cap=cap_s, base=base_s), retries),
            "retry_on_error": [exceptions.ConnectionError, exceptions.TimeoutError, OSError]}


def seed_urls(url: str) -> list[str]:
    """The node URLs of ``url``: one, or several separated by commas (a Cluster's seed nodes)."""
    return [part.strip() for part in url.split(",") if part.strip()]


def redacted_url(url: str) -> str:
    """``url`` (one node, or several separated by commas) with its password shown as ``***``: what is printed or
    logged of a Redis URL (the embedded Redis's carries its password, services/embedded_redis.py)."""
    shown = []
    for part in url.split(","):
        parsed = urlsplit(part.strip())
        if parsed.password is None:
            shown.append(part)
            continue
        host = parsed.netloc.rpartition("@")[2]
        shown.append(parsed._replace(netloc=f"{parsed.username or ''}:***@{host}").geturl())
    return ",".join(shown)


def live_seed(url: str, timeout_s: float = 2.0) -> str:
    """The first node of ``url`` that answers PING (a process checks its Redis before it starts).

    Raises the last node's error when none answers.
    """
    import redis  # noqa: PLC0415 - the synchronous client, for this one check at start

    error: Exception | None = None
    for seed in seed_urls(url):
        client = redis.Redis.from_url(seed, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
            return seed
        except redis.RedisError as failed:
            error = failed
        finally:
            client.close()
    raise error or ValueError("no Redis URL given")


class PoolExhausted(exceptions.ConnectionError):
    """Every connection of a bounded pool stayed busy for the whole wait: this process is overloaded (refuse
    with 503 ``overloaded``), the store is not unreachable."""


def pool_exhausted(error: BaseException) -> bool:
    """True for a ``BoundedPool`` with no free connection: overload, not a store outage."""
    return isinstance(error, PoolExhausted)


class BoundedPool(aioredis.BlockingConnectionPool):
    """A pool of at most ``max_connections`` connections: a caller waits up to ``timeout`` seconds for a free one,
    then ``PoolExhausted``; ``close_idle`` closes the connections that sat unused for a while.

    redis-py's default pool opens a connection for every concurrent command and keeps it for good: a burst
    (a thousand live feeds, each blocking on its own read) left a thousand Redis clients, and file descriptors
    in both processes, after it ended. A closed connection stays in the pool and reconnects when next taken.
    Built on the pool's public methods only: it keeps its own record of the connections released and when.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.idle_since: dict[Connection, float] = {}  # the connections released and not taken since: when

    async def get_connection(self, command_name: object = None, *keys: object, **options: object) -> Connection:
        try:
            connection = await super().get_connection()
        except exceptions.ConnectionError as error:
            if isinstance(error.__cause__, asyncio.TimeoutError):  # redis-py's "No connection available."
                raise PoolExhausted(f"all {self.max_connections} Redis connections of this process stayed busy "
                                    f"for {self.timeout} s") from None
            raise
        self.idle_since.pop(connection, None)
        return connection

    async def release(self, connection: Connection) -> None:
        self.idle_since[connection] = time.monotonic()
        await super().release(connection)

    async def close_idle(self, idle_s: float) -> int:
        """Close the connections unused for ``idle_s`` seconds or more; how many were closed.

        Each closes where it lies in the pool, without a wait (``disconnect(nowait=True)`` runs to its end without
        yielding to the event loop); a closed one reconnects when next taken, and the pool hands out the latest
        released first, so the long idle ones are the last taken. One being handed out at that moment (taken from the
        pool, its check not yet done: still in the record) is closed under its taker, whose check then connects it
        again (redis-py's ``ensure_connection``): a reconnect, not a failure."""
        cutoff = time.monotonic() - idle_s
        idle = [connection for connection, since in self.idle_since.items()
                if since < cutoff and connection.is_connected]
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.disconnect(nowait=True)
        return len(idle)


async def close_idle_connections(pool: BoundedPool, idle_s: float) -> None:
    """Run ``pool.close_idle(idle_s)`` every ``idle_s / 2`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(max(idle_s / 2, 0.1))
        await pool.close_idle(idle_s)


def connect(url: str, cluster: bool = False, max_connections: int | None = None, pool_wait_s: float = 1.0,
            **options: object) -> aioredis.Redis:
    """An asyncio client for ``url``; ``cluster`` uses the Cluster client, which routes by hash tag.

    ``max_connections`` bounds the connections of one server: a ``BoundedPool`` (a command waits up to
    ``pool_wait_s`` for a free connection, then ``PoolExhausted``). None, and on a Cluster (see below):
    redis-py's unbounded default.

    On a Cluster ``url`` may name several nodes separated by commas (``redis://a:7000,redis://b:7001``):
    they are the client's startup nodes, so it starts (and refreshes its slot map) while any one answers.
    Options of the first URL (scheme, password, database) apply to every node.
    ``options`` go to the client as they are (e.g. socket_timeout, socket_connect_timeout, or
    ``**reconnecting()``).
    """
    if cluster:
        # Not bounded per node: redis-py's Cluster client keeps a connection whose send failed out of its node's
        # pool for good, and raises MaxConnectionsError without refreshing its slot map, so a dead primary's
        # leaked connections pinned its shards to it after the promotion (tests/cluster/test_cluster_failover.py:
        # 11.7 s without acknowledgements against 1.3 s).
        seeds = seed_urls(url)
        if len(seeds) == 1:
            return FailoverCluster.from_url(seeds[0], **options)  # type: ignore[return-value]
        nodes = [ClusterNode(parsed.hostname or "127.0.0.1", parsed.port or 6379)
                 for parsed in map(urlsplit, seeds)]
        return FailoverCluster.from_url(seeds[0], startup_nodes=nodes, **options)  # type: ignore[return-value]
    if url.startswith("redis://"):
        options["connection_class"] = HiredisPackConnection
    if max_connections is not None:
        pool = BoundedPool.from_url(url, max_connections=max_connections, timeout=pool_wait_s, **options)
        return aioredis.Redis.from_pool(pool)
    return aioredis.Redis.from_url(url, **options)


async def read_or_stop(client: aioredis.Redis, streams: dict, block_ms: int, stop: asyncio.Event) -> None:
    """Wait for an entry past ``streams``' cursors (one blocking XREAD of ``block_ms``) or for ``stop``, whichever
    comes first: an idle service's wait that costs nothing until something moves. A read's error is raised."""
    waits = [asyncio.ensure_future(client.xread(streams, count=1, block=block_ms)), asyncio.ensure_future(stop.wait())]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()  # a read cut short drops its connection (redis-py): the pool opens another
    for finished in done:
        finished.result()
