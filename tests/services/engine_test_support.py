"""Start and stop real engine processes for tests, submit commands, wait for conditions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from outcome_bus import submit_and_wait
from waiting import wait_for  # noqa: F401 - the engine tests' one way to wait

from almanac.services.bus import submit
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.keys import Keys, engine_heartbeat_key, engine_stats_key

HELPER = Path(__file__).with_name("engine_process_helper.py")
KEYS = Keys(16)


class EngineProcess:
    """One `engine` OS process; its log goes to a file so a full pipe never blocks it."""

    def __init__(self, redis_url: str, name: str, log_dir: Path, **env: str) -> None:
        self.name = name
        self.log_path = log_dir / f"engine-{name}-{time.monotonic_ns()}.log"
        environment = {
            **os.environ,
            "REDIS_URL": redis_url,
            "ALMANAC_ENGINE_NAME": name,
            "ALMANAC_LEASE_MS": "800",
            "ALMANAC_LOG_FORMAT": "json",
            "ALMANAC_LOG_LEVEL": "info",
            **env,
        }
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen([sys.executable, str(HELPER)], env=environment, stdout=self._log,
                                        stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self._log.close()

    def terminate(self, timeout_s: float = 10) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout_s)
        self._log.close()
        return code

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                lines.append({"raw": line})
        return lines


async def heartbeat(client: aioredis.Redis, name: str) -> dict[str, Any] | None:
    value = await client.get(engine_heartbeat_key(name))
    return None if value is None else json.loads(value)


async def held_shards(client: aioredis.Redis, name: str) -> list[int]:
    beat = await heartbeat(client, name)
    return beat["shards_held"] if beat else []


async def engine_metrics(client: aioredis.Redis, name: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in (await client.hgetall(engine_stats_key(name))).items()}


def record(room: str, player: str, body: dict[str, Any], command_id: str, time_ms: int | None = None) -> CommandRecord:
    stamp = int(time.time() * 1000) if time_ms is None else time_ms
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=stamp, body=body)


async def send(client: aioredis.Redis, room: str, player: str, body: dict[str, Any], command_id: str,
               timeout_s: float = 10, time_ms: int | None = None) -> Outcome:
    outcome = await submit_and_wait(client, KEYS, record(room, player, body, command_id, time_ms), timeout_s)
    assert outcome is not None, f"no outcome for {command_id} within {timeout_s} s"
    return outcome


async def send_nowait(client: aioredis.Redis, room: str, player: str, body: dict[str, Any], command_id: str,
                      time_ms: int | None = None) -> None:
    await submit(client, KEYS, record(room, player, body, command_id, time_ms))
