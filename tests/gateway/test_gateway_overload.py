"""Overload is refused, not queued: a gateway past its in-flight limit answers 503 overloaded quickly.

Given a real stack (engine process, gateway process under uvicorn) whose gateway may decide only 2
commands at once, when 60 players each send a move at the same moment, then some are refused with 503
``overloaded`` and a Retry-After header, no answer is any other 5xx, every accepted move's event is in
its room's log, and every refused move left its room exactly as it was (no event, no stored outcome).

The refusal is made by the command path before any parsing once the body shows no command id
(``http_app.GatewayApp``, its answer encoded once): with the engine paused and the two slots held, a refused command and a
request pipelined after it on the same connection are both answered, the refusal with its JSON, Retry-After
and request id. A refused command that names its id is answered its stored outcome when it was decided,
through this gateway or another (issue 28, item 18), whichever way it came (a client waiting for "100 Continue"
included: one admission rule for every place a command can be refused, issue 29, point 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_stack import Stack, engine_and_gateway, http_answers, open_board_rooms
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.redis_client import connect
from almanac.storage.redis_store import RedisEventStore

PLAYERS = 60
MAX_INFLIGHT = 2
GATEWAY_ENV = {"ALMANAC_GATEWAY_MAX_INFLIGHT": str(MAX_INFLIGHT), "ALMANAC_RATE_COMMANDS": "off",
               "ALMANAC_RATE_ANON": "off", "ALMANAC_COMMAND_TIMEOUT_MS": "3000",
               "ALMANAC_LOG_LEVEL": "info"}  # access lines: who answered a refusal


@pytest.fixture(scope="module")
def gateway_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stack]]:
    """Engine and a uvicorn gateway process with ALMANAC_GATEWAY_MAX_INFLIGHT=2."""
    with engine_and_gateway(redis_url, tmp_path_factory.mktemp("overload-stack"), **GATEWAY_ENV) as running:
        yield running


def _shed_count(scraped: str) -> float:
    """The overloaded commands a gateway's /metrics counts."""
    for family in text_string_to_metric_families(scraped):
        for sample in family.samples:
            if sample.name == "almanac_commands_total" and sample.labels.get("outcome") == "overloaded":
                return sample.value
    return 0.0


async def _slots_held(url: str, count: int = MAX_INFLIGHT, timeout_s: float = 30) -> None:
    """Until the gateway at ``url`` has ``count`` (or more) commands in flight (its /metrics gauge): waited for as it
    happens, not for a fixed time that a busy host may need more of."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        await wait_for(lambda: _inflight_is(http, count), timeout_s, f"{count} commands in flight at {url}")


async def _inflight_is(http: httpx.AsyncClient, count: int) -> bool:
    metrics = (await http.get("/metrics")).text
    return any(float(line.split()[-1]) >= count for line in metrics.splitlines()
               if line.startswith("almanac_gateway_inflight "))


def _while_slots_held(url: str, stack: Stack, holders: list[tuple[str, str]],
                      act: Callable[[], Awaitable[Any]]) -> tuple[Any, list[httpx.Response]]:
    """What ``act`` returns, run while a command of each of ``holders`` (room, token) holds a slot with the engine
    paused (nothing is decided: they wait out the 3 s timeout), and those commands' answers."""
    async def scenario() -> tuple[Any, list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            holding = asyncio.gather(*(client.post(
                f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                json={"command": {"kind": "place_element", "row": 5, "column": 5}}) for room, token in holders))
            await _slots_held(url)
            return await act(), await holding

    engine = stack.processes["engine"]
    engine.send_signal(signal.SIGSTOP)
    try:
        return asyncio.run(scenario())
    finally:
        engine.send_signal(signal.SIGCONT)


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes, count: int) -> bytes:
    """``data`` written, then read until ``count`` answers (each a JSON body) have come."""
    writer.write(data)
    raw = b""
    while raw.count(b"HTTP/1.1 ") < count or not raw.rstrip().endswith(b"}"):
        chunk = await asyncio.wait_for(reader.read(65536), 10)
        assert chunk, f"the connection closed after {raw!r}"
        raw += chunk
    return raw


