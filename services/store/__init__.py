"""Event stores: the Redis Streams store (the product) and an in-memory store with the same contract."""

from almanac.services.store.base import AppendResult, EventStore, StoredOutcome, VersionConflict
from almanac.services.store.keys import Keys, shard_of

__all__ = ["AppendResult", "EventStore", "Keys", "StoredOutcome", "VersionConflict", "shard_of"]
