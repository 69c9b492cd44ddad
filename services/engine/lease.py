"""Shard leases in Redis (SET NX PX + compare-and-renew), so every shard has one active engine."""

from __future__ import annotations

import asyncio
import os
import secrets
import time

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

from almanac.services.redis_client import CLUSTER_ERRORS
from almanac.storage.keys import lease_key

# Renew or release only a lease we still hold: a lapsed lease taken by another engine stays theirs.
RENEW_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class ShardLeases:
    """The leases one engine process wants; ``tick()`` renews the held ones and tries the free ones."""

    def __init__(self, client: aioredis.Redis, shards: list[int], name: str, lease_ms: int,
                 prefix: str = "alm") -> None:
        self.client = client
        self.shards = shards
        self.lease_ms = lease_ms
        self.prefix = prefix
        # The token names the process, so a restarted engine of the same name still waits for the lapse.
        self._name = name
        self.token = self._new_token()
        self._valid_until: dict[int, float] = {}
        # ``safely_held()``'s answer and the monotonic time it stops being true (a margin running out), so
        # the consume loop does not test every lease for every batch; dropped whenever a lease changes.
        self._safe: list[int] | None = None
        self._safe_until = 0.0
        # True after a tick in which a lease's node did not answer: the caller ticks again soon, so the
        # lease is renewed (or taken again) as soon as a replica is promoted, not a third of a lease later.
        self.unsettled = False
        # No free lease is taken before this monotonic time (``step_aside``).
        self._acquire_from = 0.0

    def _new_token(self) -> str:
        return f"{self._name}|{os.getpid()}|{secrets.token_hex(4)}"

    @property
    def held(self) -> list[int]:
        return sorted(self._valid_until)

    def holds(self, shard: int) -> bool:
        """True while the lease is safely ours: a quarter lease of margin for the batch about to run."""
        until = self._valid_until.get(shard)
        return until is not None and time.monotonic() + self.lease_ms / 4000 < until

    def safely_held(self) -> list[int]:
        """Every shard ``holds`` is true of now, in order; the same list object until a lease changes or
        its margin runs out (callers may cache what they derive from it by identity). Do not modify it."""
        now = time.monotonic()
        if self._safe is None or now >= self._safe_until:
            margin = self.lease_ms / 4000
            safe = {shard: until for shard, until in self._valid_until.items() if now + margin < until}
            self._safe = sorted(safe)
            # A shard held but not safely cannot become safe before a tick renews it (``changed``).
            self._safe_until = min(safe.values(), default=float("inf")) - margin
        return self._safe

    def changed(self) -> None:
        """A lease was renewed, taken, lost or given back: ``safely_held`` recomputes."""
        self._safe = None

    async def tick(self) -> tuple[list[int], list[int]]:
        """Renew held leases, try to take free ones; returns (newly acquired, lost)."""
        started = time.monotonic()
        token = self.token  # the refused ones below are released with the token they were taken with
        renewing = set(self._valid_until)
        # Held leases are renewed; free ones are tried unless this engine stepped aside a while.
        shards = [shard for shard in self.shards if shard in renewing or started >= self._acquire_from]
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for shard in shards:
                    self._queue_tick(pipe, shard, shard in renewing)
                results = await pipe.execute()
        except (RedisConnectionError, RedisTimeoutError, OSError, *CLUSTER_ERRORS):
            if isinstance(self.client, aioredis.Redis):
                raise
            # A Cluster pipeline fails whole when one node is down: each lease on its own, so the leases
            # on the live nodes are renewed (a lease whose node is down is neither renewed nor lost now).
            results = await self._tick_one_by_one(shards, renewing)
        acquired: list[int] = []
        lost: list[int] = []
        refused: list[int] = []
        until = started + self.lease_ms / 1000
        self.unsettled = False
        for shard, result in zip(shards, results, strict=True):
            if isinstance(result, Exception):
                self.unsettled = True
                continue
            if shard in renewing:
                if shard not in self._valid_until:
                    continue  # given back meanwhile (``step_aside``): whatever the renewal said, it is not ours
                if result == 1:
                    self._valid_until[shard] = until
                else:
                    del self._valid_until[shard]
                    lost.append(shard)
            elif result and time.monotonic() < self._acquire_from:
                refused.append(shard)  # taken by a tick that was on its way when this engine stepped aside
            elif result:
                self._valid_until[shard] = until
                acquired.append(shard)
        self.changed()
        if refused:
            async with self.client.pipeline(transaction=False) as pipe:
                for shard in refused:
                    pipe.eval(RELEASE_SCRIPT, 1, lease_key(shard, self.prefix), token)
                await pipe.execute(raise_on_error=False)
        return acquired, lost

    def _queue_tick(self, pipe, shard: int, renew: bool) -> None:  # noqa: ANN001 - a pipeline of either client
        key = lease_key(shard, self.prefix)
        if renew:
            # EVAL, not a registered script: a Cluster pipeline neither loads scripts nor may be
            # awaited mid-build (awaiting it clears its queue). The script is a few bytes.
            pipe.eval(RENEW_SCRIPT, 1, key, self.token, self.lease_ms)
        else:
            pipe.set(key, self.token, nx=True, px=self.lease_ms)

    async def _tick_one_by_one(self, shards: list[int], renewing: set[int]) -> list:
        calls = [self.client.eval(RENEW_SCRIPT, 1, lease_key(shard, self.prefix), self.token, self.lease_ms)
                 if shard in renewing
                 else self.client.set(lease_key(shard, self.prefix), self.token, nx=True, px=self.lease_ms)
                 for shard in shards]
        results = await asyncio.gather(*calls, return_exceptions=True)
        if all(isinstance(result, Exception) for result in results):
            raise next(result for result in results if isinstance(result, Exception))
        return results

    async def release_all(self) -> None:
        """Give the leases back at a graceful stop, so a standby takes over at once."""
        held = list(self._valid_until)
        self._valid_until.clear()
        self.changed()
        if not held:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in held:
                pipe.eval(RELEASE_SCRIPT, 1, lease_key(shard, self.prefix), self.token)
            await pipe.execute()

    async def step_aside(self, seconds: float) -> None:
        """Give every lease back and take no free one for ``seconds``: another engine may serve them better.

        The leases taken after it carry a new token. A release Redis did not answer (stopped, paused, the connection
        cut: the error is raised) may still run later, after this engine took a shard again once the hold-off was
        over (its bytes sat in a socket while its connection was replaced): with the old token it names none of them.
        """
        self._acquire_from = time.monotonic() + seconds
        try:
            await self.release_all()
        finally:
            self.token = self._new_token()

    async def holder(self, shard: int) -> str | None:
        value = await self.client.get(lease_key(shard, self.prefix))
        return None if value is None else value.decode()
