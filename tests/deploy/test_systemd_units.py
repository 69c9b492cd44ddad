"""The systemd units in deploy/systemd are hardened: systemd's own analyzer rates each under 4, and the
services still work under the strictest setting the units add (no writable-and-executable memory)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import msgspec
import pytest
from game_modules import game_module

from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.services.embedded_redis import EmbeddedRedis, free_port
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner
from almanac.services.settings import load_settings

choose_command = game_module("board@1", "policy").choose_command

UNITS = sorted((Path(__file__).resolve().parents[2] / "deploy" / "systemd").glob("*.service"))
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
MAX_EXPOSURE = 4.0
CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def exposure(unit: Path) -> float:
    """The overall exposure level `systemd-analyze security` gives the unit file (0 safe .. 10 unsafe)."""
    shown = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager", str(unit)],
                           capture_output=True, text=True, timeout=60)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", shown.stdout)
    assert match, shown.stdout[-2000:] + shown.stderr
    return float(match.group(1))


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)")
@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_each_unit_is_rated_under_four_by_systemd_analyze_security(unit: Path) -> None:
    assert exposure(unit) < MAX_EXPOSURE


def test_every_unit_keeps_its_state_in_its_own_state_directory() -> None:
    for unit in UNITS:
        text = unit.read_text()
        # ProtectSystem=strict makes everything read-only but the StateDirectory the service owns.
        assert "ProtectSystem=strict" in text and "StateDirectory=almanac" in text, unit.name
        assert "Environment=ALMANAC_DATA_DIR=/var/lib/almanac" in text, unit.name
        assert "MemoryDenyWriteExecute=yes" in text, unit.name


def test_the_gateway_unit_opens_more_files_than_its_feeds_and_redis_connections_can_hold() -> None:
    """Each live feed and each pooled Redis connection holds a file: under the unit's limit with the default caps,
    and room for as many HTTP clients again as the 1,024 that a flood of 512 feeds once exhausted."""
    gateway = next(unit for unit in UNITS if unit.name == "almanac-gateway@.service").read_text()
    match = re.search(r"^LimitNOFILE=(\d+)$", gateway, re.M)
    assert match, "the gateway unit sets no LimitNOFILE (systemd's default soft limit is 1,024)"
    settings = load_settings({})
    assert int(match.group(1)) >= settings.live_max_feeds + settings.redis_max_connections + 1_024


def deny_write_execute() -> None:
    """In the child before exec: the kernel refuses writable-and-executable memory from here on (Linux 6.3+),
    the same promise systemd's MemoryDenyWriteExecute= makes."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_MDWE) refused")


def mdwe_supported() -> bool:
    probe = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=deny_write_execute, capture_output=True)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_MDWE is Linux-only")
def test_the_projector_and_a_deciding_gateway_answer_a_command_with_write_execute_memory_denied(tmp_path: Path) -> None:
    try:
        supported = mdwe_supported()
    except (OSError, subprocess.SubprocessError):
        supported = False
    if not supported:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3+)")
    secret = "mdwe-test-secret-" + "x" * 32
    port = free_port()
    processes: dict[str, subprocess.Popen] = {}
    with EmbeddedRedis(tmp_path / "redis", persist=False) as redis_server:
        env = {**os.environ, "REDIS_URL": redis_server.url, "ALMANAC_DATA_DIR": str(tmp_path),
               "ALMANAC_HTTP_PORT": str(port), "ALMANAC_SECRET": secret, "ALMANAC_LOG_LEVEL": "warning"}
        try:
            for name in ("projector", "gateway"):  # the units' shape: the gateway decides its shards
                with open(tmp_path / f"{name}.log", "ab") as log:
                    processes[name] = subprocess.Popen([sys.executable, "-c", CHILD, name], env=env, stdout=log,
                                                       stderr=subprocess.STDOUT, preexec_fn=deny_write_execute)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                deadline, health = time.monotonic() + 30, None
                while time.monotonic() < deadline and (health is None or health.get("status") != "ok"):
                    assert all(p.poll() is None for p in processes.values()), logs(tmp_path)
                    try:
                        health = http.get("/health").json()
                    except httpx.HTTPError:
                        time.sleep(0.2)
                assert health and health["status"] == "ok", f"{health} {logs(tmp_path)}"
                created = http.post("/rooms", json={"ruleset": "board", "player": "alice", "room": "mdwe"})
                assert created.status_code == 201, created.text
                token = {"Authorization": f"Bearer {created.json()['token']}"}
                auditor = TokenSigner(secret, 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
                state = http.get("/rooms/mdwe/state", headers={"Authorization": f"Bearer {auditor}"}).json()["state"]
                game = msgspec.convert(state["game"], registry.get("board").state_type, strict=False)
                command = choose_command(game, "alice", Dice(b"mdwe", "mdwe", 0))
                answer = http.post("/rooms/mdwe/commands", headers=token,
                                   json={"command": codec.encode_command(command), "command_id": "first"})
                assert answer.status_code == 200, answer.text
            assert all(p.poll() is None for p in processes.values()), logs(tmp_path)
        finally:
            for process in processes.values():
                process.terminate()
            for process in processes.values():
                process.wait(timeout=30)


def logs(directory: Path) -> str:
    return "\n".join(f"{p.name}: {p.read_text(errors='replace')[-1500:]}" for p in directory.glob("*.log"))
