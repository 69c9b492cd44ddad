"""The whole stack on a real three-node Redis Cluster: engine, projector and gateway processes, games over HTTP.

Every process gets REDIS_URL = one node and REDIS_CLUSTER=true. Rooms are named so that they land on
all three nodes; each rule-set is played by its policy through the gateway; then the outcomes, the
verification of every room, and the read models (equal to what `almanac projections rebuild` makes)
are checked.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest
from projection_games import dump_models
from redis.cluster import RedisCluster as SyncCluster

from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.services.embedded_redis import free_port
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner
from almanac.services.redis_client import connect
from almanac.storage.keys import Keys

CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"
SECRET = "cluster-test-secret-" + "x" * 20
MOVES = 6

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("clusters")]  # with the failover test: tests/conftest.py


class ClusterStack:
    def __init__(self, redis_url: str, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "REDIS_URL": redis_url, "REDIS_CLUSTER": "true", "ALMANAC_DATA_DIR": str(data_dir),
                    "ALMANAC_HTTP_PORT": str(self.port), "ALMANAC_SECRET": SECRET, "ALMANAC_LOG_LEVEL": "warning",
                    "ALMANAC_LOG_FORMAT": "json", "ALMANAC_COMMAND_TIMEOUT_MS": "10000"}
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        with open(self.data_dir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen([sys.executable, "-c", CHILD, name], env=self.env,
                                                    stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        path = self.data_dir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def wait_healthy(self, timeout_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        health: dict = {}
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}: {self.log(name)}")
            try:
                health = httpx.get(f"{self.url}/health", timeout=2).json()
                if (health["status"] == "ok" and health["engine"]["shards_held"] == 16
                        and health["projector"]["ok"]):
                    return health
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"not healthy: {health} {self.log('engine')} {self.log('projector')} {self.log('gateway')}")

    def stop(self) -> None:
        for name in ("gateway", "engine", "projector"):
            process = self.processes.get(name)
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture(scope="module")
def stack(cluster_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStack]:
    nodes = SyncCluster.from_url(cluster_url)
    nodes.flushall()
    nodes.close()
    running = ClusterStack(cluster_url, tmp_path_factory.mktemp("cluster-stack"))
    for name in ("projector", "gateway"):  # the product's shape: the gateway holds the shards and decides
        running.start(name)
    try:
        running.wait_healthy()
        yield running
    finally:
        running.stop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rooms_across_nodes(cluster_url: str, rulesets: list[str], per_ruleset: int) -> dict[str, list[str]]:
    """Room names per rule-set, chosen so that the rooms cycle through the cluster's three nodes."""
    cluster = SyncCluster.from_url(cluster_url)
    keys = Keys(16)
    try:
        nodes = sorted(node.name for node in cluster.get_primaries())
        chosen: dict[str, list[str]] = {}
        index = 0
        for ruleset in rulesets:
            chosen[ruleset] = []
            for candidate in range(10_000):
                room = f"{ruleset}-{os.getpid()}-{candidate}"
                wanted = nodes[index % len(nodes)]
                if cluster.get_node_from_key(keys.events(room)).name == wanted:
                    chosen[ruleset].append(room)
                    index += 1
                    if len(chosen[ruleset]) == per_ruleset:
                        break
        return chosen
    finally:
        cluster.close()


