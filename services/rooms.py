"""Renamed to ``almanac.services.room_service``; this alias keeps older imports working until every branch is merged."""

from almanac.services.room_service import *  # noqa: F403
from almanac.services.room_service import CommandRecord, Outcome, RoomService, decode_record, refusal_record  # noqa: F401
