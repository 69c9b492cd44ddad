"""Hidden information through real gateways, by construction: two games of every rule-set that differ only in
hidden values (the room's secret seed, the owner's hidden dice, the deck order: `hidden_games`) are stored in two
stacks (Redis, engine, projector, gateway each), and every operation of the gateway's own /openapi.json and
every channel of its /asyncapi live feed is called on both as the public (no token), as a spectator (a token
for the room without a seat) and as every rival seat: the answers must be identical.

Nothing here lists routes: an operation added tomorrow is called the day it is added. Each of its
parameters, path or query, required or optional, is filled from the games by name (`fillers`: every version
or a few across the game, the audit views' ids, predicates on public and hidden paths, the other installed
versions...); a parameter no game fills fails the test until it is taught here, so no leak hides behind a
parameter the test skips. A GET is a read, called with every filling, each optional parameter at each of its
values and each two together at a few. Any other method writes: it is called with a body its schema refuses
(a JSON array), must answer the same in both games and change nothing (its accepted answer renders events
through the same `Viewer` as the reads). Status, headers and body are compared; a header is left out only
when asking one gateway the same twice changes it (it describes the request: its id), and an HTTP date is a
clock reading. Operations that take no game parameter and do not name the room describe the processes
(health, metrics, documents): their answers are compared with every number masked, since two processes never
measure the same. Live feeds are followed twice: opened as the room is created, before the rest of the game
is appended (the events reach them through the gateway's shared read, live_hub), and again from stored
history once it is all there.

The property is shown able to fail (a mutation check): a gateway with a leak planted (tests/planted_leak.py, an
operation that tells anyone the seat-bot room's running scores) must be reported, found from its /openapi.json.
Each pair of answers is asked of both twins at once (separate processes), so the test waits for the slower.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import email.utils
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis
from api_contract import ContractCheck
from gateway_stack import Stack
from hidden_games import (
    PLAYERS,
    SEED_A,
    SEED_B,
    VARIATIONS,
    Receipt,
    Step,
    differing,
    divergence,
    play_a,
    replay,
    rivals,
)
from openapi_calls import calls, spread
from planted_leak import PLANTED_PATH
from suite_settings import suite_settings
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from almanac.events import codec, registry
from almanac.events.step import replay as replay_room
from almanac.services.clock import earliest, pending_data
from almanac.services.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from almanac.services.gateway.auth import TokenSigner
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.notifier import SCOPES, Notifier, Subscription
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

pytestmark = pytest.mark.lasts(85)  # seconds of one worker in a whole run: sent to the workers early (tests/conftest.py)

SECRET = "hidden-routes-test-secret-" + "x" * 16  # both gateways sign and accept the same tokens
MOVES = {"realm": 60, "board": 40, "sectors": 40, "claim": 40, "realm-bots": 60, "realm-v2": 60, "board-v2": 40}
SPECTATOR = "spectator"
DELAY = 3  # versions a delayed spectator feed trails the room by
NUMBER = re.compile(rb"-?\d+(\.\d+)?(e-?\d+)?")
# The variations whose rule-set the stacks' processes host: the installed ones (an example plugin is not, unless
# installed: tests/rules/test_hidden_property.py compares its twins through the same functions the gateway uses).
ROUTED = [game for game, variation in VARIATIONS.items()
          if registry.parse(variation.ruleset)[0] in registry.installed()]


# Every routed game, board@2's included: the API documents describe every installed version's events
# (services/gateway/game_schemas.py), so a room of a non-default version answers within its schema.
ROUTED_GAMES = sorted(ROUTED)


class Twin:
    """One stack holding one run of a game: its gateway's URL and its Redis."""

    def __init__(self, stack: Stack, url: str) -> None:
        self.stack, self.url = stack, url
        # Every 2xx JSON answer of every operation called here must match its schema (tests/api_contract.py).
        contract = ContractCheck(httpx.get(f"{url}/openapi.json", timeout=30).json())
        self.http = httpx.Client(base_url=url, timeout=30, event_hooks={"response": [contract]})


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Twin, Twin]]:
    """Two stacks alike in everything (settings, secret, engine name) but the games stored in them."""
    servers, stacks = [], []
    try:
        for name in ("a", "b"):
            data = tmp_path_factory.mktemp(f"hidden-{name}")
            try:
                servers.append(EmbeddedRedis(data / "redis", persist=False).start())
            except (EmbeddedRedisError, FileNotFoundError) as error:
                pytest.skip(f"no redis-server to run a second stack: {error}")
            stack = Stack(servers[-1].url, data)
            # One deployment's keys in both: the checkpoints' key ids and signatures are then comparable.
            stack.env.update(ALMANAC_SECRET=SECRET, ALMANAC_ENGINE_NAME="engine", ALMANAC_SIGNING_KEYS="11" * 32,
                             ALMANAC_COMMIT_SECRET="22" * 32,
                             # every viewer follows every channel from two starts at once, all from this one address:
                             # above the per-seat and per-address caps, the later feeds were refused and compared
                             # nothing (the caps have their own attack tests, test_live_flood.py)
                             ALMANAC_LIVE_MAX_FEEDS_PER_SEAT="64", ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS="512")
            stack.start("engine")
            stack.start("projector")
            stacks.append(stack)
        for stack in stacks:
            stack.wait_ready()
        with concurrent.futures.ThreadPoolExecutor(2) as starting:  # both at once: each start waits for /health
            urls = list(starting.map(lambda stack: stack.start_gateway(), stacks))
        yield Twin(stacks[0], urls[0]), Twin(stacks[1], urls[1])
    finally:
        for stack in stacks:
            stack.stop()
        for server in servers:
            server.stop()


