"""A room's bot policy is checked against its rules the same way however the room is made: POST /rooms, `almanac sim`
and `almanac import` all refuse seat bots for rules that have none (one check: events.room.check_bot_policy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_operator import ainvoke, invoke
from test_copies_and_imports import export_file

from almanac.events.errors import RuleError
from almanac.events.room import check_bot_policy
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore


def scenario(tmp_path: Path, header: dict) -> str:
    path = tmp_path / "scenario.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps({"player": "ann", "time_ms": 1, "command":
                                                             {"kind": "join_room"}}) + "\n")
    return str(path)


@pytest.mark.parametrize(("ruleset", "policy", "refusal"), [
    ("counter", {"seat_bots": True}, ("no_seat_bot", "seat_bots")),  # the counter has no seat bot
    ("counter", {"bot_after_missed": 2}, ("no_seat_bot", "bot_after_missed")),
    ("claim", {"bot_after_missed": 2}, ("no_deadlines", "bot_after_missed")),  # claim's rules name no deadline
    ("claim", {"seat_bots": True}, None),
    ("realm@2", {"bot_after_missed": 2}, None),
])
def test_the_one_check_answers_what_post_rooms_answers(ruleset: str, policy: dict, refusal: tuple | None) -> None:
    if refusal is None:
        check_bot_policy(ruleset, **policy)
        return
    with pytest.raises(RuleError) as refused:
        check_bot_policy(ruleset, **policy)
    assert (refused.value.code, refused.value.field) == refusal


def test_sim_refuses_a_scenario_whose_rules_have_no_seat_bot(tmp_path: Path) -> None:
    # Given a counter scenario (its rules have no seat bot) whose header asks for seat bots
    header = {"ruleset": "counter", "options": {"seats": ["ann", "bob"]}, "player": "ann"}
    # When it is simulated, then it is refused at its header line, naming the option, as POST /rooms does
    refused = invoke(None, "sim", scenario(tmp_path, {**header, "seat_bots": True}))
    assert refused.exit_code != 0 and "scenario.jsonl:1: seat_bots: no_seat_bot" in refused.output, refused.output
    # while the same scenario without it plays, and a claim room may have seat bots
    assert invoke(None, "sim", scenario(tmp_path, header)).exit_code == 0
    claim = {"ruleset": "claim", "player": "ann", "seat_bots": True}
    played = invoke(None, "sim", scenario(tmp_path, claim), "--json")
    assert played.exit_code == 0, played.output


async def test_import_refuses_a_room_whose_log_records_seat_bots_its_rules_cannot_play(redis_client, redis_url,
                                                                                        tmp_path: Path) -> None:
    # Given an exported counter room whose log records a bot policy (made outside the gateway: the room decides any
    # create as it always has, so such a log verifies)
    elsewhere = RedisEventStore(redis_client, shard_count=16)
    created = await RoomService(elsewhere).handle(CommandRecord(
        command_id="c1", room="botless", player="ann", server_time_ms=1_000,
        body={"kind": "create_room", "ruleset": "counter", "options": {"seats": ["ann", "bob"]}, "seat_bots": True}))
    assert created.accepted and [e.type for e in created.envelopes][:2] == ["room.created", "room.bot_policy"]
    file = await export_file(elsewhere, "botless", tmp_path / "botless.json")
    await redis_client.flushdb()
    # When it is imported, then it is refused as POST /rooms would refuse its create, and nothing is imported
    refused = await ainvoke(redis_url, "import", file)
    assert refused.exit_code != 0 and "seat_bots: no_seat_bot" in refused.output, refused.output
    assert not await RedisEventStore(redis_client, shard_count=16).latest_version("botless")
