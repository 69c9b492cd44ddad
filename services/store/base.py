"""Moved to ``almanac.storage.base``; this alias keeps older imports working until every branch is merged."""

from almanac.storage.base import *  # noqa: F403
