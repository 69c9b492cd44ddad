"""Whole-room reads (/series, /verification, ...) cannot stall a gateway for its other clients (issue 28).

Given a real stack (engine process, gateway process, Redis) and a claim room thousands of versions long, when
clients fire many concurrent ``/series`` (public, no token) and ``/verification`` (a player's token) calls,
then another client's ``/health`` and a normal command are answered within a bound all along, and every heavy
call is either answered 200 or refused 503 ``overloaded`` with Retry-After at once: never another 5xx.

And no whole-room read outlives its client, on any route, by construction: every operation of the gateway's own
/openapi.json is called (tests/openapi_calls.py fills its parameters) on a short room to see, from the gateway's
count of heavy reads (/metrics), which ones enter HeavyReads.run; each of those is then asked on a 20,000-version
room by a client that hangs up, and its slot must come back at once; every other call must answer that room
quickly (no whole-room read on the gateway's loop). An operation added tomorrow is attacked the day it is added.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from gateway_stack import Stack, engine_and_gateway, open_board_rooms
from openapi_calls import calls
from schema_walk import offline_openapi

from almanac.events import registry
from almanac.services.bus import internal_command_id
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner, resolve_secret
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord, Outcome, RoomService
from almanac.storage.redis_store import RedisEventStore

VERSIONS = 2_000  # ~0.5 s of fold per /series on the gateway's loop before the fix
# The hung client's room: as long as a /series reads (api_console.MAX_SERIES_VERSIONS). The cheapest heavy reads of
# a claim room need that many to last long enough for a hang-up to be told from their end (at 20,000: a player's
# bundle ~0.5 s, a dispute range ~0.6 s, its checkpoints ~0.8 s; at 4,000 each was under 0.2 s, and a read that
# ignored its client's leaving passed); the others are seconds long and timed only up to TIMED_S.
HUNG_VERSIONS = 20_000
CRUISE_BATCH = 500
HEAVY_CALLS = 24
BOUND_S = 1.0  # what another client may wait for /health or a command while the heavy reads run


@pytest.fixture(scope="module")
def gateway(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stack]]:
    with engine_and_gateway(redis_url, tmp_path_factory.mktemp("heavy-reads"), ALMANAC_RATE_ANON="off",
                            ALMANAC_RATE_COMMANDS="off") as running:
        yield running


def long_claim_room(url: str, stack: Stack, versions: int = VERSIONS) -> tuple[str, str]:
    """(room, p's token) of a claim room created over HTTP and played ``VERSIONS`` cruises long, appended through
    the engine's own write path (RoomService) rather than one HTTP request each."""
    created = httpx.post(f"{url}/rooms", json={"ruleset": "claim", "player": "p"}, timeout=10)
    assert created.status_code == 201, created.text
    room, token = created.json()["room"], created.json()["token"]
    cruise(stack, room, 0, versions)
    return room, token


def cruise(stack: Stack, room: str, first: int, count: int) -> None:
    """p's cruises ``first`` to ``first + count - 1`` in ``room``, each accepted, through RoomService."""
    async def run() -> None:
        client = connect(stack.redis_url)
        service = RoomService(RedisEventStore(client, 16))
        now_ms = int(time.time() * 1000)  # claim times each command after the claim was staked
        try:
            # In batches (one ordered write each): a long room is built in seconds, not a round trip per version.
            for start in range(first, first + count, CRUISE_BATCH):
                # Ids scoped to the room as the gateway scopes a client's (the store dedupes per shard): with bare
                # "cruise-N", a room on the shard of one cruised before got that room's outcomes back and none of
                # its cruises (two hung rooms on one shard, 1 in 16: one read ended at once, holding no slot).
                records = [CommandRecord(command_id=internal_command_id(room, "p", f"cruise-{index}"), room=room,
                                         player="p", server_time_ms=now_ms + index, body={"kind": "cruise"})
                           for index in range(start, min(start + CRUISE_BATCH, first + count))]
                for record, outcome in zip(records, await service.handle_many(records), strict=True):
                    if outcome is None:  # the batch left it to be decided alone (handle_many says when)
                        outcome = await service.handle(record)
                    assert isinstance(outcome, Outcome) and outcome.accepted and not outcome.duplicate, outcome
        finally:
            await client.aclose()

    asyncio.run(run())


def test_heavy_reads_leave_health_and_commands_answered(gateway: tuple[str, Stack]) -> None:
    url, stack = gateway
    room, token = long_claim_room(url, stack)
    [(board, board_token)] = open_board_rooms(url, "heavy-board", 1)

    async def attack() -> tuple[list[httpx.Response], list[float], list[float]]:
        limits = httpx.Limits(max_connections=HEAVY_CALLS + 4)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as heavy, \
                httpx.AsyncClient(base_url=url, timeout=10) as other:
            # When many clients ask for the whole room's series and verification at once
            calls = [asyncio.create_task(heavy.get(f"/rooms/{room}/series") if index % 2 else
                                         heavy.get(f"/rooms/{room}/verification",
                                                   headers={"Authorization": f"Bearer {token}"}))
                     for index in range(HEAVY_CALLS)]
            health, commands = [], []
            await asyncio.sleep(0.05)
            # then another client's /health and commands are answered in time all along
            for row in range(6):
                started = time.monotonic()
                assert (await other.get("/health")).status_code == 200
                health.append(time.monotonic() - started)
                started = time.monotonic()
                move = {"command": {"kind": "place_element", "row": 2 * row, "column": 5}}
                answer = await other.post(f"/rooms/{board}/commands", json=move,
                                          headers={"Authorization": f"Bearer {board_token}"})
                assert answer.status_code in (200, 422), answer.text  # decided: placed, or refused by the rules
                commands.append(time.monotonic() - started)
            return await asyncio.gather(*calls), health, commands

    answers, health, commands = asyncio.run(attack())
    print(f"/health under {HEAVY_CALLS} heavy reads of {VERSIONS} versions: max {max(health):.3f} s; "
          f"a command: max {max(commands):.3f} s")
    assert max(health) < BOUND_S, health
    assert max(commands) < BOUND_S, commands
    # and each heavy call was answered, or refused at once with when to come back: never another 5xx
    statuses = [answer.status_code for answer in answers]
    assert set(statuses) <= {200, 503}, [a.text for a in answers if a.status_code not in (200, 503)]
    assert 200 in statuses
    for answer in answers:
        if answer.status_code == 503:
            assert answer.json()["code"] == "overloaded" and answer.headers["Retry-After"], answer.text
    # and a series answered is the whole room's (the slots may all have gone to /verification calls: then one more)
    series = next((a.json() for a in answers if a.status_code == 200 and a.url.path.endswith("/series")), None)
    if series is None:
        again = httpx.get(f"{url}/rooms/{room}/series", timeout=60)
        assert again.status_code == 200, again.text
        series = again.json()
    assert len(series["versions"]) >= VERSIONS


def test_a_heavy_read_past_the_limit_is_refused_at_once(gateway: tuple[str, Stack]) -> None:
    # Given the heavy-read slots held (the default 2), a third heavy read is refused 503 in well under its cost.
    url, stack = gateway
    room, token = long_claim_room(url, stack)

    async def three() -> list[tuple[int, float, float, httpx.Response]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            async def timed(path: str) -> tuple[int, float, float, httpx.Response]:
                started = time.monotonic()
                answer = await http.get(path, headers={"Authorization": f"Bearer {token}"})
                return answer.status_code, time.monotonic() - started, time.monotonic(), answer

            holders = [asyncio.create_task(timed(f"/rooms/{room}/verification")) for _ in range(2)]
            await asyncio.sleep(0.1)
            third = await timed(f"/rooms/{room}/verification")
            return [third, *await asyncio.gather(*holders)]

    # A try counts only where both holders got a slot and were still being answered after the third was: on a quiet
    # machine a verification can end within the 0.1 s before the third is sent, its slot free again (a CI run saw
    # it); on a loaded one a read of the story before may still hold a slot when a holder comes (its client gone,
    # its fold not yet: a CI run saw a holder refused). A gateway without the limit answers the third 200 while both
    # still run, which fails below on every try.
    # Each try a version on: a verification is kept by its room and version, and a retry of the same version was
    # answered from it at once, its holders ending before the third every time.
    for extra in range(5):
        (status, took, ended, answer), *held = asyncio.run(three())
        if [s for s, _, _, _ in held] == [200, 200] and all(held_ended > ended for _, _, held_ended, _ in held):
            break
        time.sleep(1)
        cruise(stack, room, VERSIONS + extra, 1)
    assert [s for s, _, _, _ in held] == [200, 200], "a holder was refused in five tries"
    assert all(held_ended > ended for _, _, held_ended, _ in held), "both holders ended first in five tries"
    assert status == 503 and answer.json()["code"] == "overloaded" and answer.headers["Retry-After"] == "1"
    assert took < min(t for _, t, _, _ in held) / 2, (took, held)


def test_a_series_seen_at_this_version_is_answered_without_a_slot(gateway: tuple[str, Stack]) -> None:
    # Given a room whose series was read once at its latest version
    url, stack = gateway
    room, token = long_claim_room(url, stack)
    first = httpx.get(f"{url}/rooms/{room}/series", timeout=60)
    assert first.status_code == 200, first.text

    async def while_the_slots_are_held() -> tuple[httpx.Response, list[int]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            holders = [asyncio.create_task(http.get(f"/rooms/{room}/verification",
                                                    headers={"Authorization": f"Bearer {token}"}))
                       for _ in range(2)]
            await asyncio.sleep(0.1)
            again = await http.get(f"/rooms/{room}/series")
            return again, [held.status_code for held in await asyncio.gather(*holders)]

    # when it is asked again while every heavy-read slot is held, then it is answered, the same
    again, held = asyncio.run(while_the_slots_are_held())
    assert held == [200, 200]
    assert again.status_code == 200 and again.json() == first.json()


# The hung-client story's short room, where each call is asked once to see whether it enters HeavyReads.run (the
# long room, HUNG_VERSIONS, is where each heavy read is timed and attacked: see ``routes``).
SHORT_VERSIONS = 20
# A call that did not enter HeavyReads.run answers the long room within this, on the gateway's own loop: no
# whole-room re-decide or series there (each takes seconds on it). A claim room's bare fold (~0.15 s) is not told
# apart from a busy host's wait, nor is the first answer about a room in a process: its checkpoint head hashes the
# whole room (services.checkpoints.Checkpointer.head; ~0.4 s at 20,000 versions, in slices that give the loop back:
# test_the_first_answer_about_a_long_room_leaves_other_clients_answered).
LIGHT_S = 1.0
# A heavy read is timed up to this (F; longer ones are abandoned there, and F is this): its client then hangs up
# as soon as its read is seen running. A read that ignored its client's leaving would hold its slot for most of F.
# (At 1 s, a third of it was too near what a /verification of 20,000 versions, seconds long, took to stop on a host
# running three benchmarks beside it: 0.50 s once, 0.08-0.17 s most times.)
TIMED_S = 2.0
# A heavy read shorter than this on the long room is not held long enough to be seen holding its slot for sure (a
# claim room's bare fold, ~0.15 s, was timed at 0.31 s on a busy host and had ended before it was seen): its client's
# hang-up is still sent, and its slot must come back as fast, but that it was held is not required. Below it, a read
# that ignored its client's leaving is not told apart either (FREED_FLOOR_S).
HELD_S = 0.5
# What a hung-up short read may take to give its slot back: the rest of its work (a read of the whole log from Redis
# is one round trip, ~0.1 s here), the hang-up's own way to the gateway, and this test's polls of /metrics (0.30 s
# was seen on a host running three benchmarks beside it). A read that ignores its client's leaving still fails from
# ~0.6 s on (most of it left at the hang-up): each heavy read of the long room but the cheapest. (0.35 s left too
# little room for the 0.30 s seen on a loaded host: a review, 2026-12-05.)
FREED_FLOOR_S = 0.45
METRIC = re.compile(r"^(almanac_gateway_heavy_reads(?:_asked_total)?) (\S+)$", re.M)


def heavy_counts(http: httpx.Client) -> tuple[int, int]:
    """(heavy reads running now, heavy reads asked in all) of the gateway ``http`` asks, from its public /metrics."""
    found = dict(METRIC.findall(http.get("/metrics").text))
    return int(float(found["almanac_gateway_heavy_reads"])), int(float(found["almanac_gateway_heavy_reads_asked_total"]))


def fillers(room: str) -> dict[str, list[str]]:
    """Values for the document's parameters, by name, for a claim room cruised by p (every one an operation
    declares must be here: tests/openapi_calls.py)."""
    return {
        "room": [room], "other": [room], "version": ["2"], "from_version": ["1"], "to_version": ["2"], "at": ["2"],
        "at_other": ["1"], "since": ["1"], "from": ["1"], "to": ["2"], "limit": ["1000"],
        "cursor": ["bm90LWEtY3Vyc29y"], "command_id": ["cruise-0"], "ruleset": ["claim"], "name": ["claim"],
        "model": sorted(registry.read_models()), "view": ["trade"], "item": ["1"], "id": ["1"], "trade": ["1"],
        "player": ["p"], "path": ["room.players"], "where": ["room.ended == true"], "against": ["claim@1"],
        "linear": ["true"], "subscription": ["wh_0000000000000000"],
    }


REFUSED = b"[]"  # a body every write's schema refuses: for the writes that would change the rooms asked


def bodies(url: str, room: str, auditor: str, verify: bytes | None = None) -> dict[str, bytes]:
    """A body for each write's request schema, by its name, for ``room`` (a write whose schema is not here fails the
    story until it is taught): one the write takes where it leaves the room as it is, else one its schema refuses.
    A bundle to verify: ``verify``, or the room's own (its first two versions)."""
    if verify is None:
        bundle = httpx.get(f"{url}/rooms/{room}/dispute?from=1&to=2", timeout=60,
                           headers={"Authorization": f"Bearer {auditor}"})
        assert bundle.status_code == 200, bundle.text
        verify = json.dumps({"bundle": bundle.json()}).encode()
    return {"CreateRoomRequest": json.dumps({"ruleset": "claim", "player": "q"}).encode(),
            "ForkRoomRequest": json.dumps({"at": 2}).encode(),
            "VerifyBundleRequest": verify,
            "CommandRequest": REFUSED, "BotSeatRequest": REFUSED, "JoinRoomRequest": REFUSED,
            "ReclaimSeatRequest": REFUSED, "EndRoomRequest": REFUSED, "SubscribeRequest": REFUSED}


class Call(NamedTuple):
    """One call of an operation on a room: its method, URL (path and query), who asks, and its body's schema."""

    operation: str
    method: str
    url: str
    reader: str  # "player" (the room's p) or "auditor"
    body: str | None  # the request schema's name: ``bodies`` gives each room's

    @property
    def form(self) -> str:
        """The operation with the names of its query parameters: what one heavy read of it does (bisect where, bisect
        where linear, bisect against...), whatever the values."""
        return self.operation + "".join(f" {name}" for name in sorted(parse_qs(urlsplit(self.url).query)))

    def on(self, short: str, room: str) -> Call:
        """The same call on another room."""
        return self._replace(url=self.url.replace(short, room))

    def request(self, host: str, room: Room) -> tuple[str, dict[str, str], bytes | None]:
        """(URL, headers, body) to send it with on ``room`` (its readers' tokens and bodies)."""
        return (self.url, {"Authorization": f"Bearer {room.tokens[self.reader]}", "Content-Type": "application/json",
                           "Host": host}, None if self.body is None else room.bodies[self.body])

    def send(self, http: httpx.Client, room: Room, timeout_s: float = 120) -> tuple[httpx.Response | None, float]:
        """Its answer on ``room`` (None: not within ``timeout_s``, its client gone), and how long it took."""
        path, headers, body = self.request(http.base_url.netloc.decode(), room)
        started = time.monotonic()
        try:
            answer = http.request(self.method, path, content=body, headers=headers, timeout=timeout_s)
        except httpx.ReadTimeout:
            return None, timeout_s
        return answer, time.monotonic() - started

    def hung(self, http: httpx.Client, room: Room) -> socket.socket:
        """Sent on ``room`` on a socket of its own whose answer is never read: the hung client."""
        parts = urlsplit(str(http.base_url))
        path, headers, body = self.request(parts.netloc, room)
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        length = f"Content-Length: {len(body)}\r\n" if body is not None else ""
        sock = socket.create_connection((parts.hostname, parts.port))
        sock.sendall(f"{self.method} {path} HTTP/1.1\r\n{head}{length}\r\n".encode() + (body or b""))
        return sock


def all_calls(document: dict, room: str) -> list[Call]:
    """Every operation of ``document`` with each filling of its parameters for ``room`` (tests/openapi_calls.py), as
    each reader; a write with its body's schema (``bodies`` must give one)."""
    found = []
    for operation, method, path, _ in calls(document, fillers(room)):
        schema = document["paths"][operation.split(" ", 1)[1]][method].get("requestBody", {})
        name = schema.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
        found += [Call(operation, method.upper(), path, reader, name or None) for reader in ("player", "auditor")]
    return found


class Room(NamedTuple):
    """A claim room cruised by p: its id, its readers' tokens (p's, an auditor's) and the bodies of writes on it."""

    room: str
    tokens: dict[str, str]
    bodies: dict[str, bytes]


class Routes(NamedTuple):
    """What the short room showed (every call, and the first of each form that entered HeavyReads.run), and the
    long room."""

    short: Room
    calls: list[Call]
    heavy: dict[str, Call]
    long: Room


@pytest.fixture(scope="module")
def http(gateway: tuple[str, Stack]) -> Iterator[httpx.Client]:
    """One client of the gateway for the hung-client story (its many calls, its polls of /metrics)."""
    with httpx.Client(base_url=gateway[0], timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def hung_room(gateway: tuple[str, Stack]) -> tuple[str, str]:
    """(room, p's token) of a claim room as long as a /series reads (HUNG_VERSIONS), built once for the module."""
    url, stack = gateway
    return long_claim_room(url, stack, HUNG_VERSIONS)


@pytest.fixture(scope="module")
def routes(gateway: tuple[str, Stack], http: httpx.Client, hung_room: tuple[str, str]) -> Routes:
    """Which operations read a whole room, seen from outside: each call of every operation of the gateway's own
    /openapi.json is asked once on a short claim room, as its player and as an auditor, and the gateway's count of
    heavy reads asked (its /metrics) says whether it entered HeavyReads.run. And a claim room as long as a /series
    reads, built once for every operation's story."""
    url, stack = gateway
    auditor = TokenSigner(resolve_secret("", str(stack.data_dir)), 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR)

    def claim_room(room: str, token: str, bundle: bytes | None = None) -> Room:
        return Room(room, {"player": token, "auditor": auditor}, bodies(url, room, auditor, bundle))

    short = claim_room(*long_claim_room(url, stack, SHORT_VERSIONS))
    document = http.get("/openapi.json").json()
    assert sorted(f"{m.upper()} {p}" for p, ops in document["paths"].items() for m in ops) == OPERATIONS
    every = all_calls(document, short.room)
    unknown = {call.body for call in every if call.body is not None} - set(short.bodies)
    assert not unknown, f"no body for {unknown}: teach bodies() (this file)"
    heavy: dict[str, Call] = {}
    _, asked = heavy_counts(http)
    for call in every:
        answer, _ = call.send(http, short)
        assert answer is not None and answer.status_code < 500, (call, answer.text if answer else None)
        if (after := heavy_counts(http)[1]) > asked:
            heavy.setdefault(call.form, call)
        asked = after
    assert heavy, "no call entered HeavyReads.run: the gateway's count of heavy reads asked (/metrics) never moved"
    print(f"{len(every)} calls of {len(OPERATIONS)} operations: {len(heavy)} forms of heavy reads")
    # The gateway's first answer about the long room hashes its checkpoint head from version 1 (0.3-0.7 s here, 2.1 s
    # under the whole suite), whatever the route: given once now, so that LIGHT_S times each call's own work. That
    # first answer keeps other clients answered: test_the_first_answer_about_a_long_room_leaves_other_clients_answered.
    first = http.get(f"/rooms/{hung_room[0]}", headers={"Authorization": f"Bearer {hung_room[1]}"}, timeout=60)
    assert first.status_code == 200, first.text
    # A bundle of a long room is past the body limit (ALMANAC_MAX_BODY_BYTES): the short room's is posted there.
    return Routes(short, every, heavy, claim_room(*hung_room, short.bodies["VerifyBundleRequest"]))


# Every operation the gateway documents, known without a stack (a story each: an operation added is one more).
with tempfile.TemporaryDirectory(prefix="almanac-heavy-doc-") as _data_dir:
    OPERATIONS = sorted(f"{method.upper()} {path}" for path, operations in
                        offline_openapi(Path(_data_dir))["paths"].items() for method in operations)


def slots_back(http: httpx.Client, within_s: float) -> tuple[int, float]:
    """(heavy reads running, seconds waited): once none runs, or at ``within_s``."""
    started = time.monotonic()
    while (running := heavy_counts(http)[0]) and time.monotonic() - started < within_s:
        time.sleep(0.02)  # each /metrics costs the gateway a few ms: polled faster, it slowed the reads it watched
    return running, time.monotonic() - started


# The long room's cruises after its own (a version more before each attack: a /series just read is kept by version).
MORE_CRUISES = itertools.count(HUNG_VERSIONS)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_no_whole_room_read_outlives_its_hung_up_client(gateway: tuple[str, Stack], http: httpx.Client,
                                                        routes: Routes, operation: str) -> None:
    """Issue 28: a client that asked for heavy reads and hung up kept the gateway's heavy-read slots busy for as
    long as their folds ran (every other client's heavy read refused 503 meanwhile), and a whole-room read on the
    gateway's loop held every client. Nothing here names the heavy routes: for every operation of the gateway's
    /openapi.json, given a claim room of HUNG_VERSIONS versions, each form of the operation that entered
    HeavyReads.run on a short room (``routes``) is timed on the long room (F, at most TIMED_S), then asked again by a
    client that hangs up once its read is seen running: the gateway's count of heavy reads running (/metrics) must be back
    to none within a third of F of the hang-up, the abandoned work cancelled, not run to its end. Each other call
    of the operation must answer the long room within LIGHT_S: no read of seconds outside HeavyReads (a fold of a
    fraction of a second on the gateway's loop is not told apart from a busy host's wait: see LIGHT_S)."""
    _, stack = gateway
    long, short = routes.long, routes.short.room
    heavy = {form: call for form, call in routes.heavy.items() if call.operation == operation}
    light = [call for call in routes.calls if call.operation == operation and call.form not in heavy]
    slowest = 0.0
    for call in light:
        answer, took = call.on(short, long.room).send(http, long)
        assert answer is not None and answer.status_code < 500 and took < LIGHT_S, (call, took)
        slowest = max(slowest, took)
    if light:
        print(f"{operation}: {len(light)} calls outside HeavyReads on {HUNG_VERSIONS} versions, slowest {slowest:.3f} s")
    # A warm worker: its first heavy read also starts its thread and opens its Redis client
    warm = http.get(f"/rooms/{short}/series")
    assert warm.status_code == 200, warm.text
    for form, call in heavy.items():
        call = call.on(short, long.room)
        answer, fold_s = call.send(http, long, TIMED_S)
        assert answer is None or answer.status_code < 500, (form, answer.text)
        assert slots_back(http, 30)[0] == 0, f"{form}: still running 30 s after its answer"
        # A try counts where its read was seen running before the hang-up: on a host busy with other work a
        # request was seen to take longer than half a read to reach its slot, or to end between two looks.
        for _ in range(3):
            cruise(stack, long.room, next(MORE_CRUISES), 1)
            hung = call.hung(http, long)
            sent = time.monotonic()
            # It hangs up once its read is seen running, or when the read may well have ended
            while not (held := heavy_counts(http)[0]) and time.monotonic() - sent < max(0.05, fold_s):
                time.sleep(0.02)
            hung.close()
            running, freed_s = slots_back(http, 2 * fold_s + 5)
            print(f"{form}: {answer.status_code if answer else 'no answer'} in {fold_s:.3f} s on {HUNG_VERSIONS} "
                  f"versions; held {held}, slot back {freed_s:.3f} s after the hang-up")
            if held or fold_s < HELD_S:
                break
        if fold_s >= HELD_S:
            assert held == 1, f"{form}: its read was not seen running before its client hung up, in three tries"
        assert running == 0 and freed_s < max(fold_s / 3, FREED_FLOOR_S), (form, freed_s, fold_s)


# What another client's /health or GET of a small room may take while a gateway gives its first answer about the long
# room: 0.017-0.049 s beside it, 0.186 s beside two CPU burners on a 2-core host (the test niced below them). Before:
# 0.30-0.56 s (3.1 s beside the burners), the answer hashing the room's checkpoint head from version 1 in one go on
# the gateway's loop (services.checkpoints.HEAD_PAUSE_EVERY); and /health 0.35 s with the hash in slices while it
# found the projectors with a SCAN of the whole keyspace (projections.read_model_queries.ReadModels.status). The bound
# is this plus three times the slowest of the same GETs just before, with no first answer running: a loaded host's
# own wait is not counted against the gateway (a quiet host's 0.005 s leaves the bound at 0.315 s).
FIRST_ANSWER_BESIDE_S = 0.3


def test_the_first_answer_about_a_long_room_leaves_other_clients_answered(gateway: tuple[str, Stack],
                                                                         hung_room: tuple[str, str]) -> None:
    """Given a gateway process that has never answered about a claim room of HUNG_VERSIONS versions, when one client
    asks for the room (the first answer: its signed checkpoint needs the room's commitment head, hashed from version
    1), then another client's /health and GET of a small room are answered within FIRST_ANSWER_BESIDE_S all along,
    and the checkpoint is the very one the module's gateway signs for that room and version."""
    url, stack = gateway
    room, _ = hung_room
    fresh = stack.start_gateway(name="first-answer", ALMANAC_RATE_ANON="off", ALMANAC_RATE_COMMANDS="off")
    created = httpx.post(f"{fresh}/rooms", json={"ruleset": "claim", "player": "q"}, timeout=10)
    assert created.status_code == 201, created.text
    small = created.json()["room"]

    alone: list[float] = []

    async def first_answer() -> tuple[httpx.Response, dict[str, list[float]]]:
        async with httpx.AsyncClient(base_url=fresh, timeout=60) as asker, \
                httpx.AsyncClient(base_url=fresh, timeout=10) as other:
            beside: dict[str, list[float]] = {"/health": [], f"/rooms/{small}": []}
            for path in beside:  # its connection open, the small room's head known
                assert (await other.get(path)).status_code == 200
            for _ in range(5):  # the host's own wait, with no first answer running
                for path in beside:
                    started = time.monotonic()
                    assert (await other.get(path)).status_code == 200
                    alone.append(time.monotonic() - started)
            asked = asyncio.create_task(asker.get(f"/rooms/{room}"))
            while not asked.done():
                for path, took in beside.items():
                    started = time.monotonic()
                    assert (await other.get(path)).status_code == 200
                    took.append(time.monotonic() - started)
                await asyncio.sleep(0.01)
            return await asked, beside

    try:
        answer, beside = asyncio.run(first_answer())
    finally:
        stack.processes["first-answer"].terminate()
    bound = FIRST_ANSWER_BESIDE_S + 3 * max(alone)
    print(f"the first answer about {HUNG_VERSIONS} versions: beside it " +
          ", ".join(f"{path} max {max(took):.3f} s ({len(took)})" for path, took in beside.items()) +
          f"; alone max {max(alone):.3f} s, bound {bound:.3f} s")
    assert answer.status_code == 200, answer.text
    assert all(max(took) < bound for took in beside.values()), (beside, bound)
    again = httpx.get(f"{url}/rooms/{room}", timeout=60)
    assert again.status_code == 200 and again.json()["version"] == answer.json()["version"], again.text
    assert answer.json()["checkpoint"] == again.json()["checkpoint"]