def comparable(game: str) -> tuple[list[Step], list[Receipt], list[Receipt]]:
    """A game of the variation ``game`` played twice (runs A and B), cut before the first step where the rules make
    the difference public to a rival (or end the game)."""
    variation = VARIATIONS[game]
    number = variation.route_game
    steps = play_a(variation, number, MOVES[game])
    run_a = replay(variation, steps, number, SEED_A)
    run_b = replay(variation, steps, number, SEED_B, like=run_a)
    stop = next((i for i, (a, b) in enumerate(zip(run_a, run_b, strict=True))
                 if divergence(variation, a, b, rivals(variation)) is not None), len(steps))
    return steps[:stop], run_a[:stop], run_b[:stop]


def viewers_of(game: str, run_a: list[Receipt]) -> dict[str, str | None]:
    """Who asks, and their tokens: the public (none), a spectator and every rival seat."""
    variation = VARIATIONS[game]
    room = f"{game}-{variation.route_game}"
    signer = TokenSigner(SECRET, 3_600)
    ref = run_a[0].envelopes[0].ruleset
    viewers: dict[str, str | None] = {"public": None, SPECTATOR: signer.issue(room, SPECTATOR, ruleset=ref)}
    return viewers | {seat: signer.issue(room, seat, ruleset=ref) for seat in rivals(variation)}


# Seconds spent asking each operation of both twins, over the module: its slowest are printed with each game.
SPENT: dict[str, float] = {}
# The games the property test stored in the twins (game -> its latest version): a later test asks the same rooms.
STORED: dict[str, int] = {}


def store(twin: Twin, room: str, steps: list[Step], run: list[Receipt], first: int = 0) -> int:
    """Append the run's events from step ``first`` on to the twin's store as the engine would (one append per
    command); the latest version."""
    async def append() -> int:
        client = aioredis.Redis.from_url(twin.stack.redis_url)
        events = RedisEventStore(client, 16)
        version = next((r.envelopes[-1].version for r in reversed(run[:first]) if r.envelopes), 0)
        try:
            for index, ((player, _, _), receipt) in list(enumerate(zip(steps, run, strict=True)))[first:]:
                if receipt.envelopes:
                    await events.append(room, version, internal_command_id(room, player, f"step-{index}"),
                                        receipt.envelopes)
                    version = receipt.envelopes[-1].version
        finally:
            await client.aclose()
        return version

    return asyncio.run(append())


