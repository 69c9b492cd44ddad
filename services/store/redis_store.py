"""Moved to ``almanac.storage.redis_store``; this alias keeps older imports working until every branch is merged."""

from almanac.storage.redis_store import *  # noqa: F403
