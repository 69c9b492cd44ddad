"""Adversarial review of the bots process (issue 32): what any player can hand to it stays bounded, and a rival
cannot predict a bot's choices.

On main a round read and sorted every bot seat of the deployment every 0.1 s whatever ``max_rooms`` said, a seat
whose bot join was refused stayed a bot seat for ever, and a bot's dice were keyed with a public constant, so
anyone could recompute what the bot would play from the room, seat and version.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from engine_test_support import KEYS

from almanac.events.testing import RoomDriver
from almanac.services import bots as bots_module
from almanac.services.bots import (
    ATTEMPTS,
    add_bot,
    bot_join_id,
    bot_seats,
    decide_for,
    dice_key,
)
from almanac.services.checkpoints import commit_secret
from almanac.services.room_service import CommandRecord, RoomService
from almanac.services.settings import load_settings
from almanac.storage.redis_store import RedisEventStore

KEY = b"test bots"


async def created(store: RedisEventStore, room: str, player: str = "robo") -> None:
    outcome = await RoomService(store).handle(CommandRecord(
        command_id=f"{room}-c", room=room, player="ann", server_time_ms=1_000,
        body={"kind": "create_room", "ruleset": "board", "options": {"player": player}}))
    assert outcome.accepted


async def test_a_round_reads_a_bounded_window_of_seats_and_the_window_reaches_every_seat(
        redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given mallory's 60 rooms, each with a bot seat
    rooms = [f"mallory-{index}" for index in range(60)]
    for room in rooms:
        await created(store, room)
        await add_bot(redis_client, KEYS, room, "robo", 0)
    largest_shard = max([await redis_client.hlen(KEYS.bots(shard)) for shard in range(16)])
    async with served_gateway(redis_url, ALMANAC_ENGINE_SHARDS="all") as gateway:  # it decides the joins
        bots = bots_for(gateway, redis_client, store, KEYS, key=KEY, max_rooms=8, rate=0)
        # When the bots process runs rounds
        for _ in range(12):
            await bots.tick()
            # Then each round reads at most its window plus one HSCAN reply (a small hash answers whole), never all 60
            assert bots.read <= 8 + largest_shard < len(rooms), bots.read
    # and the cursor moved over every seat: each one's bot sent its join
    assert all(bots.seats.get((room, "robo")) and bots.seats[(room, "robo")].sent_ms for room in rooms)


async def test_a_seat_whose_bot_join_is_refused_is_dropped(redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a one-seat room for robo, and mallory's hand of a seat the room does not have to a bot
    await created(store, "one-seat")
    await add_bot(redis_client, KEYS, "one-seat", "nobody", 0)
    async with served_gateway(redis_url, ALMANAC_ENGINE_SHARDS="all") as gateway:  # it decides the join
        bots = bots_for(gateway, redis_client, store, KEYS, key=KEY, rate=0)
        # When the bot sends its join through the gateway, and the room refuses it
        assert await bots.tick() == 0
    # Then the seat is no bot seat any more: its join's id is fixed, so it could never play
    assert ("one-seat", "nobody") not in await bot_seats(redis_client, KEYS, range(16))


def choices(key: bytes) -> list[dict | None]:
    """The board bot's commands over the first moves of a room, at every attempt (the stream a rival would want)."""
    driver = RoomDriver("dice-room", b"room seed, 32 bytes.............", 1_000)
    driver.send("ann", {"kind": "create_room", "ruleset": "board", "options": {"player": "robo"}})
    driver.send("robo", {"kind": "join_room"}, command_id=bot_join_id("dice-room", "robo"))
    stream = []
    for _ in range(6):
        driver.now_ms += 60_000
        stream += [decide_for(driver.state, "robo", attempt, driver.now_ms, key=key) for attempt in range(ATTEMPTS)]
        if stream[-ATTEMPTS] is None:
            break
        driver.send("robo", stream[-ATTEMPTS])
    return stream


def test_a_bots_choices_are_keyed_by_the_deployment_secret(tmp_path) -> None:
    # Given two deployments, each with its own commitment secret in its data directory
    first = load_settings({}, data_dir=str(tmp_path / "first"))
    other = load_settings({}, data_dir=str(tmp_path / "other"))
    key = dice_key(commit_secret(first))
    # Then the same deployment decides the same after a restart (the secret read back from its file)
    assert dice_key(commit_secret(load_settings({}, data_dir=str(tmp_path / "first")))) == key
    assert choices(key) == choices(key)
    # while another deployment, and a rival who knows only the public code, draw other choices
    assert choices(dice_key(commit_secret(other))) != choices(key)
    assert choices(b"almanac seat bot") != choices(key)
    assert not hasattr(bots_module, "DICE_SEED"), "no public constant keys the bots' dice"
