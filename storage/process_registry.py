"""The registries of processes (engines, projectors, archivers): which one misses its heartbeat, which is gone.

A process writes its stats hash, then adds its name to its registry set (``engines_key``, ``projectors_key``,
``archivers_key``) at every heartbeat, beside its heartbeat key (with a TTL). The stats hash has no TTL: a projector's
or an archiver's figures are written whole at each beat; an engine's are its counters (HINCRBY totals since the name
first ran), of which a beat writes only a few fields. Among them the beat writes ``TTL_FIELD`` (how long a beat lives)
and removes ``MISSING_FIELD``: a process that comes back is no longer missing. Stats before name holds on one Redis
(a pipeline's commands run in order), not on a Redis Cluster, where the set and the hash live on different nodes and
a ClusterPipeline sends to them in parallel: a reader may see a new member without its stats, take it out (as one
forgotten), and it is back at its next beat.

Only the readers' clock counts, and theirs is Redis' (TIME): a process's own clock may be behind or ahead. The first
reader that finds a registered process's heartbeat expired writes when (``MISSING_FIELD``, if unset); the process is
reported missing from then until ``FORGET_AFTER_TTLS`` of its TTLs have passed, then it is gone for good (renamed,
scaled away, its host retired) and forgotten, or the set would name it forever. After a Redis outage that let every
heartbeat expire, the clock starts when a reader first looks again: nothing is forgotten at once. On a Redis Cluster
TIME is one node's: its skew against the others' is seconds, against at least 6 minutes (120 TTLs of 3 s) to forget.
"""

from __future__ import annotations

import logging
from typing import Any

# The standard library's logger: storage imports no logging library (the processes route it to their own log).
log = logging.getLogger("almanac.registry")

# 120 TTLs: 10 minutes for a projector (5 s), 30 for an archiver (15 s) and for an engine (3 leases, at least 3 s).
# Far longer than a restart or a Redis failover (an operator sees the process missing all that while), short enough
# that a renamed or retired process does not keep it listed for good. A process forgotten by mistake (it was only
# stuck) is back at its next beat: every beat writes its stats and adds its name again.
FORGET_AFTER_TTLS = 120
TTL_FIELD = "heartbeat_ttl_ms"
MISSING_FIELD = "missing_since_ms"
# The registry's own fields among a process's figures: not figures.
REGISTRY_FIELDS = frozenset({TTL_FIELD, MISSING_FIELD})
# HSETNX, but not on a hash deleted since the reader read it (the process stopped cleanly, or another reader forgot
# it): HSETNX alone would make it again, holding only this field, under a name no set holds, never deleted. One key:
# a Cluster runs it on that key's node.
_MARK_MISSING_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) end
return 0
"""
# Delete the stats hash (ARGV[3] "1": only the registry's fields, ARGV[4...]) only if its first-missing mark is still
# the one read (ARGV[2]): a beat since removed it, and a forget deciding on the figures read before would take a
# process that is back out of its set. One key, as above.
_FORGET_IF_MISSING_SCRIPT = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '1' then redis.call('HDEL', KEYS[1], unpack(ARGV, 4)) else redis.call('DEL', KEYS[1]) end
return 1
"""


def queue_beat_fields(pipe: Any, stats_key: str, ttl_ms: int) -> None:
    """Queue on ``pipe`` what each heartbeat writes into its stats hash (after its figures, before joining the set):
    how long a beat lives, and that the process is not missing."""
    pipe.hset(stats_key, TTL_FIELD, ttl_ms)
    pipe.hdel(stats_key, MISSING_FIELD)


def read_registry_fields(pipe: Any, stats_key: str) -> None:
    """Queue on ``pipe`` the read of the registry's fields (``registry_fields_of`` its two replies): for a process
    whose other figures the reader does not need (an engine's counters, dozens of fields)."""
    pipe.hmget(stats_key, *sorted(REGISTRY_FIELDS))
    pipe.exists(stats_key)


def registry_fields_of(fields: list, exists: int) -> dict[str, Any] | None:
    """The stats ``missing_or_forget`` reads, from the replies of ``read_registry_fields``: None if the hash is gone."""
    if not exists:
        return None
    return {field: value for field, value in zip(sorted(REGISTRY_FIELDS), fields, strict=True) if value is not None}


def _field(stats: dict, name: str) -> int | None:
    value = stats.get(name.encode(), stats.get(name))
    return None if value is None else int(float(value))


