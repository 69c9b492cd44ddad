"""`almanac projections rebuild|show` and `almanac projector`: tables for operators, one clear line on bad input."""

from __future__ import annotations

import asyncio
import json

import pytest
import structlog
from projection_games import dump_models, open_room, options_for, play
from typer.testing import CliRunner

from almanac.projections.projector import Projector
from almanac.services.cli import _load_commands, app
from almanac.services.room_service import RoomService
from almanac.storage.redis_store import RedisEventStore

SHARDS = 4


@pytest.fixture
def almanac(redis_url, monkeypatch):
    _load_commands()
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("ALMANAC_SHARDS", str(SHARDS))
    runner = CliRunner()

    async def run(*args: str):
        return await asyncio.to_thread(runner.invoke, app, list(args))

    yield run
    # A command that configured logging bound it to the runner's captured stderr, closed by now.
    structlog.reset_defaults()


async def test_an_operator_rebuilds_all_models_and_gets_the_live_ones_back(almanac, redis_client):
    service = RoomService(RedisEventStore(redis_client, shard_count=SHARDS))
    for room in ("r1", "r2"):
        await open_room(service, room, "bazaar", ["alice", "bob"])
        await play(service, room, "bazaar", 6, ["alice", "bob"])
    await Projector(redis_client, SHARDS).drain()
    live = await dump_models(redis_client)

    result = await almanac("projections", "rebuild")
    assert result.exit_code == 0, result.output
    assert "rebuilt rooms, leaderboards, bazaar_trades, claims, trades from 2 room(s)" in result.output
    assert await dump_models(redis_client) == live

    shown = await almanac("projections", "show", "bazaar_trades", "--room", "r1", "--json")
    assert [row["trade"] for row in json.loads(shown.output)] == ["t0", "t0", "t1", "t1", "t2", "t2"]
    table = await almanac("projections", "show", "leaderboards", "--ruleset", "bazaar")
    assert table.exit_code == 0 and "alice" in table.output and "bob" in table.output
    room = await almanac("projections", "show", "room", "--room", "r2")
    assert json.loads(room.output)["ruleset"] == "bazaar" and json.loads(room.output)["version"] == 3 + 6


def test_every_read_model_rebuild_names_is_shown_under_the_same_name():
    from almanac.projections.read_model_rows import model_names
    from almanac.services.cli.projection_commands import showable

    assert set(model_names()) <= set(showable())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("projections", "rebuild", "scores"), "there is no read model named 'scores'"),
        (("projections", "show", "everything"), "cannot show 'everything'"),
        (("projections", "show", "leaderboards"), "show leaderboards needs --ruleset NAME"),
        (("projections", "show", "room", "--room", "ghost"), "room 'ghost' has no projection"),
        (("projections", "show", "claims", "--where", "trade=t1"), "claims filters by owner=VALUE"),
        (("projector", "--shards", "7/2"), "--shards '7/2' is not valid"),
    ],
)
async def test_bad_input_gets_one_clear_line_and_a_non_zero_exit(almanac, redis_client, args, message):
    result = await almanac(*args)
    assert result.exit_code == 1
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


async def test_room_listings_show_as_a_table(almanac, redis_client):
    service = RoomService(RedisEventStore(redis_client, shard_count=SHARDS))
    await open_room(service, "c1", "counter", ["alice", "bob"], options=options_for("counter"))
    await Projector(redis_client, SHARDS).drain()
    result = await almanac("projections", "show", "rooms", "--ruleset", "counter")
    assert result.exit_code == 0 and "c1" in result.output and "counter" in result.output