def wait_projected(twin: Twin, room: str, latest: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = twin.http.get("/rooms").json()["rooms"]
        if any(row["room"] == room and row.get("version") == latest for row in rows):
            return
        time.sleep(0.1)
    raise AssertionError(f"the projector did not reach {room} version {latest}: {twin.stack.log('projector')}")


def fillers(room: str, ruleset: str, run: list[Receipt], steps: int) -> dict[str, list[str]]:
    """Values for the parameters of the document's operations, by name, from the game stored: every
    parameter, required or optional, path or query, must have some here."""
    manifest = registry.manifest(ruleset)
    latest = next(r.envelopes[-1].version for r in reversed(run) if r.envelopes)
    versions = [str(v) for v in range(1, latest + 1)]
    across = [*spread(versions), str(latest + 1)]  # and one past the end: refused alike
    pairs = [(e, codec.decode_event(e)) for receipt in run for e in receipt.envelopes]
    # What the audit views follow in this game (trade ids...), or one that it lacks.
    items = sorted({item for view in manifest.audit_views for item in view.ids(pairs)}) or ["1"]
    rival = PLAYERS[-1]
    return {
        "room": [room], "other": [room],
        "version": versions,
        "from_version": across, "to_version": across, "at": across, "at_other": across, "since": across,
        "from": across, "to": across,
        "limit": ["1", "2", "1000"],
        # A listing's page cursors (projections.read_model_queries.encode_cursor): from the top of the rooms Redis holds rows of,
        # from the start of the archived tier, and one it never handed out (refused alike)
        "cursor": ["WyJsIiw5MDA3MTk5MjU0NzQwOTkyLCJ-Il0", "WyJhIiwwLCIiLCIiXQ", "bm90LWEtY3Vyc29y"],
        "command_id": [f"step-{index}" for index in range(steps)],
        "ruleset": [ruleset], "name": [ruleset],
        "model": sorted(registry.read_models()),
        "view": [view.name for view in manifest.audit_views] or ["none"],
        "item": spread(items), "id": spread(items), "trade": spread(items),
        "player": [*PLAYERS, SPECTATOR],
        "path": ["scores", f"scores.{rival}", "room.players"],
        # A predicate on a public path, and ones on hidden paths (the scores' hidden parts, a rival's view).
        "where": ["room.ended == true", f"scores.{rival} >= 1", f"view.{rival}.seed != null"],
        "against": [f"{name}@{v}" for name in [registry.parse(ruleset)[0]] for v in registry.versions(name)],
        "linear": ["true", "false"],
        "subscription": ["wh_0000000000000000"],  # webhook routes: auditors only, nothing of a game
    }


Answer = tuple[int, tuple[tuple[str, bytes], ...], bytes]
# A checkpoint's head is a hiding commitment over every event, hidden values included (docs/bundle-format.md): it
# differs between the twins by design and reveals nothing without the operator's salts (test_checkpoints shows a
# guess cannot be confirmed from it). Its head and signature are compared as their shape; room, version, key: as is.
SIGNED_HEAD = re.compile(rb'"head":"[0-9a-f]{64}","kid":"([0-9a-f]{16})","sig":"[0-9a-f]{128}"')


def unsigned(body: bytes) -> bytes:
    return SIGNED_HEAD.sub(rb'"head":"#","kid":"\1","sig":"#"', body)


def answer(twin: Twin, method: str, url: str, token: str | None, commitment: str, instead: str) -> Answer:
    """The answer's status, headers and body, the room's seed commitment written as the other game's and every
    header value that is a clock reading (an HTTP date) as ``#``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if method == "get":
        response = twin.http.get(url, headers=headers)
    else:
        response = twin.http.request(method.upper(), url, headers={**headers, "Content-Type": "application/json"},
                                     content=b"[]")

    def as_read(value: str) -> bytes:
        with contextlib.suppress(TypeError, ValueError):
            if email.utils.parsedate_to_datetime(value) is not None:
                return b"#"
        return value.encode().replace(commitment.encode(), instead.encode())

    seen = tuple(sorted((name.lower(), as_read(value)) for name, value in response.headers.multi_items()))
    return response.status_code, seen, unsigned(response.content.replace(commitment.encode(), instead.encode()))


def per_request(first: Answer, again: Answer) -> set[str]:
    """The headers whose values differ between two identical asks of one gateway: they describe the request
    (its id...), not the game, and are left out of the comparison."""
    return {name for name, _ in set(first[1]) ^ set(again[1])}


def without(seen: Answer, names: set[str], masked: bool) -> Answer:
    """An answer as compared: without the per-request headers; masked, with every number in it as ``#``."""
    status, headers, body = seen
    headers = tuple((name, value) for name, value in headers if name not in names)
    if masked:
        headers = tuple((name, NUMBER.sub(b"#", value)) for name, value in headers)
        # Which lines, not how many alike: a process lists a line per shard its projector is behind on, and how
        # many are behind at the moment of asking is timing (with numbers masked such lines are all one line).
        body = b"\n".join(sorted(set(NUMBER.sub(b"#", body).splitlines())))
    return status, headers, body


def answers_compared(twins: tuple[Twin, Twin], document: dict, fill: dict[str, list[str]],
                     viewers: dict[str, str | None], room: str, commitments: tuple[str, str],
                     per_operation: dict[str, set[str]]) -> Iterator[tuple[str, str, str, Answer, Answer]]:
    """(operation, URL, viewer, answer of game A, answer of game B) for every call of every operation of
    ``document`` (``calls``) by every viewer, each answer as compared (``without``): the property holds when
    every pair is equal. Each pair is asked of both gateways at once (one thread for game A's): they are
    separate processes, so the test waits for the slower of the two, not for both in turn."""
    (a, b), (commitment_a, commitment_b) = twins, commitments
    with concurrent.futures.ThreadPoolExecutor(1) as beside:
        def both(method: str, url: str, token: str | None) -> tuple[Answer, Answer]:
            asked_a = beside.submit(answer, a, method, url, token, commitment_a, commitment_a)
            seen_b = answer(b, method, url, token, commitment_b, commitment_a)
            return asked_a.result(), seen_b

        for name, method, url, about_game in calls(document, fill):
            for viewer, token in viewers.items():
                started = time.perf_counter()
                seen_a, seen_b = both(method, url, token)
                SPENT[name] = SPENT.get(name, 0.0) + time.perf_counter() - started
                if name not in per_operation:  # asked again of each gateway: what differs describes the request
                    again_a, again_b = both(method, url, token)
                    per_operation[name] = per_request(seen_a, again_a) | per_request(seen_b, again_b)
                # The processes' own figures (clocks, sizes, counters) are compared with every number masked.
                masked = not about_game and room.encode() not in seen_a[2]
                yield (name, url, viewer, *(without(seen, per_operation[name], masked) for seen in (seen_a, seen_b)))


def body_diff(seen_a: Answer, seen_b: Answer) -> str:
    return "\n".join(difflib.unified_diff(seen_a[2].decode(errors="replace").splitlines(),
                                          seen_b[2].decode(errors="replace").splitlines(), "game A", "game B",
                                          lineterm=""))


def channel_of(asyncapi: dict, address: str) -> str:
    return next(name for name, channel in asyncapi["channels"].items() if channel["address"] == address)


def open_feed(twin: Twin, address: str, token: str | None, from_version: int) -> ClientConnection:
    url = twin.url.replace("http://", "ws://") + address + ("&" if "?" in address else "?") + f"from_version={from_version}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(url, additional_headers=headers, open_timeout=10)


def read_feed(socket: ClientConnection, latest: int, commitment: str, instead: str) -> list[Any]:
    """Every message of an open live feed until the latest version (or the close), and how it closed."""
    messages: list[Any] = []
    with socket:
        try:
            while True:
                raw = socket.recv(timeout=10)
                message = json.loads(unsigned(raw.replace(commitment, instead).encode()) if isinstance(raw, str) else raw)
                messages.append(message)
                if isinstance(message, dict) and message.get("version") == latest:
                    break
        except ConnectionClosed as closed:
            messages.append({"closed": closed.rcvd.code if closed.rcvd else None,
                             "reason": closed.rcvd.reason if closed.rcvd else None})
    return messages


@pytest.mark.parametrize("game", ROUTED_GAMES)
def test_every_route_and_live_message_answers_outsiders_the_same_whatever_the_hidden_values(
        twins: tuple[Twin, Twin], game: str) -> None:
    """Given two games of the rule-set that differ only in hidden values, played behind two real gateways
    while the public, a spectator and every rival seat follow every live channel of /asyncapi, when each of
    them then calls every operation of /openapi.json (every version, command id, read model, every optional
    parameter...) and follows every channel again from the start, then each receives exactly the same from
    both games: statuses, headers, bodies and messages (the seed commitment, the public trace of the secret
    seed, read alike)."""
    a, b = twins
    variation = VARIATIONS[game]
    ruleset = variation.ruleset
    steps, run_a, run_b = comparable(game)
    room = f"{game}-{variation.route_game}"
    differ = sum(differing(x, y) for x, y in zip(run_a, run_b, strict=True))
    assert differ > 0, f"{game}: the two games stored no differing event: nothing hidden was compared"
    # A variation for seat bots compares its seat events (deadlines missed, seats handed to bots...) too
    stored = {e.type for receipt in run_a for e in receipt.envelopes}
    assert variation.covers <= stored, f"{game}: never compared: {sorted(variation.covers - stored)}"
    commitment_a, commitment_b = run_a[-1].commitment, run_b[-1].commitment
    viewers = viewers_of(game, run_a)
    fill = fillers(room, ruleset, run_a, len(steps))
    asyncapi = a.http.get("/asyncapi").json()
    assert b.http.get("/asyncapi").json() == asyncapi  # and both gateways are asked alike
    servers = asyncapi["servers"]
    live = [channel["address"] for channel in asyncapi["channels"].values()
            if any(servers[s["$ref"].rsplit("/", 1)[-1]]["protocol"] in ("ws", "wss") for s in channel.get("servers", []))]
    assert live, "the AsyncAPI document names no WebSocket channel"
    filled = {address: re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)][-1], address) for address in live}
    # A channel that takes ``delay`` (spectators) is followed delayed too: each version once the room is past it
    delayed = {f"{address}?delay={DELAY}": f"{url}?delay={DELAY}" for address, url in filled.items()
               if "delay" in asyncapi["channels"][channel_of(asyncapi, address)].get("description", "")}
    live += list(delayed)
    filled |= delayed

    # The room is created; every viewer follows every channel from the start and from what comes next, on both
    # gateways, before the rest of the game is played: what comes next reaches them through the gateway's
    # shared read (live_hub), not a read of stored history.
    created = store(a, room, steps[:1], run_a[:1])
    assert store(b, room, steps[:1], run_b[:1]) == created
    feeds = {(address, viewer, start): (open_feed(a, filled[address], token, start),
                                        open_feed(b, filled[address], token, start))
             for address in live for viewer, token in viewers.items() for start in (1, created + 1)}
    time.sleep(0.5)  # the feeds' shared read has its cursors before anything more is appended
    latest = store(a, room, steps, run_a, first=1)
    assert store(b, room, steps, run_b, first=1) == latest
    compared: dict[str, int] = {}
    for (address, viewer, start), (feed_a, feed_b) in feeds.items():
        last = latest - (DELAY if "delay=" in address else 0)
        seen_a = read_feed(feed_a, last, commitment_a, commitment_a)
        seen_b = read_feed(feed_b, last, commitment_b, commitment_a)
        assert seen_a == seen_b, (address, viewer, start)
        # Followed: each version from the start once (a refused feed holds the refusal and the close).
        versions = [message["version"] for message in seen_a if isinstance(message, dict) and "version" in message]
        assert versions in ([], list(range(start, last + 1))), (address, viewer, start, versions, seen_a[:2])
        # Nothing only because the feed was refused, with a refusal's close code; a spectator's is refused nobody
        if not versions:
            assert seen_a and seen_a[-1].get("closed", 0) >= 4000, (address, viewer, start, seen_a[-2:])
            assert "/watch" not in address, (address, viewer, start, seen_a[-2:])
        compared[f"WS {address} live"] = compared.get(f"WS {address} live", 0) + 1
    wait_projected(a, room, latest)
    wait_projected(b, room, latest)
    STORED[game] = latest

    document = a.http.get("/openapi.json").json()
    assert b.http.get("/openapi.json").json() == document
    per_operation: dict[str, set[str]] = {}
    for name, url, viewer, seen_a, seen_b in answers_compared((a, b), document, fill, viewers, room,
                                                              (commitment_a, commitment_b), per_operation):
        assert seen_a == seen_b, (name, url, viewer, seen_a[:2], seen_b[:2], body_diff(seen_a, seen_b))
        compared[name] = compared.get(name, 0) + 1
    # A room with seat bots: every viewer asks POST /rooms/{room}/bots, with a body it takes, for every seat it
    # cannot leave (a bot seat: "already"; another's seat: refused), so the answers of a room with bot seats, not
    # only a refused body, are compared; none of them writes to the room (no seat is left).
    bot_seats = replay_room([e for receipt in run_a for e in receipt.envelopes]).bot_seats
    # (a variation may cover events of its own version instead: board@2's turn limit, no bot seat)
    seat_bots = "room.seat_to_bot" in variation.covers
    if seat_bots:
        for viewer, token in viewers.items():
            for seat in PLAYERS:
                if seat == viewer and seat not in bot_seats:
                    continue  # its own seat: a leave, which the room would record
                asked = [twin.http.post(f"/rooms/{room}/bots", json={"seat": seat},
                                        headers={"Authorization": f"Bearer {token}"} if token else {})
                         for twin in (a, b)]
                seen_a, seen_b = ((r.status_code, unsigned(r.content.replace(c.encode(), commitment_a.encode())))
                                  for r, c in zip(asked, (commitment_a, commitment_b), strict=True))
                assert seen_a == seen_b, ("POST /rooms/{room}/bots", seat, viewer, seen_a, seen_b)
                compared["POST /rooms/{room}/bots as a seat"] = compared.get("POST /rooms/{room}/bots as a seat", 0) + 1
        assert compared["POST /rooms/{room}/bots as a seat"] and bot_seats, bot_seats
    # Whatever a write was sent, both games are where they were.
    for twin in (a, b):
        assert twin.http.get(f"/rooms/{room}").json()["version"] == latest

    # Every channel again, from the start, once the game is stored: the history read.
    for address in live:
        last = latest - (DELAY if "delay=" in address else 0)
        for viewer, token in viewers.items():
            feed_a = read_feed(open_feed(a, filled[address], token, 1), last, commitment_a, commitment_a)
            feed_b = read_feed(open_feed(b, filled[address], token, 1), last, commitment_b, commitment_a)
            assert feed_a == feed_b, (address, viewer)
            compared[f"WS {address}"] = compared.get(f"WS {address}", 0) + 1
    # Every webhook notice, by construction: a subscription of every scope (a player's for every viewer) to every
    # kind, noticed from the whole stored game and warned of the room's pending deadline, through the notifier's
    # own code on both stacks; what each receiver would be sent must be the same.
    delivered_a, delivered_b = (notices(twin, room, viewers, commitment, commitment_a)
                                for twin, commitment in ((a, commitment_a), (b, commitment_b)))
    assert delivered_a == delivered_b, "\n".join(difflib.unified_diff(delivered_a, delivered_b, "game A", "game B",
                                                                       lineterm=""))
    kinds = {json.loads(payload)["kind"] for payload in delivered_a}
    for kind in kinds:
        compared[f"webhook {kind}"] = sum(json.loads(payload)["kind"] == kind for payload in delivered_a)
    if registry.manifest(ruleset).deadlines is not None or registry.manifest(ruleset).notices is not None:
        assert delivered_a, f"{ruleset}: its rules name notices or deadlines, yet no notice was compared"
    print(f"{game}: {len(steps)} steps, {latest} versions, {differ} stored events differ; "
          f"{sum(compared.values())} answers compared over {len(compared)} operations for {list(viewers)}; "
          f"webhook notices compared: { {k: v for k, v in compared.items() if k.startswith('webhook')} }; "
          f"headers per request: {sorted(set().union(*per_operation.values()))}; slowest operations so far: "
          f"{ {name: round(s, 1) for name, s in sorted(SPENT.items(), key=lambda kv: -kv[1])[:5]} }")
    assert len(compared) == (sum(len(ops) for ops in document["paths"].values()) + 2 * len(live) + len(kinds)
                             + seat_bots)


