"""Which Redis errors are Redis's (unreachable, failing over, refusing writes) rather than a command's."""

from __future__ import annotations

from redis import exceptions

# The errors of a Redis Cluster that is failing over or resharding (no quorum yet, a slot with no live
# primary, a slot moving, redirections that did not settle): the store is briefly unavailable, the
# command was not run (or is safe to resend by id). redis-py raises them after its own retries.
CLUSTER_ERRORS: tuple[type[Exception], ...] = (
    exceptions.ClusterError,  # ClusterDownError, MasterDownError
    exceptions.RedisClusterException,  # SlotNotCoveredError, "no targets" while the slot map is empty
    exceptions.TryAgainError,
    exceptions.AskError,  # and MovedError: a redirection loop redis-py gave up on
)

# Redis refusing every write for a while, whatever the command: OOM (full at maxmemory), MISCONF (it cannot
# persist: a full disk, a failing RDB save or AOF write) and BUSY (a script running past its time limit):
# the store's failure, not the command's. redis-py raises OutOfMemoryError for the first and a plain
# ResponseError for the others. (BUSYGROUP and BUSYKEY are other errors: the space after BUSY tells them apart.)
# Likewise a replica (READONLY: a primary demoted under us, ReadOnlyError), a primary short of the replicas
# min-replicas-to-write asks for (NOREPLICAS) and a replica cut off from its primary (MASTERDOWN).
_REFUSING_WRITES = ("MISCONF ", "BUSY ", "NOREPLICAS ", "MASTERDOWN ")


def refuses_writes(error: BaseException) -> bool:
    """True for a Redis that refuses writes for now (OOM, MISCONF, BUSY, READONLY, NOREPLICAS, MASTERDOWN):
    retry later, never blame the command.

    redis-py's asyncio pipeline words an error "Command # 1 (...) of pipeline caused error: ('MISCONF ...',)"
    (the error's args tuple): the reply is looked for after that prefix too."""
    if isinstance(error, (exceptions.OutOfMemoryError, exceptions.ReadOnlyError)):
        return True
    if not isinstance(error, exceptions.ResponseError):
        return False
    message = str(error)
    if message.startswith(_REFUSING_WRITES):
        return True
    # The last marker: the command's own arguments come before it and may contain anything.
    _, annotated, reply = message.rpartition(" of pipeline caused error: ")
    return bool(annotated) and reply.lstrip("(\"'").startswith(_REFUSING_WRITES)


# Errors of the connection (or of a Cluster failing over), not of the command: never counted as a command's
# attempt, so no command is dead-lettered because a node died under it.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    exceptions.ConnectionError, exceptions.TimeoutError, ConnectionError, OSError, *CLUSTER_ERRORS)


def redis_failure(error: BaseException) -> bool:
    """Redis' failure, not the command's: unreachable (INFRASTRUCTURE_ERRORS), or refusing writes for now
    (``refuses_writes``: OOM, MISCONF, BUSY, READONLY...). Never counted as an attempt: the command stays
    pending."""
    return isinstance(error, INFRASTRUCTURE_ERRORS) or refuses_writes(error)


def stream_vanished(error: BaseException) -> bool:
    """A read of a command stream whose consumer group is gone (NOGROUP), or that was waiting on a stream deleted
    under it (Redis 7 answers a blocked XREADGROUP "UNBLOCKED the stream key no longer exists"): a flush, a
    Redis restarted without persistence. The group is created again; nothing is wrong with the engine."""
    message = str(error)
    return "NOGROUP" in message or message.startswith("UNBLOCKED the stream key no longer exists")