async def _decided(url: str, room: str, player: str, command_id: str, timeout_s: float = 30) -> None:
    """Until the engine has stored the outcome of ``command_id`` (a client's id) in ``room``."""
    store = RedisEventStore(connect(url))
    try:
        internal = internal_command_id(room, player, command_id)
        await wait_for(lambda: store.outcome(room, internal), timeout_s, f"the outcome of {command_id}")
    finally:
        await store.client.aclose()


async def _storm(url: str, redis_url: str, engine) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 limits=httpx.Limits(max_connections=PLAYERS)) as http:
        rooms = []
        for index in range(PLAYERS):  # one at a time: within the limit
            created = await http.post("/rooms", json={"ruleset": "board", "player": "p", "room": f"storm-{index}"})
            assert created.status_code == 201, created.text
            rooms.append((created.json()["room"], created.json()["token"], created.json()["version"]))

        async def move(room: str, token: str) -> httpx.Response:
            return await http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                                   json={"command": {"kind": "place_element", "row": 5, "column": 5},
                                         "command_id": "storm"})

        # The engine is held still while the storm arrives, so the two slots are surely taken (a fast engine
        # answered all 60 one after another, and nothing was refused), then let go to decide what was let in.
        engine.send_signal(signal.SIGSTOP)
        try:
            moves = [asyncio.ensure_future(move(room, token)) for room, token, _ in rooms]
            storm = asyncio.gather(*moves)
            # The two slots taken (the moves sent and read, however busy the host), then until every other move is
            # answered (refused at once), for at most the second the storm always had.
            await _slots_held(url)
            settled_by = asyncio.get_running_loop().time() + 1.0
            while (sum(m.done() for m in moves) < PLAYERS - MAX_INFLIGHT
                   and asyncio.get_running_loop().time() < settled_by):
                await asyncio.sleep(0.02)
        finally:
            engine.send_signal(signal.SIGCONT)
        answers = await storm

    statuses = [answer.status_code for answer in answers]
    refused = [answer for answer in answers if answer.status_code == 503]
    assert refused, f"no command was refused past an in-flight limit of {MAX_INFLIGHT}: {statuses}"
    assert all(answer.json()["code"] == "overloaded" and answer.headers.get("retry-after") for answer in refused)
    assert set(statuses) <= {200, 503}, statuses
    assert statuses.count(200) >= 1

    store = RedisEventStore(connect(redis_url))
    try:
        for (room, _, created_version), answer in zip(rooms, answers, strict=True):
            log = await store.read(room)
            command_id = internal_command_id(room, "p", "storm")
            if answer.status_code == 200:
                assert log[-1].version == answer.json()["version"]
                assert any(envelope.command_id == command_id for envelope in log), room
            else:
                assert len(log) == created_version, room  # nothing appended
                assert await store.outcome(room, command_id) is None, room  # nothing submitted
    finally:
        await store.client.aclose()


def test_commands_past_the_in_flight_limit_are_refused_and_change_nothing(gateway_url, redis_url: str) -> None:
    asyncio.run(_storm(gateway_url[0], redis_url, gateway_url[1].processes["engine"]))


