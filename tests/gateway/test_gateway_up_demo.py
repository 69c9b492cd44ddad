"""`almanac up` on the test Redis, then `almanac demo` against it: every game verifies; a dead child comes back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import redis
from gateway_stack import CHILD

from almanac.services.embedded_redis import pid_alive
from almanac.services.redis_client import redacted_url


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def read_up_file(data_dir: Path) -> dict | None:
    try:
        return json.loads((data_dir / "up.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def test_up_then_demo_passes_and_up_restarts_and_stops_its_children(redis_url: str, tmp_path: Path) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    password = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs.get("password")
    project = tmp_path / "project"
    data_dir = project / ".almanac"  # the default data directory's name, in the project where `up` runs
    project.mkdir()
    env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_DATA_DIR": str(data_dir), "ALMANAC_HTTP_PORT": "0",
           "ALMANAC_LOG_LEVEL": "info", "ALMANAC_LOG_FORMAT": "json"}
    up = subprocess.Popen([sys.executable, "-c", CHILD, "up"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=project)
    try:
        info = wait_for(lambda: read_up_file(data_dir), 40, "almanac up to be ready")
        # The deployment shape: a gateway that decides the commands of its shards, a projector, no engine process;
        # and the archiver, on by default
        children = set(info["children"])
        assert {"projector", "gateway", "archiver"} <= children <= {"projector", "gateway", "notifier", "archiver", "bots"}
        assert info["auditor_token"]
        # The archiver is background work: it runs below the command path's CPU priority (a wave of ended rooms moved
        # beside a gateway at capacity took its CPU from the commands), the gateway at the priority `up` has
        gateway_niceness = os.getpriority(os.PRIO_PROCESS, info["children"]["gateway"])
        assert gateway_niceness == os.getpriority(os.PRIO_PROCESS, up.pid)
        archiver = info["children"]["archiver"]
        assert os.getpriority(os.PRIO_PROCESS, archiver) == min(19, gateway_niceness + 10)
        autogroup = Path(f"/proc/{archiver}/autogroup")
        if autogroup.exists():  # sessions weighed by their own niceness first: the archiver's session is its own
            assert autogroup.read_text().split()[-1] == "10", autogroup.read_text()

        # A child that dies is started again: the gateway, killed holding every shard's lease, comes back and
        # (once the old leases lapse) holds them again.
        gateway_pid = info["children"]["gateway"]
        os.kill(gateway_pid, signal.SIGKILL)
        wait_for(lambda: (read_up_file(data_dir) or {}).get("children", {}).get("gateway") not in (None, gateway_pid),
                 15, "the gateway to be restarted")
        wait_for(lambda: _healthy(info["url"]), 30, "the restarted gateway to hold every shard")

        demo = subprocess.run([sys.executable, "-c", CHILD, "demo"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "every game verified" in demo.stdout
        assert "Using the running stack" in demo.stdout

        # An operator command run in a folder below the project, with no REDIS_URL and no data directory of its
        # own, reads the running stack's Redis (named by its up.json) and says so, rather than an empty one
        below = project / "docs" / "notes"
        below.mkdir(parents=True)
        bare = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS", "ALMANAC"))}
        verified = subprocess.run([sys.executable, "-c", CHILD, "verify", "--all"], env=bare, cwd=below,
                                  capture_output=True, text=True, timeout=120)
        assert verified.returncode == 0 and " rooms verified" in verified.stdout, verified.stdout + verified.stderr
        # (its Redis named with the password masked: the embedded Redis's URL carries one)
        assert f"using the running stack of {data_dir} ({redacted_url(redis_url)})" in " ".join(verified.stderr.split())
        assert not password or password not in verified.stderr
        # So do the commands that sign or read with the deployment's secrets: the auditor token printed there is one
        # the gateway accepts, and the key set is the deployment's, not a new data directory's beside the first
        token = subprocess.run([sys.executable, "-c", CHILD, "token", "--auditor"], env=bare, cwd=below,
                               capture_output=True, text=True, timeout=60)
        assert token.returncode == 0, token.stderr
        listed = httpx.get(f"{info['url']}/webhooks", headers={"Authorization": f"Bearer {token.stdout.strip()}"})
        assert listed.status_code == 200, listed.text
        keys = subprocess.run([sys.executable, "-c", CHILD, "keys"], env=bare, cwd=below, capture_output=True,
                              text=True, timeout=60)
        assert keys.returncode == 0, keys.stderr
        assert json.loads(keys.stdout) == httpx.get(f"{info['url']}/.well-known/almanac-keys.json").json()
        assert not (below / ".almanac").exists()
        # Where there is no data directory (named absolutely: no stack above is looked for), they refuse rather than
        # mint secrets nobody knows
        nowhere = tmp_path / "elsewhere"
        for command in (["token", "--auditor"], ["keys"]):
            refused = subprocess.run([sys.executable, "-c", CHILD, *command], env={**bare, "ALMANAC_DATA_DIR": str(nowhere)},
                                     cwd=below, capture_output=True, text=True, timeout=60)
            assert refused.returncode == 1 and "no data directory" in refused.stderr, (command, refused.stderr)
        assert not nowhere.exists()
        children = read_up_file(data_dir)["children"].values()
    finally:
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=30)
    assert "Almanac is up" in output and "Auditor token:" in output
    assert "HTTP Request" not in output  # the health polling until ready is silent, even at INFO
    assert not password or password not in output  # `up` names its Redis with the password masked
    assert up.returncode == 0, output
    assert not any(pid_alive(pid) for pid in children)
    assert read_up_file(data_dir) is None


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
