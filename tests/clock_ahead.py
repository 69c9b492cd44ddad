"""A gateway that stamps commands ALMANAC_TEST_CLOCK_AHEAD_MS later than the host's clock: days pass in a moment.

A claim is proved up no sooner than 48 hours after it was staked (games/claim/RULES.md), and the rules read time
only from the server time the gateway stamps on each command (``api_rooms._submit``). So that a client can play a
claim to its end in a test, the claim is staked through an ordinary gateway and played on through one started
with ``Stack.start_gateway(preload="clock_ahead", ALMANAC_TEST_CLOCK_AHEAD_MS=...)``: the same code, its command
stamps set ahead as a gateway host's clock would be two days later. Nothing else is shifted (token expiry,
rates, the health check's heartbeat ages read the host's clock, so the gateway stays healthy and a token issued
elsewhere still acts); the engine decides and records those times, and the room verifies from its log alone.
"""

from __future__ import annotations

import os

AHEAD_ENV = "ALMANAC_TEST_CLOCK_AHEAD_MS"


def plant() -> None:
    from almanac.services.gateway import api_rooms  # noqa: PLC0415 - patched before the CLI builds the app

    ahead_ms = int(os.environ[AHEAD_ENV])
    stamp = api_rooms.now_ms
    api_rooms.now_ms = lambda: stamp() + ahead_ms
