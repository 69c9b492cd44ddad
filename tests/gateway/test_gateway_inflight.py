"""Commands while the engine is down or slow: shared waits, timeouts, and retries that get the first answer.

Given a gateway whose engine is stopped, when two requests carry the same command id, then the first
one's timeout does not end the second's wait; and a create whose answer was lost (timeout, dropped
reader) is answered with its token on a retry of the same id, never locked out as a replay. A command holds
its admission slot from before its reads to its answer.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings
from waiting import wait_for

from almanac.events.step import CommandRecord
from almanac.services import bootstrap
from almanac.services.gateway import create_app
from almanac.services.gateway.api_rooms import run_command
from almanac.services.gateway.auth import TokenSigner
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.gateway import Gateway


@pytest.fixture(scope="module")
def down(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack whose engine the tests start and stop."""
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, tmp_path_factory.mktemp("inflight-stack"))
    try:
        yield stack
    finally:
        stack.stop()


def start_engine(stack: Stack) -> None:
    stack.start("engine")
    stack.wait_ready()


def stop_engine(stack: Stack) -> None:
    stack.stop()
    stack.processes.clear()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_second_request_with_the_same_id_keeps_its_own_wait(down: Stack) -> None:
    start_engine(down)
    settings = gateway_settings(down).model_copy(update={"command_timeout_ms": 2_000})
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        room = f"inflight-{secrets.token_hex(3)}"
        created = api.post("/rooms", json={"ruleset": "board", "player": "fay", "room": room})
        assert created.status_code == 201, created.text
        token, before = created.json()["token"], created.json()["version"]
        stop_engine(down)
        move = {"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "twice"}
        answers: dict[str, object] = {}

        def send(name: str) -> None:
            answers[name] = api.post(f"/rooms/{room}/commands", json=move, headers=auth(token))

        first = threading.Thread(target=send, args=("first",))
        first.start()
        time.sleep(1.0)  # the second joins the first's wait, which ends (timeout) a second before its own
        second = threading.Thread(target=send, args=("second",))
        second.start()
        first.join()
        second.join()
        for name in ("first", "second"):
            response = answers[name]
            assert response.status_code == 202, (name, response.text)
            assert response.json()["code"] == "outcome_pending"
        start_engine(down)
        retried = api.post(f"/rooms/{room}/commands", json=move, headers=auth(token))
        assert retried.status_code in (200, 422), retried.text  # decided once, whatever the rules said
        assert api.get(f"/rooms/{room}").json()["version"] in (before, before + 1)
        assert api.get(f"/rooms/{room}/commands/twice", headers=auth(token)).json() == retried.json() | {
            "duplicate": True}


def test_a_create_retried_after_a_timeout_gets_its_token(down: Stack) -> None:
    stop_engine(down)
    settings = gateway_settings(down).model_copy(update={"command_timeout_ms": 500})
    room, command_id = f"late-{secrets.token_hex(3)}", secrets.token_hex(12)
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        pending = api.post("/rooms", json={"ruleset": "board", "player": "gus", "room": room,
                                           "command_id": command_id})
        assert pending.status_code == 202 and pending.json()["command_id"] == command_id, pending.text
        start_engine(down)
        again = api.post("/rooms", json={"ruleset": "board", "player": "gus", "room": room,
                                         "command_id": command_id})
        assert again.status_code == 201, again.text
        body = again.json()
        assert body["duplicate"] is True and body["joined"] is True and body["token"]
        assert api.get(f"/rooms/{room}/view", headers=auth(body["token"])).status_code == 200
        # A short, guessable id is no proof: repeating it does not hand out the seat.
        short = api.post("/rooms", json={"ruleset": "board", "player": "hal", "room": f"{room}-s",
                                         "command_id": "c1"})
        assert short.status_code == 201
        replay = api.post("/rooms", json={"ruleset": "board", "player": "hal", "room": f"{room}-s",
                                          "command_id": "c1"})
        assert replay.status_code == 409 and replay.json()["code"] == "already_joined" and "token" not in replay.json()


def test_a_create_whose_outcome_message_was_missed_is_still_the_creators(down: Stack) -> None:
    if "engine" not in down.processes:
        start_engine(down)
    settings = gateway_settings(down).model_copy(update={"command_timeout_ms": 700})
    room = f"missed-{secrets.token_hex(3)}"
    with TestClient(create_app(settings), raise_server_exceptions=False) as api:
        api.portal.call(api.app.state.gateway.outcomes.stop)  # every outcome message is now missed
        created = api.post("/rooms", json={"ruleset": "board", "player": "ida", "room": room, "command_id": "c1"})
        assert created.status_code == 201, created.text  # was 409 already_joined, no token: locked out
        body = created.json()
        assert body["duplicate"] is False and body["joined"] is True and body["token"]


def test_a_command_holds_its_slot_from_admission_so_reads_before_the_submit_are_bounded_too(down: Stack) -> None:
    """Given a gateway allowing 2 commands in flight and a Redis that answers nothing for a while, when two
    commands for rooms this process has never seen wait on their room's rule-set read, then a third is
    refused at once (503 overloaded) instead of starting a third read; and once Redis answers, the two
    are answered (404: no such rooms) and their slots are free again; a submitted command takes one slot."""
    settings = gateway_settings(down).model_copy(update={"gateway_max_inflight": 2, "command_timeout_ms": 300})
    pauser = redis.Redis.from_url(settings.redis_url)

    async def story() -> tuple[ApiError, list]:
        signer = TokenSigner(secrets.token_hex(32), 60)
        gateway = Gateway(bootstrap.runtime(settings, bootstrap.Role.GATEWAY), signer)
        await gateway.outcomes.start()
        rooms = [f"unseen-{secrets.token_hex(3)}" for _ in range(3)]
        body = b'{"command": {"kind": "place_element"}}'
        try:
            pauser.execute_command("CLIENT", "PAUSE", 1_000, "ALL")
            reading = [asyncio.ensure_future(run_command(gateway, room, signer.issue(room, "p"), body, None))
                       for room in rooms[:2]]

            async def both_in_flight() -> bool:
                return gateway.inflight == 2

            await wait_for(both_in_flight, 5, "two commands in flight, reading their rooms' rule-sets")
            with pytest.raises(ApiError) as refused:
                await run_command(gateway, rooms[2], signer.issue(rooms[2], "p"), body, None)
            answers = await asyncio.gather(*reading, return_exceptions=True)
            assert gateway.inflight == 0
            record = CommandRecord(command_id=f"held-{secrets.token_hex(4)}", room=rooms[0], player="p",
                                   server_time_ms=0, body={"kind": "place_element"})
            await _submitted(gateway, record, while_in_flight=lambda: gateway.inflight == 1)
            assert gateway.inflight == 0
            return refused.value, answers
        finally:
            await gateway.outcomes.close()
            await gateway.client.aclose()
            pauser.close()

    refused, answers = asyncio.run(story())
    assert refused.status == 503 and refused.code == "overloaded", refused
    assert [(answer.status, answer.code) for answer in answers] == [(404, "room_not_found")] * 2, answers


async def _submitted(gateway: Gateway, record: CommandRecord, while_in_flight=None):  # noqa: ANN001, ANN202
    """As a route submits: admitted into a slot, then submitted (answered or timed out: either way one slot)."""
    with gateway.command_slot():
        outcome = await gateway.submit(record)
        assert while_in_flight is None or while_in_flight()
        return outcome