async def missing_or_forget(client: Any, registry_key: str, missing: dict[str, tuple[str, dict | None]],
                            default_ttl_ms: int, keep_stats: bool = False, now_ms: int | None = None) -> dict[str, int]:
    """Of the registered processes whose heartbeat key has expired (name -> its stats key and its stats as read, None
    when the hash is gone), forget those missing for ``FORGET_AFTER_TTLS`` of their TTLs and return the
    others: name -> ms since a reader first saw them missing (0 for one seen now, whose time is written). A member
    without stats was forgotten by another reader since this one read the set (every writer writes its stats before
    joining; on a Redis Cluster, not in order: it may be a new one, back at its next beat): its name is taken out
    again, nothing is written. ``keep_stats``: forgetting leaves the stats hash (an engine's counters), only the
    registry's fields are removed (a reader racing that forget may leave its time there: not a counter, and removed at
    the name's next beat). A process is forgotten only if its stats still say it is missing since the time read: one
    that beat since stays. ``now_ms``: Redis' TIME, when the caller has just asked it. Nothing is written, nor the
    time asked, while every registered process beats. The writes are best effort: a Redis refusing them (at maxmemory
    with noeviction, PING still answered) leaves the registry as it was, and the answer is the same."""
    if not missing:
        return {}
    if now_ms is None:
        # TIME on its own: a Redis Cluster pipeline refuses it.
        seconds, micros = await client.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
    kept: dict[str, int] = {}
    first_seen: list[str] = []
    gone: list[tuple[str, str | None, Any]] = []
    for name, (stats_key, stats) in missing.items():
        if stats is None:
            gone.append((name, None, None))
            continue
        since_ms = _field(stats, MISSING_FIELD)
        if since_ms is None:
            first_seen.append(stats_key)
            kept[name] = 0
        elif now_ms - since_ms > FORGET_AFTER_TTLS * (_field(stats, TTL_FIELD) or default_ttl_ms):
            gone.append((name, stats_key, stats.get(MISSING_FIELD.encode(), stats.get(MISSING_FIELD))))
        else:
            kept[name] = max(0, now_ms - since_ms)
    # One key each, no script over two: on a Redis Cluster the set and the stats hashes live in different slots.
    async with client.pipeline(transaction=False) as pipe:
        for stats_key in first_seen:
            pipe.eval(_MARK_MISSING_SCRIPT, 1, stats_key, MISSING_FIELD, now_ms)
        for name, stats_key, since in gone:
            if stats_key is None:
                pipe.srem(registry_key, name)
            else:
                _forget_if_still_missing(pipe, stats_key, since, keep_stats)
        replies = await _best_effort(pipe, registry_key)
    # The name leaves the set only if its stats went: a process that beat since they were read is back. One beating
    # between the script and the SREM is out of the set until its next beat, its stats written.
    forgotten = [name for (name, stats_key, _), reply in zip(gone, replies[len(first_seen):], strict=True)
                 if stats_key is not None and reply == 1]
    if forgotten:
        async with client.pipeline(transaction=False) as pipe:
            pipe.srem(registry_key, *forgotten)
            await _best_effort(pipe, registry_key)
    return kept


async def _best_effort(pipe: Any, registry_key: str) -> list:
    """``pipe``'s replies, an error among them logged once (a warning) and left in its place: the registry's
    bookkeeping must not fail the /health or /metrics that does it."""
    replies = await pipe.execute(raise_on_error=False)
    errors = [reply for reply in replies if isinstance(reply, Exception)]
    if errors:
        log.warning("registry_write_failed registry=%s failed=%d error=%s", registry_key, len(errors), errors[0])
    return replies


def _forget_if_still_missing(pipe: Any, stats_key: str, missing_since: Any, keep_stats: bool = False) -> None:
    """Queue on ``pipe`` the deletion of a process's stats (``keep_stats``: of the registry's fields among them) if
    its ``MISSING_FIELD`` still holds ``missing_since`` (as read): it replies 1 if so, 0 if the process beat since."""
    since = missing_since.decode() if isinstance(missing_since, bytes) else str(missing_since)
    pipe.eval(_FORGET_IF_MISSING_SCRIPT, 1, stats_key, MISSING_FIELD, since, "1" if keep_stats else "0",
              *sorted(REGISTRY_FIELDS))


def forget(pipe: Any, registry_key: str, name: str, stats_key: str, keep_stats: bool = False) -> None:
    """Queue on ``pipe`` what takes a process out of its registry: its name from the set, its stats (or, with
    ``keep_stats``, only the registry's fields among them)."""
    pipe.srem(registry_key, name)
    if keep_stats:
        pipe.hdel(stats_key, *REGISTRY_FIELDS)
    else:
        pipe.delete(stats_key)