def test_a_refusal_is_made_before_any_parsing_and_the_connection_stays_usable(gateway_url) -> None:
    url, stack = gateway_url
    rooms = open_board_rooms(url, "held", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    engine.send_signal(signal.SIGSTOP)  # nothing is decided: the commands sent now hold their slots
    try:
        async def hold() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                return await asyncio.gather(*(client.post(
                    f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                    json={"command": {"kind": "place_element", "row": 5, "column": 5}}) for room, token in rooms[:-1]))

        async def refused_then_health() -> tuple[bytes, list[httpx.Response]]:
            holding = asyncio.ensure_future(hold())
            room, token = rooms[-1]
            body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
            request = (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                       f"Content-Type: application/json\r\nX-Request-ID: held-refusal-1\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
            host, port = url.removeprefix("http://").split(":")
            await _slots_held(url)  # (the engine is paused: they wait out the 3 s timeout)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(request + health)  # pipelined: the second request follows the refused body
            raw = b""
            while raw.count(b"HTTP/1.1 ") < 2 or not raw.rstrip().endswith(b"}"):
                chunk = await asyncio.wait_for(reader.read(65536), 10)
                assert chunk, f"the connection closed after {raw!r}"
                raw += chunk
            writer.close()
            assert not holding.done(), "the held commands were answered before the refusal was tested"
            if raw.startswith(b"HTTP/1.1 503"):
                return raw, await holding
            raise AssertionError(f"the gateway never refused: {raw[:300]!r}")

        raw, held = asyncio.run(refused_then_health())
    finally:
        engine.send_signal(signal.SIGCONT)
    (status, headers, payload), (health_status, _, health_body) = http_answers(raw, 2)
    assert status == 503 and headers["retry-after"] and headers["x-request-id"] == "held-refusal-1"
    refusal = json.loads(payload)
    assert refusal["code"] == "overloaded" and refusal["message"]
    assert health_status in (200, 503) and json.loads(health_body)  # the next request was read and answered
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_a_flood_of_refused_commands_is_shed_by_the_connection_guard_before_any_asgi_work(gateway_url) -> None:
    """Issue 28, item 19: past capacity the refusals themselves took the gateway's core. Given both slots held,
    when a client sends commands naming no id, each in one write (as clients send them), then each is answered 503
    ``overloaded`` with Retry-After and its request id by the connection guard itself: no ASGI cycle, so no
    access line (the route's refusals have one), and the connection stays usable for the next request."""
    url, stack = gateway_url
    rooms = open_board_rooms(url, "shed", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
    room, token = rooms[-1]

    def request(request_id: str) -> bytes:
        return (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nX-Request-ID: {request_id}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def scenario() -> tuple[list[bytes], bytes, list[httpx.Response], float]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            before = _shed_count((await client.get("/metrics")).text)
            holding = asyncio.gather(*(client.post(
                f"/rooms/{r}/commands", headers={"Authorization": f"Bearer {t}"},
                json={"command": {"kind": "place_element", "row": 5, "column": 5}}) for r, t in rooms[:-1]))
            await _slots_held(url)  # (the engine is paused)
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            answers = []
            for index in range(20):
                writer.write(request(f"shed-{index}"))
                raw = b""
                while not raw.rstrip().endswith(b"}"):
                    chunk = await asyncio.wait_for(reader.read(65536), 10)
                    assert chunk, f"the connection closed after {raw!r}"
                    raw += chunk
                answers.append(raw)
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: after-shed\r\n\r\n")
            health = await asyncio.wait_for(reader.read(65536), 10)
            writer.close()
            counted = _shed_count((await client.get("/metrics")).text) - before
            return answers, health, await holding, counted

    engine.send_signal(signal.SIGSTOP)
    try:
        answers, health, held, counted = asyncio.run(scenario())
    finally:
        engine.send_signal(signal.SIGCONT)
    assert counted == 20  # every refusal counted (the metrics fold the guard's count in)
    for index, raw in enumerate(answers):
        ((status, headers, payload),) = http_answers(raw, 1)
        assert status == 503 and headers["retry-after"] and headers["x-request-id"] == f"shed-{index}", raw[:300]
        assert json.loads(payload)["code"] == "overloaded" and "ALMANAC_GATEWAY_MAX_INFLIGHT" in json.loads(payload)["message"]
    assert health.startswith(b"HTTP/1.1 ")  # the connection was still read
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]
    log = stack.log("gateway", 400_000)
    assert '"request_id": "after-shed"' in log  # the access line of a request handed on
    shed = [index for index in range(20) if f'"request_id": "shed-{index}"' in log]
    assert not shed, f"refusals that went through the ASGI path: {shed}"


def test_a_command_behind_an_unanswered_request_is_refused_in_order_and_refusals_leave_no_traceback(
        gateway_url) -> None:
    url, stack = gateway_url
    rooms = open_board_rooms(url, "order", MAX_INFLIGHT + 2)
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()

    def command(room: str, token: str, request_id: str, expect: bool = False) -> bytes:
        return (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nX-Request-ID: {request_id}\r\n"
                + ("Expect: 100-continue\r\n" if expect else "")
                + f"Content-Length: {len(body)}\r\n\r\n").encode() + (b"" if expect else body)

    async def act() -> tuple[bytes, bytes, bytes, bytes]:
        # A health check and, pipelined behind it in the same write, a command the gateway must refuse
        reader, writer = await asyncio.open_connection(host, int(port))
        room, token = rooms[2]
        in_order = await _exchange(reader, writer, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: first-in-line\r\n\r\n"
                                   + command(room, token, "behind-it"), 2)
        writer.close()  # closing after a refusal: uvicorn's connection_lost runs on the refused cycle
        # A refused command whose client waits for "100 Continue" before sending its body: told to continue (its
        # body may resend a decided command, whose answer is its outcome), then refused, the connection kept
        reader, writer = await asyncio.open_connection(host, int(port))
        room, token = rooms[3]
        writer.write(command(room, token, "expecting", expect=True))
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        expecting = await _exchange(reader, writer, body, 1)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: after-expect\r\n\r\n")
        after = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
        await asyncio.sleep(0.3)
        return in_order, interim, expecting, after

    (in_order, interim, expecting, after), held = _while_slots_held(url, stack, rooms[:2], act)
    # Then the answers come in the order of the requests: the health check's, then the refusal
    (_, first_headers, _), (status, headers, payload) = http_answers(in_order, 2)
    assert first_headers["x-request-id"] == "first-in-line"
    assert status == 503 and headers["x-request-id"] == "behind-it" and json.loads(payload)["code"] == "overloaded"
    # and a client expecting "100 Continue" is told to continue, refused once its body (no command id) is read, and
    # its connection goes on
    assert interim.startswith(b"HTTP/1.1 100 "), interim
    ((status, headers, payload),) = http_answers(expecting, 1)
    assert status == 503 and headers["x-request-id"] == "expecting" and json.loads(payload)["code"] == "overloaded"
    assert after.startswith(b"HTTP/1.1 200 ") and b"after-expect" in after, after
    # and no connection closed after a refusal left a traceback in the gateway's log
    log = (stack.data_dir / "gateway.log").read_text(errors="replace")
    assert "Traceback" not in log and "message_event" not in log, log[-2000:]
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def _sender(client: httpx.AsyncClient) -> Callable[[str, str, dict], Awaitable[httpx.Response]]:
    """``send(room, token, body)``: a command POSTed by ``client`` as that token's seat."""
    def send(room: str, token: str, body: dict) -> Awaitable[httpx.Response]:
        return client.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"}, json=body)
    return send


@contextlib.asynccontextmanager
async def _engine_stopped_and_slots_held(send: Callable[[str, str, dict], Awaitable[httpx.Response]], engine: Any,
                                         url: str, holders: list[tuple[str, str]],
                                         command: dict) -> AsyncIterator[Awaitable[list[httpx.Response]]]:
    """Inside: the engine stopped and every in-flight slot held by a command of each holder's room (yields the
    holders' answers to await, after the engine went on)."""
    engine.send_signal(signal.SIGSTOP)
    try:
        holding = asyncio.gather(*(send(r, t, {"command": command}) for r, t in holders))
        await _slots_held(url)
        yield holding
    finally:
        engine.send_signal(signal.SIGCONT)


async def _answered_202_then_decided(send: Callable[[str, str, dict], Awaitable[httpx.Response]], engine: Any,
                                     redis_url: str, room: str, token: str, move: dict) -> httpx.Response:
    """With the engine stopped, ``move`` waits out the command timeout (202); the engine then goes on and decides it,
    so a resend of its id has a stored outcome to be answered."""
    engine.send_signal(signal.SIGSTOP)
    try:
        first = await send(room, token, move)
    finally:
        engine.send_signal(signal.SIGCONT)
    await _decided(redis_url, room, "p", move["command_id"])
    return first


def test_a_resend_of_a_decided_command_is_answered_its_outcome_while_admission_refuses(gateway_url,
                                                                                          redis_url: str) -> None:
    """Issue 28, item 18. Given a command answered 202 (its wait ended, the engine held still) and decided once the
    engine went on, when its client resends it while both in-flight slots are held (admission refuses every new
    command), then the resend is answered its stored outcome (200, ``duplicate``), not 503 ``overloaded``; a new
    command of the same room is still refused."""
    url, stack = gateway_url
    (room, token), *holders = open_board_rooms(url, "resent", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    move = {"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "resent"}
    other = {"command": {"kind": "place_element", "row": 6, "column": 6}, "command_id": "new"}

    async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response, list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            send = _sender(client)
            first = await _answered_202_then_decided(send, engine, redis_url, room, token, move)
            async with _engine_stopped_and_slots_held(send, engine, url, holders, move["command"]) as holding:
                resent = await send(room, token, move)
                refused = await send(room, token, other)
            return first, resent, refused, await holding

    first, resent, refused, held = asyncio.run(scenario())
    assert first.status_code == 202, first.text
    assert refused.status_code == 503 and refused.json()["code"] == "overloaded", refused.text
    assert resent.status_code == 200, resent.text
    assert resent.json()["duplicate"] is True and resent.json()["command_id"] == "resent"
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_a_resend_whose_outcome_the_store_cannot_read_while_admission_refuses_is_told_so_not_overloaded(
        tmp_path: Path) -> None:
    """Issue 28, item 18, during a store's failure (a Cluster failing over, a Redis that stopped answering). Given a
    command answered 202 and decided once the engine went on, when its client resends it while both in-flight slots
    are held and the store does not answer (its process stopped), then the resend is answered 503
    ``store_unavailable`` (its outcome could not be read: resend it later), never 503 ``overloaded``, which would tell
    the client that nothing was done; once the store answers again, the resend gets its stored outcome."""
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    (tmp_path / "stack").mkdir()
    try:
        with engine_and_gateway(server.url, tmp_path / "stack", **GATEWAY_ENV) as (url, stack):
            (room, token), *holders = open_board_rooms(url, "unread", MAX_INFLIGHT + 1)
            engine = stack.processes["engine"]
            move = {"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "unread"}

            async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
                async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                    send = _sender(client)
                    first = await _answered_202_then_decided(send, engine, server.url, room, token, move)
                    async with _engine_stopped_and_slots_held(send, engine, url, holders, move["command"]) as holding:
                        server.process.send_signal(signal.SIGSTOP)  # the store stops answering
                        try:
                            resent = await send(room, token, move)
                        finally:
                            server.process.send_signal(signal.SIGCONT)
                    await holding
                    return first, resent, await send(room, token, move)

            first, resent, later = asyncio.run(scenario())
    finally:
        server.stop()
    assert first.status_code == 202, first.text
    assert resent.status_code == 503 and resent.json()["code"] == "store_unavailable", resent.text
    assert resent.headers["Retry-After"]
    assert later.status_code == 200 and later.json()["duplicate"] is True, later.text


def test_a_resend_that_waits_for_100_continue_is_answered_its_outcome_as_any_resend(gateway_url,
                                                                                     redis_url: str) -> None:
    """Issue 29, point 2: one admission rule for a command wherever it is first refused. Given a command answered
    202 and decided once the engine went on, when its client resends it while both in-flight slots are held, the
    second time with "Expect: 100-continue" (as curl does for a larger body), then both resends are answered its
    stored outcome (200, ``duplicate``): the answer does not depend on the path the request took (the old code
    refused the one waiting for "100 Continue" before reading its body, 503 ``overloaded``, against item 18)."""
    url, stack = gateway_url
    (room, token), *holders = open_board_rooms(url, "resent-expect", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    move = {"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "resent-expect"}
    body = json.dumps(move).encode()
    host, port = url.removeprefix("http://").split(":")

    async def expecting_resend() -> bytes:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write((f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                      f"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        if head.startswith(b"HTTP/1.1 100 "):  # told to continue: the body follows
            writer.write(body)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
        return head

    async def scenario() -> tuple[httpx.Response, httpx.Response, bytes, list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            send = _sender(client)
            first = await _answered_202_then_decided(send, engine, redis_url, room, token, move)
            async with _engine_stopped_and_slots_held(send, engine, url, holders, move["command"]) as holding:
                resent = await send(room, token, move)
                expecting = await expecting_resend()
            return first, resent, expecting, await holding

    first, resent, expecting, held = asyncio.run(scenario())
    assert first.status_code == 202, first.text
    assert resent.status_code == 200 and resent.json()["duplicate"] is True, resent.text
    assert expecting.startswith(b"HTTP/1.1 200 "), expecting
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_a_resent_create_that_was_decided_gets_its_room_and_token_while_admission_refuses(gateway_url,
                                                                                            redis_url: str) -> None:
    """Issue 28, item 18, for a create: answered 202 while the engine held still, decided once it went on, then
    resent with the same (long: the creator's proof) command id while both in-flight slots are held: 201 with
    the room and the creator's token (``duplicate``), not 503 ``overloaded``; another create is still refused."""
    url, stack = gateway_url
    holders = open_board_rooms(url, "resent-create-holder", MAX_INFLIGHT)
    engine = stack.processes["engine"]
    create = {"ruleset": "board", "player": "p", "room": "resent-create", "command_id": "resent-create-0123456789"}
    other = {"ruleset": "board", "player": "p", "room": "resent-create-other"}

    async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response, list[httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            engine.send_signal(signal.SIGSTOP)
            try:
                first = await client.post("/rooms", json=create)  # waits out the 3 s timeout: 202
            finally:
                engine.send_signal(signal.SIGCONT)
            # the engine decides it meanwhile (its join is not sent: it never answered)
            await _decided(redis_url, create["room"], create["player"], create["command_id"])
            engine.send_signal(signal.SIGSTOP)
            try:
                holding = asyncio.gather(*(client.post(
                    f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                    json={"command": {"kind": "place_element", "row": 5, "column": 5}}) for room, token in holders))
                await _slots_held(url)
                refused = await client.post("/rooms", json=other)
                resent = asyncio.ensure_future(client.post("/rooms", json=create))
                await asyncio.sleep(0.5)
            finally:
                engine.send_signal(signal.SIGCONT)  # the resend goes through the engine, which finds it decided
            return first, await resent, refused, await holding

    first, resent, refused, held = asyncio.run(scenario())
    assert first.status_code == 202, first.text
    assert refused.status_code == 503 and refused.json()["code"] == "overloaded", refused.text
    assert resent.status_code == 201, resent.text
    assert resent.json()["duplicate"] is True and resent.json()["room"] == "resent-create" and resent.json()["token"]
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_a_command_decided_through_one_gateway_is_answered_its_outcome_by_another_that_refuses(gateway_url) -> None:
    """Issue 28, item 18, behind a load balancer (or after a restart): given a move and a create decided through
    gateway A, when their clients resend them to gateway B, which never saw them, while B's two in-flight slots
    are held (admission refuses every new command), then B answers the move its stored outcome (200,
    ``duplicate``) and admits the create's resend (201, its room and token), not 503 ``overloaded``; a new
    command is still refused."""
    url_a, stack = gateway_url
    url_b = stack.start_gateway("gateway-b", **GATEWAY_ENV)
    (room, token), *holders = open_board_rooms(url_a, "across", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    move = {"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "across"}
    other = {"command": {"kind": "place_element", "row": 6, "column": 6}, "command_id": "new"}
    create = {"ruleset": "board", "player": "p", "room": "across-created", "command_id": "across-create-0123456789"}

    async def scenario() -> tuple[list[httpx.Response], list[httpx.Response], list[httpx.Response]]:
        async with (httpx.AsyncClient(base_url=url_a, timeout=30) as a,
                    httpx.AsyncClient(base_url=url_b, timeout=30) as b):
            def send(client: httpx.AsyncClient, room: str, token: str, body: dict) -> Awaitable[httpx.Response]:
                return client.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"}, json=body)

            decided = [await send(a, room, token, move), await a.post("/rooms", json=create)]
            engine.send_signal(signal.SIGSTOP)
            try:
                holding = asyncio.gather(*(send(b, r, t, {"command": move["command"]}) for r, t in holders))
                await _slots_held(url_b)  # both of B's
                resent = await send(b, room, token, move)
                refused = await send(b, room, token, other)
                recreated = asyncio.ensure_future(b.post("/rooms", json=create))
                await asyncio.sleep(0.5)
            finally:
                engine.send_signal(signal.SIGCONT)  # the create's resend goes through the engine, which finds it decided
            return decided, [resent, refused, await recreated], await holding

    (moved, created), (resent, refused, recreated), held = asyncio.run(scenario())
    assert moved.status_code == 200 and created.status_code == 201, (moved.text, created.text)
    assert refused.status_code == 503 and refused.json()["code"] == "overloaded", refused.text
    assert resent.status_code == 200, resent.text
    assert resent.json()["duplicate"] is True and resent.json()["version"] == moved.json()["version"]
    assert recreated.status_code == 201, recreated.text
    assert recreated.json()["duplicate"] is True and recreated.json()["room"] == "across-created"
    assert recreated.json()["token"] and recreated.json()["joined"] is True
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_a_client_whose_every_command_is_shed_keeps_its_connection_past_the_keep_alive_timeout(gateway_url) -> None:
    """Issue 28, item 19: uvicorn never sees a request the connection guard sheds, so its keep-alive timer, started
    by the last answer it wrote, closed a connection whose every request since was shed while the client kept
    sending: at three times capacity the benchmark's client got a reset connection instead of a 503 (``unexpected
    ReadError``). Given a gateway whose read timeout, and so keep-alive, is 600 ms, with both its slots held, when a
    client whose first request (/health) was answered sends a command naming no id every 100 ms for three times
    that long on the same connection, then each is
    answered 503 ``overloaded`` on that same connection; and once the client stops sending, the connection is
    closed by the read timeout (idleness is still bounded)."""
    url, stack = gateway_url
    read_timeout_s = 0.6
    short = stack.start_gateway("gateway-short-keepalive", **GATEWAY_ENV,
                                ALMANAC_HTTP_READ_TIMEOUT_MS=str(int(read_timeout_s * 1000)))
    rooms = open_board_rooms(short, "keepalive", MAX_INFLIGHT + 1)
    engine = stack.processes["engine"]
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
    room, token = rooms[-1]
    request = (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    async def scenario() -> tuple[list[int], bytes]:
        async with httpx.AsyncClient(base_url=short, timeout=30) as client:
            holding = asyncio.gather(*(client.post(
                f"/rooms/{r}/commands", headers={"Authorization": f"Bearer {t}"},
                json={"command": {"kind": "place_element", "row": 5, "column": 5}}) for r, t in rooms[:-1]))
            await _slots_held(short)  # (the engine is paused)
            host, port = short.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            # A request uvicorn answers first: its keep-alive timer runs from that answer.
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            health = b""
            while not health.rstrip().endswith(b"}"):
                health += await asyncio.wait_for(reader.read(65536), 10)
            statuses = [http_answers(health, 1)[0][0]]
            loop = asyncio.get_running_loop()
            started = loop.time()
            # Ten refusals at least, and for three read timeouts at least: a slow host sends fewer per second.
            while len(statuses) < 11 or loop.time() - started < 3 * read_timeout_s:
                writer.write(request)
                raw = b""
                while not raw.rstrip().endswith(b"}"):
                    chunk = await asyncio.wait_for(reader.read(65536), 10)
                    assert chunk, f"the connection closed after {len(statuses)} refusals, {raw!r}"
                    raw += chunk
                statuses.append(http_answers(raw, 1)[0][0])
                await asyncio.sleep(0.1)
            # Silent from here: the guard's read timeout closes it (read returns b"" at the close).
            closed = await asyncio.wait_for(reader.read(65536), 10 * read_timeout_s)
            writer.close()
            engine.send_signal(signal.SIGCONT)
            await holding
            return statuses, closed

    engine.send_signal(signal.SIGSTOP)
    try:
        statuses, closed = asyncio.run(scenario())
    finally:
        engine.send_signal(signal.SIGCONT)
    assert statuses[0] == 200 and len(statuses) >= 10 and set(statuses[1:]) == {503}, statuses
    assert closed == b""


def test_refused_commands_without_a_request_id_get_fresh_ones_and_every_framing_is_answered_in_order(
        gateway_url) -> None:
    """Issue 28, item 19: past capacity most reads are one command request as the benchmark's clients send it (no
    request id of their own). Given both slots held, when a client sends such commands, then each is answered 503
    ``overloaded`` with Retry-After and a fresh request id, by the connection guard (no access line names it); and
    when the same connection then sends a Connection header, a chunked body, two commands in one write and a body
    naming its ``command_id``, then each is answered 503 in order and the connection is kept."""
    url, stack = gateway_url
    rooms = open_board_rooms(url, "plain", MAX_INFLIGHT + 1)
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
    room, token = rooms[-1]
    head = f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
    plain = (head + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    chunked = (head + f"Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n").encode() + body + b"\r\n0\r\n\r\n"
    named = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}, "command_id": "c-1"}).encode()
    others = [  # (bytes in one write, answers expected)
        ((head + f"Connection: keep-alive\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body, 1),
        (chunked, 1),
        (plain + plain, 2),
        ((head + f"Content-Length: {len(named)}\r\n\r\n").encode() + named, 1),
    ]

    async def act() -> tuple[list[bytes], list[bytes]]:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        shed = [await _exchange(reader, writer, plain, 1) for _ in range(10)]
        parsed = [await _exchange(reader, writer, data, count) for data, count in others]
        writer.close()
        return shed, parsed

    (shed, parsed), held = _while_slots_held(url, stack, rooms[:-1], act)
    log = stack.log("gateway", 400_000)
    ids = set()
    for raw in shed:
        ((status, headers, payload),) = http_answers(raw, 1)
        assert status == 503 and headers["retry-after"] and json.loads(payload)["code"] == "overloaded", raw[:300]
        ids.add(headers["x-request-id"])
        assert f'"request_id": "{headers["x-request-id"]}"' not in log  # no ASGI cycle: the guard answered it
    assert len(ids) == len(shed) and all(len(rid) == 16 for rid in ids)  # a fresh id each
    for raw, (_, count) in zip(parsed, others, strict=True):
        answers = http_answers(raw, count)
        assert [status for status, _, _ in answers] == [503] * count, raw[:300]
        assert all(json.loads(payload)["code"] == "overloaded" for _, _, payload in answers)
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]


def test_an_http_1_0_command_asking_keep_alive_is_handed_on_past_capacity_not_shed(gateway_url) -> None:
    """The guard sheds HTTP/1.1 keep-alive requests only: its refusal is an HTTP/1.1 answer without a Connection
    header, which an HTTP/1.0 client would not keep its connection for (it knows the version from the absence of a
    Connection header, not by reading it each time: ``_sheddable_head``). Given both slots held, when a client sends a
    command as HTTP/1.0 with ``Connection: keep-alive``, and an HTTP/1.1 one after it on another connection, then both
    are refused 503 ``overloaded``, the first by the command path (its access line names its request id), the second
    by the guard (none does)."""
    url, stack = gateway_url
    rooms = open_board_rooms(url, "old-version", MAX_INFLIGHT + 1)
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
    room, token = rooms[-1]

    def request(version: str, request_id: str, connection: str = "") -> bytes:
        return (f"POST /rooms/{room}/commands HTTP/{version}\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                f"{connection}Content-Type: application/json\r\nX-Request-ID: {request_id}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def answer(data: bytes) -> bytes:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        raw = await _exchange(reader, writer, data, 1)
        writer.close()
        return raw

    async def act() -> tuple[bytes, bytes]:
        return (await answer(request("1.0", "old-keep-alive", "Connection: keep-alive\r\n")),
                await answer(request("1.1", "new-keep-alive")))

    (old, new), held = _while_slots_held(url, stack, rooms[:-1], act)
    for raw in (old, new):
        ((status, headers, payload),) = http_answers(raw, 1)
        assert status == 503 and headers["retry-after"] and json.loads(payload)["code"] == "overloaded", raw[:300]
    assert all(answer.status_code in (200, 202) for answer in held), [a.text for a in held]
    log = stack.log("gateway", 400_000)
    assert '"request_id": "old-keep-alive"' in log  # handed on: the command path refused it
    assert '"request_id": "new-keep-alive"' not in log  # shed by the guard
