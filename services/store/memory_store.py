"""Moved to ``almanac.storage.memory_store``; this alias keeps older imports working until every branch is merged."""

from almanac.storage.memory_store import *  # noqa: F403
