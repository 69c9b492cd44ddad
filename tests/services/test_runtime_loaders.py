"""The gateway's heavy reads (forensics, the console's series) and the projector process load rooms through their
runtime's loader (services.bootstrap, the one composition root), never through one they build on a store of their
own (tests/services/test_engine_loaders.py: the engine's)."""

from __future__ import annotations

from forensics_support import RealmTable

from almanac.services import bootstrap, projector_process
from almanac.services.forensics import investigate as ft
from almanac.services.gateway.api_console import _series
from almanac.services.gateway.heavy_reads import HeavyReads
from almanac.services.gateway.room_reader import Viewer
from almanac.services.settings import Settings
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore


async def test_every_heavy_read_folds_through_the_worker_runtimes_one_loader(redis_client, redis_url) -> None:
    # Given an ended realm room and a sandbox fork of it, whose first state is its parent's at the fork
    table = RealmTable(RedisEventStore(redis_client), "loaders-parent")
    await table.create("realm@1")
    await table.play_mining(2)
    assert (await table.send("alice", {"kind": "end_room"})).accepted
    fork = (await ft.fork(table.loader, table.room, 5, "loaders-fork", "auditor", 5))["room"]

    # and a gateway's heavy reads on a runtime that counts the loaders it makes and the states they load
    made: list[RoomLoader] = []
    loaded: list[tuple[str, int | None]] = []

    class Counted(bootstrap.Runtime):
        def loader(self, cache_size: int = 10_000) -> RoomLoader:
            loader = super().loader(cache_size)
            load = loader.load

            async def counted(room: str, at_version: int | None = None):
                loaded.append((room, at_version))
                return await load(room, at_version)

            loader.load = counted  # type: ignore[method-assign]
            made.append(loader)
            return loader

    def open_runtime() -> bootstrap.Runtime:
        plain = bootstrap.runtime(Settings(redis_url=redis_url), bootstrap.Role.GATEWAY_READS, redis_url)
        return Counted(plain.settings, plain.client, plain.store)

    heavy = HeavyReads(4, open_runtime)
    handed: list[RoomLoader] = []

    def through(work):
        async def run(loader: RoomLoader):
            handed.append(loader)
            return await work(loader)
        return run

    try:
        # When an auditor explains a value of the fork and bisects it, and the public reads its series
        explained = await heavy.run(through(lambda loader: ft.explain(loader, fork, "room.version")))
        bisected = await heavy.run(through(lambda loader: ft.bisect_where(loader, fork, "room.version >= 1")))
        series = await heavy.run(through(lambda loader: _series(loader, fork, Viewer())))

        # Then each was handed the same one loader, made once by the worker's runtime on its store
        assert len(made) == 1 and handed == [made[0]] * 3
        assert made[0].store is heavy._runtime.store  # noqa: SLF001 - the runtime the worker opened
        # and the fork's first state, its parent's at version 5, came through it for every fold
        assert loaded.count((table.room, 5)) >= 3, loaded
        assert explained["fork"]["at"] == 5 and bisected["found"] and series["versions"][0] == 1
    finally:
        await heavy.close()


async def test_the_projector_process_projects_through_its_runtimes_loader(redis_url, monkeypatch) -> None:
    # Given runtimes that count the loaders they make, and a projector process whose loop stops at once
    made: list[RoomLoader] = []
    make = bootstrap.Runtime.loader

    def counted(self: bootstrap.Runtime, cache_size: int = 10_000) -> RoomLoader:
        made.append(make(self, cache_size))
        return made[-1]

    held = []

    async def stopped_at_once(loop, name: str, on_ready=None) -> None:
        held.append(loop.__self__)  # the projector whose run would have been the process's loop

    monkeypatch.setattr(bootstrap.Runtime, "loader", counted)
    monkeypatch.setattr(bootstrap, "run_until_stopped", stopped_at_once)

    # When the process is started
    await projector_process.run(Settings(redis_url=redis_url), redis_url)

    # Then its projector loads through the loader its runtime made, on that runtime's store, caching as before
    (projector,) = held
    assert made == [projector.loader] and projector.loader.store is projector.store
    assert projector.loader.cache_size == 10_000
