"""Moved to ``almanac.storage``; these aliases keep older imports working until every branch is merged."""

from almanac.storage.base import AppendResult, EventStore, StoredOutcome, VersionConflict
from almanac.storage.keys import Keys, shard_of

__all__ = ["AppendResult", "EventStore", "Keys", "StoredOutcome", "VersionConflict", "shard_of"]