def notices(twin: Twin, room: str, viewers: dict[str, str | None], commitment: str, instead: str) -> list[str]:
    """Every webhook payload the twin's notifier would send about ``room`` to a subscription of each scope (a
    player's for every viewer but the public) to every notice kind: each event of the stored game noticed, and the
    room's pending deadline warned of (``deadline_soon``) a millisecond before it is due. Sorted JSON texts, the
    twin's own seed commitment written as ``instead``."""
    async def run() -> list[str]:
        client = aioredis.Redis.from_url(twin.stack.redis_url)
        store = RedisEventStore(client, 16)
        # Fixed ids and no kinds (every kind): the same subscriptions, and delivery ids, in both stacks.
        subscriptions = [Subscription(id=f"wh_{scope}", url="http://receiver.invalid/", secret="s", scope=scope,
                                      room=room if scope == "room" else None) for scope in ("deployment", "room")]
        subscriptions += [Subscription(id=f"wh_{viewer}", url="http://receiver.invalid/", secret="s", scope="player",
                                       room=room, player=viewer) for viewer, token in viewers.items() if token]
        assert set(SCOPES) == {s.scope for s in subscriptions}
        # The room's pending deadline as the clock keeps it (clock.earliest, clock.pending_data), under keys of
        # the test's own: the stack's clock sends a deadline long past due at once, and its warning with it.
        deadline = earliest(replay_room(await store.read(room)))
        payloads: list[dict] = []
        try:
            for keys, warn in ((Keys(16), False), (Keys(16, "alm-hidden-warn"), True)):
                await client.delete(keys.webhook_subscriptions(), keys.webhook_deliveries(), keys.webhook_outbox(),
                                    keys.webhook_warned(), *(keys.notifier_cursor(shard) for shard in range(16)))
                await client.hset(keys.webhook_subscriptions(),
                                  mapping={s.id: msgspec.json.encode(s) for s in subscriptions})
                if warn and deadline is not None:
                    shard = keys.shard(room)
                    await client.zadd(keys.deadlines(shard), {room: deadline.due_ms})
                    await client.hset(keys.deadline_commands(shard), room, pending_data(deadline))
                settings = suite_settings(redis_url=twin.stack.redis_url).model_copy(
                    update={"webhook_deadline_warning_s": 600})
                notifier = Notifier(client, store, settings, keys=keys,
                                    clock_ms=lambda: deadline.due_ms - 1 if deadline is not None else 0)
                try:
                    while not warn:  # every feed entry of every shard, to the end
                        read = dict(notifier._cursors)  # noqa: SLF001 - where it read up to: the loop's end test
                        await notifier.notice_once()
                        if notifier._cursors == read:  # noqa: SLF001
                            break
                    if warn:
                        await notifier.warn_once()
                finally:
                    await notifier.aclose()
                records = (json.loads(raw) for raw in (await client.hgetall(keys.webhook_deliveries())).values())
                payloads += [r["payload"] for r in records if r["payload"]["room"] == room]
        finally:
            await client.aclose()
        return sorted(json.dumps(p, sort_keys=True).replace(commitment, instead) for p in payloads)

    return asyncio.run(run())


