"""A throwaway three-node Redis Cluster on loopback, for the store contract suite on a real Cluster."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from almanac.services.embedded_redis import find_redis_server, free_port

SLOTS = 16384


def _start_node(binary: str, node_dir: Path, attempts: int = 5) -> tuple[int, subprocess.Popen]:
    """One cluster-enabled server on a free port; another port if the first was taken meanwhile."""
    node_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        port = free_port()
        process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(node_dir),
             "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
             "--save", "", "--appendonly", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline:
            try:
                client.ping()
                client.close()
                return port, process
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        process.kill()
        process.wait()
    raise RuntimeError(f"could not start a cluster node after {attempts} attempts")


@contextlib.contextmanager
def local_cluster(data_dir: Path, nodes: int = 3) -> Iterator[str]:
    """Start ``nodes`` masters, meet them, spread the slots, wait for ``cluster_state:ok``; yield a URL."""
    binary = find_redis_server()
    ports: list[int] = []
    processes: list[subprocess.Popen] = []
    try:
        for index in range(nodes):
            port, process = _start_node(binary, data_dir / f"node-{index}")
            ports.append(port)
            processes.append(process)
        clients = [redis.Redis(host="127.0.0.1", port=port) for port in ports]
        per_node = SLOTS // nodes
        for index, client in enumerate(clients):
            first = index * per_node
            last = SLOTS - 1 if index == nodes - 1 else first + per_node - 1
            client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        for port in ports[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port)
        deadline = time.monotonic() + 20
        while not all(c.execute_command("CLUSTER INFO").get("cluster_state") == "ok" for c in clients):
            if time.monotonic() > deadline:
                raise RuntimeError("the local Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        for client in clients:
            client.close()
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for process in processes:
            process.kill()
            process.wait()