def play_room(http: httpx.Client, auditor: str, ruleset: str, room: str) -> dict:
    """Create (and join) a room over HTTP, play MOVES rounds of the policy; what the answers were."""
    decider = registry.get(ruleset)
    players = ["alice", "bob"]
    options = {"players": players} if "players" in decider.options_type.__struct_fields__ else {}
    created = http.post("/rooms", json={"ruleset": ruleset, "player": "alice", "room": room, "options": options,
                                        "challenge": f"cluster-{ruleset}"})
    assert created.status_code == 201, created.text
    tokens = {"alice": created.json()["token"]}
    joined = http.post(f"/rooms/{room}/join", json={"player": "bob"})
    if joined.status_code == 200:
        tokens["bob"] = joined.json()["token"]
    else:
        assert joined.status_code == 422 and joined.json()["code"] == "no_seat", joined.text
    again = http.post(f"/rooms/{room}/join", json={"player": "alice"})
    assert again.status_code == 422 and again.json()["code"] == "already_joined", again.text
    unknown = http.post(f"/rooms/{room}/commands", headers=auth(tokens["alice"]), json={"command": {"kind": "fly"}})
    assert unknown.status_code == 422 and unknown.json()["code"] == "unknown_command", unknown.text

    policy = registry.manifest(ruleset).policy  # the default version's bot, as the room is the default version
    accepted = refused = 0
    last_version = created.json().get("version", 0)
    for step in range(MOVES):
        for player, token in tokens.items():
            state = http.get(f"/rooms/{room}/state", headers=auth(auditor)).json()["state"]
            game = msgspec.convert(state["game"], decider.state_type, strict=False)
            command = policy(game, player, Dice(b"cluster", room, step), int(time.time() * 1000))
            if command is None:
                continue
            body = {"command": codec.encode_command(command), "command_id": f"{player}-{step}"}
            answer = http.post(f"/rooms/{room}/commands", headers=auth(token), json=body)
            assert answer.status_code in (200, 422), answer.text
            if answer.status_code == 200:
                accepted += 1
                result = answer.json()
                assert result["version"] >= result["first_version"] > last_version
                last_version = result["version"]
                # A retry of the same command id is answered the same, and applied once.
                retry = http.post(f"/rooms/{room}/commands", headers=auth(token), json=body)
                assert retry.status_code == 200 and retry.json()["version"] == result["version"], retry.text
            else:
                refused += 1
                assert answer.json()["code"], answer.text
    return {"tokens": tokens, "accepted": accepted, "refused": refused, "version": last_version}


def test_games_of_every_ruleset_on_a_cluster_answer_verify_and_project(stack: ClusterStack, cluster_url: str) -> None:
    rulesets = registry.installed()
    auditor = TokenSigner(SECRET, 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
    placed = rooms_across_nodes(cluster_url, rulesets, per_ruleset=2)
    with httpx.Client(base_url=stack.url, timeout=20) as http:
        played = {room: play_room(http, auditor, ruleset, room) for ruleset in rulesets for room in placed[ruleset]}
        assert sum(result["accepted"] for result in played.values()) >= 2 * len(played)

        for ruleset in rulesets:
            for room in placed[ruleset]:
                result = played[room]
                report = http.get(f"/rooms/{room}/verification", headers=auth(result["tokens"]["alice"])).json()
                assert report["ok"] is True and report["room"] == room, report
                events = http.get(f"/rooms/{room}/events", headers=auth(auditor)).json()
                assert events["events"][-1]["version"] == result["version"] or result["accepted"] == 0
                summary = http.get(f"/rooms/{room}").json()
                assert summary["ruleset"] == ruleset

        # The projector catches up (read-your-writes through the read models), then equals a rebuild.
        deadline = time.monotonic() + 15
        while True:
            status = http.get("/health").json()["projector"]
            if status["caught_up"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status["caught_up"], status
        listed = {row["room"] for row in http.get("/rooms").json()["rooms"]}
        assert set(played) <= listed

    async def models() -> dict:
        client = connect(cluster_url, cluster=True)
        try:
            return await dump_models(client)
        finally:
            await client.aclose()

    live = asyncio.run(models())
    rebuilt = subprocess.run([sys.executable, "-c", CHILD, "projections", "rebuild"], env=stack.env,
                             capture_output=True, text=True, timeout=60)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"from {len(played)} room(s)" in rebuilt.stdout
    assert asyncio.run(models()) == live

    # The rooms, and so their events, commands and read-model rows, sit on all three nodes.
    cluster = SyncCluster.from_url(cluster_url)
    try:
        keys = Keys(16)
        assert len({cluster.get_node_from_key(keys.events(room)).name for room in played}) == 3
        assert all(cluster.xlen(keys.events(room)) >= 2 for room in played)
        assert len({cluster.get_node_from_key(key).name for key in live}) == 3
    finally:
        cluster.close()
    for name, process in stack.processes.items():
        assert process.poll() is None, f"{name} died: {stack.log(name)}"
