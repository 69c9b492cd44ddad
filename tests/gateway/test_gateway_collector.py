"""A running gateway and engine leave their start-up heap out of the collections and report each pause."""

from __future__ import annotations

import re

import httpx
from gateway_stack import engine_and_gateway
from waiting import wait_for


async def test_a_running_gateway_and_engine_have_frozen_their_start_up_heap_and_report_their_pauses(redis_url,
                                                                                                      tmp_path):
    with engine_and_gateway(redis_url, tmp_path) as (url, _):
        text = httpx.get(f"{url}/metrics").text
        frozen = float(re.search(r"^almanac_gc_frozen_objects (\S+)$", text, re.M).group(1))
        assert frozen > 10_000  # the gateway's app, rule-sets and libraries
        assert re.search(r"^almanac_gateway_inflight_limit 32\.0$", text, re.M)  # ALMANAC_GATEWAY_MAX_INFLIGHT
        assert re.search(r"^almanac_gateway_inflight 0\.0$", text, re.M)
        # The freeze's own full collection, counted once the gateway was ready.
        assert float(re.search(r'^almanac_gc_pause_seconds_count\{generation="2"\} (\S+)$', text, re.M).group(1)) >= 1

        async def engine_reported() -> bool:
            async with httpx.AsyncClient() as http:
                return 'field="gc_collections_gen2"' in (await http.get(f"{url}/metrics")).text

        await wait_for(engine_reported, what="the engine's collector pauses in /metrics")