def test_the_property_reports_a_new_route_that_leaks_a_bot_rooms_hidden_scores(twins: tuple[Twin, Twin]) -> None:
    """Given the seat-bot game (``realm-bots``) stored behind both twins, and on each stack a gateway with one
    operation more that nothing tells the test of (tests/planted_leak.py: ``GET /rooms/{room}/bot-insight``, no
    token, the bot room's running scores, hidden amounts included), when the property enumerates that gateway's
    /openapi.json and asks what it adds as every viewer, then it finds the new operation by itself, fills its
    parameters, and reports a differing answer for every viewer: the property can fail, and fails on a route the
    day the route is added. (The operations both documents share are the property test's own, which passes.)"""
    game = "realm-bots"
    steps, run_a, run_b = comparable(game)
    room = f"{game}-{VARIATIONS[game].route_game}"
    if game not in STORED:  # run alone: store the game as the property test does
        latest = store(twins[0], room, steps, run_a)
        assert store(twins[1], room, steps, run_b) == latest
        for twin in twins:
            wait_projected(twin, room, latest)
        STORED[game] = latest
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as starting:  # both at once: each start waits for /health
            urls = list(starting.map(lambda twin: twin.stack.start_gateway("gateway-leaky", preload="planted_leak"),
                                     twins))
        leaky = (Twin(twins[0].stack, urls[0]), Twin(twins[1].stack, urls[1]))
        clean = twins[0].http.get("/openapi.json").json()["paths"]
        document = leaky[0].http.get("/openapi.json").json()
        added = {path: operations for path, operations in document["paths"].items() if path not in clean}
        assert list(added) == [PLANTED_PATH], "the planted gateway should add exactly the planted operation"
        viewers = viewers_of(game, run_a)
        reported: dict[str, list[str]] = {}
        for name, url, viewer, seen_a, seen_b in answers_compared(
                leaky, {**document, "paths": added}, fillers(room, VARIATIONS[game].ruleset, run_a, len(steps)),
                viewers, room, (run_a[-1].commitment, run_b[-1].commitment), {}):
            assert seen_a[0] == 200, (name, url, viewer, seen_a)  # it answers, as a real route would
            if seen_a != seen_b:
                reported.setdefault(name, []).append(viewer)
                assert b'"weighs"' in body_diff(seen_a, seen_b).encode(), body_diff(seen_a, seen_b)
        assert reported == {f"GET {PLANTED_PATH}": list(viewers)}, reported
    finally:
        for twin in twins:
            process = twin.stack.processes.pop("gateway-leaky", None)
            if process is not None:
                process.terminate()
                process.wait(timeout=10)
