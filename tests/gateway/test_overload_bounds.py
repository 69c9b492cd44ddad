"""A gateway's bounds of work at once follow from its one in-flight limit (issue 29: overload control as one policy
with at most two settings a user must understand: ALMANAC_GATEWAY_MAX_INFLIGHT and ALMANAC_GATEWAY_TARGET_WAIT_MS).

Given settings with only the in-flight limit set, the outcome waits a gateway process holds at once are 32 per
command slot and its whole-room reads one per 16 slots (at least one), the defaults unchanged (1,024 and 2); the
deployment still setting the variables that once set them apart is refused at start. And given an outcome waiter on a real Redis with the bound of an
in-flight limit of 1, when that many commands wait for outcomes no engine gives, the next command is refused 503
``overloaded`` with Retry-After before it is submitted (nothing written), while the waits already held go on.
"""

from __future__ import annotations

import asyncio

import pytest

from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.outcomes import OutcomeWaiter
from almanac.services.room_service import CommandRecord
from almanac.services.settings import SettingsError, load_settings
from almanac.storage.keys import Keys

SHARDS = 16


def test_the_outcome_wait_and_heavy_read_bounds_follow_the_in_flight_limit() -> None:
    defaults = load_settings({})
    assert (defaults.gateway_max_inflight, defaults.max_outcome_waiters, defaults.gateway_max_heavy_reads) == (32, 1_024, 2)
    # When an operator sets the one limit, the others follow it...
    assert (load_settings({"ALMANAC_GATEWAY_MAX_INFLIGHT": "64"}).max_outcome_waiters,
            load_settings({"ALMANAC_GATEWAY_MAX_INFLIGHT": "64"}).gateway_max_heavy_reads) == (2_048, 4)
    small = load_settings({"ALMANAC_GATEWAY_MAX_INFLIGHT": "4"})
    assert (small.max_outcome_waiters, small.gateway_max_heavy_reads) == (128, 1)  # never no heavy read at all
    # ...and a deployment that still sets a variable that once set them on its own is refused, one line each,
    # rather than run with a bound its operator did not choose.
    with pytest.raises(SettingsError) as refused:
        load_settings({"ALMANAC_MAX_OUTCOME_WAITERS": "5", "ALMANAC_GATEWAY_MAX_HEAVY_READS": "9"})
    assert [line.split(" is no longer a setting")[0] for line in refused.value.problems] == [
        "ALMANAC_MAX_OUTCOME_WAITERS", "ALMANAC_GATEWAY_MAX_HEAVY_READS"]


def record(index: int) -> CommandRecord:
    return CommandRecord(command_id=f"bound-{index}", room=f"bound-room-{index}", player="p", server_time_ms=1,
                         body={"kind": "roll"})


async def test_outcome_waits_past_the_bound_are_refused_before_anything_is_written(redis_client) -> None:
    bound = load_settings({"ALMANAC_GATEWAY_MAX_INFLIGHT": "1"}).max_outcome_waiters
    keys = Keys(SHARDS)
    waiter = OutcomeWaiter(redis_client, keys, bound)
    await waiter.start()
    try:
        # Given as many commands as the bound waiting for outcomes no engine gives
        held = [asyncio.create_task(waiter.submit_and_wait(record(index), timeout_s=5)) for index in range(bound)]
        streams = [keys.command_stream(shard) for shard in range(SHARDS)]
        for _ in range(500):
            if sum([await redis_client.xlen(stream) for stream in streams]) == bound:
                break
            await asyncio.sleep(0.01)
        # When one more command comes, then it is refused at once, before it is submitted
        with pytest.raises(ApiError) as refused:
            await waiter.submit_and_wait(record(bound), timeout_s=5)
        assert (refused.value.status, refused.value.code) == (503, "overloaded")
        assert refused.value.headers["Retry-After"] == "1"
        assert sum([await redis_client.xlen(stream) for stream in streams]) == bound  # nothing more written
        assert not any(task.done() for task in held)  # the waits already held go on
    finally:
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await waiter.stop()
