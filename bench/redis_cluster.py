"""Throwaway Redis Clusters on loopback: cluster-enabled nodes on free ports, and a Cluster of primaries each with a
replica that can be killed (-9) and restarted. Used by `almanac bench failover` and by the test suite's Cluster
stories (tests/cluster_support.py)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import redis

from almanac.services.embedded_redis import find_redis_server, free_port

SLOTS = 16384


def node_command(binary: str, node_dir: Path, port: int, *extra: str) -> list[str]:
    """A cluster-enabled server's command line on ``port``, its bus on a second free port.

    Redis puts the cluster bus at port + 10000 unless told otherwise and refuses to start when that passes
    65535; a free port from the kernel's ephemeral range (up to 60999 here) does so about one time in five,
    so the bus gets its own free port instead.
    """
    return [binary, "--bind", "127.0.0.1", "--port", str(port), "--cluster-port", str(free_port()),
            "--dir", str(node_dir), "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
            "--save", "", "--daemonize", "no", *extra]


def spawn_node(command: list[str], node_dir: Path) -> subprocess.Popen:
    """Run a node in its own session, its log appended to ``node_dir/server.log`` for the failure message."""
    with (node_dir / "server.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_node(process: subprocess.Popen, port: int, seconds: float = 10) -> bool:
    """True once our node answers on ``port``; False if it exited first (its port was taken) or the time ran out.

    The answer must come from ``process`` itself (INFO's process_id): when another worker's node already holds
    the port, that node answers PING before ours fails to bind, and the slots would be given to the wrong
    cluster ("Slot 5461 is already busy", as a CI run once found).
    """
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + seconds
    try:
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if client.info("server").get("process_id") == process.pid:
                    return True
                return False
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def start_node(binary: str, node_dir: Path, *extra: str, attempts: int = 5) -> tuple[int, subprocess.Popen, list[str]]:
    """One cluster-enabled server on free ports, tried again on other ports if they were taken meanwhile."""
    node_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        port = free_port()
        command = node_command(binary, node_dir, port, *extra)
        process = spawn_node(command, node_dir)
        if wait_for_node(process, port):
            return port, process, command
        process.kill()
        process.wait()
    log = (node_dir / "server.log").read_text(errors="replace")[-1500:]
    raise RuntimeError(f"could not start a cluster node after {attempts} attempts; its log ends:\n{log}")


class ReplicatedCluster:
    """A local Redis Cluster of primaries each with one replica (``redis-cli --cluster create``), on loopback.

    Nodes run with ``cluster-node-timeout`` 2000 ms and AOF, as the tooling notes measured: a replica is
    promoted about 4 s after its primary is killed. ``sync_delay_s``: the nodes' ``repl-diskless-sync-delay``
    (None: Redis's default, 5 s, which a primary waits before its first full sync to a replica, at the Cluster's
    start and when a killed node rejoins as a replica, so that more replicas can share one transfer).
    """

    def __init__(self, data_dir: Path, primaries: int = 3, node_timeout_ms: int = 2000,
                 sync_delay_s: int | None = None) -> None:
        self.data_dir = data_dir
        self.primaries = primaries
        self.node_timeout_ms = node_timeout_ms
        self.sync_delay_s = sync_delay_s
        self.processes: dict[int, subprocess.Popen] = {}
        self._commands: dict[int, tuple[list[str], Path]] = {}  # each node's command line and folder, to restart it

    @property
    def url(self) -> str:
        """REDIS_URL naming every node as a seed (comma-separated): the clients start while any one answers."""
        return ",".join(f"redis://127.0.0.1:{port}/0" for port in self.processes)

    def start(self) -> None:
        binary = find_redis_server()
        delay = () if self.sync_delay_s is None else ("--repl-diskless-sync-delay", str(self.sync_delay_s))
        for index in range(2 * self.primaries):
            node_dir = self.data_dir / f"node-{index}"
            port, process, command = start_node(
                binary, node_dir,
                "--cluster-node-timeout", str(self.node_timeout_ms), "--appendonly", "yes", *delay)
            self.processes[port] = process
            self._commands[port] = (command, node_dir)
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.processes),
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-2000:]} {created.stderr}")
        deadline = time.monotonic() + 30
        while not self._settled():
            if time.monotonic() > deadline:
                raise RuntimeError("the replicated cluster did not settle (state ok, every replica linked)")
            time.sleep(0.1)

    def _settled(self) -> bool:
        for port in self.alive():
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
            try:
                if client.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                    return False
                info = client.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return len(self.roles()["master"]) == self.primaries

    def alive(self) -> list[int]:
        return [port for port, process in self.processes.items() if process.poll() is None]

    def roles(self) -> dict[str, dict[int, int | None]]:
        """{"master": {port: None}, "slave": {port: its primary's port}} as a live node sees them."""
        client = redis.Redis(host="127.0.0.1", port=self.alive()[0], socket_timeout=1, decode_responses=True)
        try:
            nodes = client.execute_command("CLUSTER NODES")
        finally:
            client.close()
        lines = nodes.splitlines() if isinstance(nodes, str) else [
            f"{node_id} {address} {','.join(info['flags']) if isinstance(info['flags'], list) else info['flags']} "
            f"{info['master_id']}" for address, info in nodes.items() for node_id in [info["node_id"]]]
        by_id: dict[str, int] = {}
        parsed = []
        for line in lines:
            node_id, address, flags, master = line.split()[:4]
            port = int(address.split("@")[0].rsplit(":", 1)[1])
            by_id[node_id] = port
            parsed.append((port, flags, master))
        roles: dict[str, dict[int, int | None]] = {"master": {}, "slave": {}}
        for port, flags, master in parsed:
            if "fail" in flags or port not in self.alive():
                continue
            if "master" in flags:
                roles["master"][port] = None
            elif "slave" in flags:
                roles["slave"][port] = by_id.get(master)
        return roles

    def kill(self, port: int) -> None:
        """kill -9 one node."""
        process = self.processes[port]
        process.kill()
        process.wait()

    def restart(self, port: int) -> None:
        """Start a killed node again, same port and files: a primary that was failed over rejoins as a replica."""
        self.processes[port] = spawn_node(*self._commands[port])

    def wait_replicated(self, primary: int, timeout_s: float = 30.0) -> float:
        """Seconds until ``primary`` has a connected replica whose link is up."""
        started = time.monotonic()
        client = redis.Redis(host="127.0.0.1", port=primary, socket_timeout=1)
        try:
            while time.monotonic() - started < timeout_s:
                try:
                    info = client.info("replication")
                    if any(isinstance(value, dict) and value.get("state") == "online"
                           for key, value in info.items() if key.startswith("slave")):
                        return time.monotonic() - started
                except redis.RedisError:
                    pass
                time.sleep(0.05)
        finally:
            client.close()
        raise RuntimeError(f"127.0.0.1:{primary} had no online replica within {timeout_s} s")

    def wait_promoted(self, replica: int, timeout_s: float = 30.0) -> float:
        """Seconds until ``replica`` is a primary (as every live node sees it) and the cluster state is ok."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if replica in self.roles()["master"] and self._state_ok():
                return time.monotonic() - started
            time.sleep(0.05)
        raise RuntimeError(f"127.0.0.1:{replica} was not promoted within {timeout_s} s")

    def _state_ok(self) -> bool:
        for port in self.alive():
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
            try:
                if client.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


class ClusterDown:
    """When a live node said the whole Cluster was down (``cluster_state:fail``), polled from a thread.

    With Redis's default ``cluster-require-full-coverage yes`` every node refuses every key (CLUSTERDOWN) from the
    moment the dead primary is marked failed until its replica is promoted: the shards on live nodes then take
    nothing either, whatever the engine does, and how long that lasts is the Cluster's own failure detection and
    election, which a loaded host stretches (a stall of 5.15-5.9 s on a CI host at load 12 against 1.55 s quiet).
    """

    def __init__(self, port: int) -> None:
        self.windows: list[list[float]] = []  # [first seen down, first seen ok again] (monotonic)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(port,), daemon=True)
        self._thread.start()

    def _watch(self, port: int) -> None:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        try:
            while not self._stop.is_set():
                try:
                    down = client.execute_command("CLUSTER INFO").get("cluster_state") != "ok"
                except redis.RedisError:
                    down = None  # no answer: says nothing of the Cluster
                now = time.monotonic()
                if down and not (self.windows and len(self.windows[-1]) == 1):
                    self.windows.append([now])
                elif down is False and self.windows and len(self.windows[-1]) == 1:
                    self.windows[-1].append(now)
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.windows and len(self.windows[-1]) == 1:
            self.windows[-1].append(time.monotonic())

    def within(self, start: float, end: float) -> float:
        """Seconds of [start, end] during which the Cluster was seen down."""
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.windows)
