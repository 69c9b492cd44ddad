"""Moved to ``almanac.storage.keys``; this alias keeps older imports working until every branch is merged."""

from almanac.storage.keys import *  # noqa: F403
