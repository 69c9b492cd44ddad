"""The engine process's room loaders come from its runtime (services.bootstrap, the one composition root): the room
step's and the clock's, each its own (the writer's cache holds only states whose write went through)."""

from __future__ import annotations

from almanac.services import bootstrap
from almanac.services.engine.shard_engine import Engine, engine_config
from almanac.services.settings import Settings
from almanac.storage.loader import RoomLoader


async def test_the_engine_takes_the_room_steps_and_the_clocks_loaders_from_its_runtime(redis_url) -> None:
    # Given an engine's runtime, whose loaders are counted as it makes them
    settings = Settings(redis_url=redis_url, engine_shards="all")
    runtime = bootstrap.runtime(settings, bootstrap.Role.ENGINE, redis_url)
    made: list[RoomLoader] = []

    def loaders(cache_size: int) -> RoomLoader:
        made.append(runtime.loader(cache_size))
        return made[-1]

    try:
        # When the engine is built on it and its housekeeping starts the clock
        engine = Engine(runtime.client, engine_config(settings), runtime.store, loaders=loaders)
        engine.housekeeping.start()
        await engine.housekeeping.stop()

        # Then the room step loads through the runtime's loader, and the clock through another one of its loaders,
        # both on the runtime's store and caching as many rooms as before
        assert engine.service.loader is made[0] and len(made) == 2 and made[1] is not made[0]
        assert all(loader.store is runtime.store for loader in made)
        assert [loader.cache_size for loader in made] == [10_000, 10_000]
    finally:
        await runtime.aclose()
