"""The registries of background processes (projectors, archivers): which registered one misses its heartbeat, which is gone.

A process adds its name to its registry set (``projectors_key``, ``archivers_key``) at every heartbeat, beside its
heartbeat key (with a TTL) and its stats hash (without one). Once the heartbeat key has expired, only the stats hash
tells how long ago the process last beat: ``seen`` puts that time (and the beat's TTL) among its stats. A process
missing for less than ``FORGET_AFTER_TTLS`` of its TTLs is reported missing (what /health is for); one missing longer
is gone for good (renamed, scaled away, its host retired) and forgotten, or the set would name it forever.
"""

from __future__ import annotations

from typing import Any

# 120 TTLs: 10 minutes for a projector (5 s), 30 for an archiver (15 s). Far longer than a restart or a Redis failover
# (an operator sees the process missing all that while), short enough that a renamed or retired process does not keep
# /health degraded for good. A process forgotten by mistake (it was only stuck) is back at its next beat: every beat
# adds its name and writes its whole stats hash again.
FORGET_AFTER_TTLS = 120
SEEN_FIELD = "heartbeat_at_ms"
TTL_FIELD = "heartbeat_ttl_ms"
# The registry's own fields among a process's figures: not figures, and the beat's time is its heartbeat's ``at_ms``.
REGISTRY_FIELDS = frozenset({SEEN_FIELD, TTL_FIELD})


def seen(now_ms: int, ttl_ms: int) -> dict[str, int]:
    """The fields a process writes into its stats hash at each heartbeat: when it beat, and how long a beat lives."""
    return {SEEN_FIELD: now_ms, TTL_FIELD: ttl_ms}


def _field(stats: dict, name: str) -> int | None:
    value = stats.get(name.encode(), stats.get(name))
    return None if value is None else int(float(value))


async def missing_or_forget(client: Any, registry_key: str, missing: dict[str, tuple[str, dict]], now_ms: int,
                            default_ttl_ms: int) -> dict[str, int]:
    """Of the registered processes whose heartbeat key has expired (name -> its stats key and its stats as read),
    forget those missing for ``FORGET_AFTER_TTLS`` of their TTLs and return the others: name -> ms since their last
    beat. Stats written by code older than ``seen`` tell no time: the clock starts now (HSETNX), so such a process too
    is forgotten, ``FORGET_AFTER_TTLS`` later. Nothing is written while every registered process beats."""
    kept: dict[str, int] = {}
    gone: list[tuple[str, str]] = []
    unknown: list[str] = []
    for name, (stats_key, stats) in missing.items():
        at_ms = _field(stats, SEEN_FIELD)
        if at_ms is None:
            unknown.append(stats_key)
            kept[name] = 0
        elif now_ms - at_ms > FORGET_AFTER_TTLS * (_field(stats, TTL_FIELD) or default_ttl_ms):
            gone.append((name, stats_key))
        else:
            kept[name] = max(0, now_ms - at_ms)
    if unknown or gone:
        # One key each, no script: on a Redis Cluster the set and the stats hashes live in different slots.
        async with client.pipeline(transaction=False) as pipe:
            for stats_key in unknown:
                pipe.hsetnx(stats_key, SEEN_FIELD, now_ms)
            for name, stats_key in gone:
                forget(pipe, registry_key, name, stats_key)
            await pipe.execute()
    return kept


def forget(pipe: Any, registry_key: str, name: str, stats_key: str) -> None:
    """Queue on ``pipe`` what takes a process out of its registry: its name from the set, its stats."""
    pipe.srem(registry_key, name)
    pipe.delete(stats_key)
