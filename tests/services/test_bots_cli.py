"""`almanac bots add`: the operator hands a seat to a bot under the same rule as POST /rooms/{room}/bots."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from typer.testing import CliRunner

from almanac.services.bots import add_bot, bot_seats
from almanac.services.cli import _load_commands, app
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

_load_commands()
KEYS = Keys(16)
runner = CliRunner()


def bots_add(redis_url: str, room: str, seat: str, **env: str):
    return runner.invoke(app, ["bots", "add", room, "--seat", seat],
                         env={"REDIS_URL": redis_url, "COLUMNS": "200", **env})


async def realm_with_an_empty_seat(redis_client: aioredis.Redis, room: str) -> None:
    """A realm room of alice, bob and carol: alice and carol seated, bob's seat empty."""
    service = RoomService(RedisEventStore(redis_client, shard_count=16))
    bodies = [("alice", {"kind": "create_room", "ruleset": "realm",
                         "options": {"players": ["alice", "bob", "carol"], "years": 1}}),
              ("alice", {"kind": "join_room"}), ("carol", {"kind": "join_room"})]
    for index, (player, body) in enumerate(bodies):
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{index}", room=room, player=player,
                                                     server_time_ms=1_000 + index, body=body))
        assert outcome.accepted, outcome.error


async def test_the_operator_is_refused_a_held_seat_and_a_seat_past_the_bound_and_granted_an_empty_one(
        redis_client: aioredis.Redis, redis_url: str) -> None:
    await realm_with_an_empty_seat(redis_client, "ops-realm")
    await add_bot(redis_client, KEYS, "elsewhere", "zed", 1)  # the deployment's bots already hold one seat

    async def seats() -> list[tuple[str, str]]:
        return await bot_seats(redis_client, KEYS, range(16))

    # When the operator hands carol's seat, which carol holds, to a bot
    held = await asyncio.to_thread(bots_add, redis_url, "ops-realm", "carol")
    # Then it is refused, as the API refuses it, and nothing is written
    assert held.exit_code == 1 and "seat_held" in held.output, held.output
    # When the deployment's bound is the one seat its bots hold, and the operator hands bob's empty seat
    full = await asyncio.to_thread(bots_add, redis_url, "ops-realm", "bob", ALMANAC_MAX_BOT_SEATS="1")
    # Then it is refused too
    assert full.exit_code == 1 and "bot_seats_full" in full.output, full.output
    assert await seats() == [("elsewhere", "zed")]
    # When the bound leaves room for one more
    granted = await asyncio.to_thread(bots_add, redis_url, "ops-realm", "bob", ALMANAC_MAX_BOT_SEATS="2")
    # Then bob's seat is a bot seat, and asking again, even at the bound, is no new seat
    assert granted.exit_code == 0 and "handed to a bot" in granted.output, granted.output
    assert ("ops-realm", "bob") in await seats()
    again = await asyncio.to_thread(bots_add, redis_url, "ops-realm", "bob", ALMANAC_MAX_BOT_SEATS="2")
    assert again.exit_code == 0 and "already a bot seat" in again.output, again.output
    # and a room that does not exist, or a seat it does not have, gets no bot seat at all
    for room, seat, code in (("no-such-room", "bob", "room_not_found"), ("ops-realm", "dave", "no_seat")):
        missing = await asyncio.to_thread(bots_add, redis_url, room, seat)
        assert missing.exit_code == 1 and code in missing.output, missing.output
    assert len(await seats()) == 2


async def test_the_operator_sets_a_rooms_bot_delay_within_its_bound(redis_client: aioredis.Redis, redis_url: str) -> None:
    from almanac.services.bots import MAX_DELAY_MS  # noqa: PLC0415

    await realm_with_an_empty_seat(redis_client, "slow-realm")
    env = {"REDIS_URL": redis_url, "COLUMNS": "200"}
    # When the operator hands bob's seat with a delay past the bound
    past = await asyncio.to_thread(runner.invoke, app, ["bots", "add", "slow-realm", "--seat", "bob", "--delay",
                                                        str(MAX_DELAY_MS + 1)], env=env)
    # Then it is refused before anything is written
    assert past.exit_code == 2, past.output
    assert await bot_seats(redis_client, KEYS, range(16)) == []
    # When the delay is within it
    granted = await asyncio.to_thread(runner.invoke, app, ["bots", "add", "slow-realm", "--seat", "bob", "--delay",
                                                           "1500"], env=env)
    # Then the seat is a bot seat and the room's bots wait 1.5 s after each move
    assert granted.exit_code == 0 and "wait 1500 ms" in granted.output, granted.output
    assert int(await redis_client.hget(KEYS.bot_delays(KEYS.shard("slow-realm")), "slow-realm")) == 1500
