"""Fuzzing the live gateway from its own /openapi.json: no request gets a 5xx, no refusal changes a room.

Given a real `almanac gateway` process on the stack's engine and projector, and a room of every rule-set,
when schemathesis sends generated requests (valid and schema-violating, anonymous and with a player's
or an auditor's token) to every operation, then no answer is a 5xx, and after every refusal (4xx) every
room's version is what it was. Examples are derandomized and bounded so the run takes about a minute;
the figures (requests, status counts) are printed for the record.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import httpx
import pytest
import redis
import requests
import schemathesis
from api_contract import ContractCheck
from gateway_stack import landed_rulesets
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

from almanac.storage.keys import Keys

pytestmark = pytest.mark.xdist_group("fuzz")  # the suite's longest test starts first (tests/conftest.py)

EXAMPLES = int(os.environ.get("ALMANAC_FUZZ_EXAMPLES", "25"))  # per operation, identity and mode
# Arrays are drawn with at most this many items. Drawing is most of this test's time, and most of that went to a
# few huge bodies: a dispute bundle for POST /bundles/verify (its events a choice of every rule-set's event
# schemas, 145 schemas in all) was 15 KB of JSON at the median and took 15 of the 36 s of CPU all the cases took
# to draw; with 3 items at most, 7 of 27 s. Every operation, mode and identity is still drawn as many times, its
# bodies still valid or invalid by the document's schemas (a valid one is within the document's own maxItems; an
# "invalid" one made only by exceeding the cap is valid, and is sent like any other case).
ARRAY_ITEMS_DRAWN = 3



@pytest.fixture(scope="module")
def live_url(stack) -> str:
    """`almanac gateway` as its own process on the stack (the tests' in-process app shares its secret)."""
    return stack.start_gateway("fuzz-gateway", ALMANAC_COMMAND_TIMEOUT_MS="3000", ALMANAC_LOG_LEVEL="info")


def capped(node: object) -> object:
    """The OpenAPI document ``node`` with every array schema's maxItems at most ``ARRAY_ITEMS_DRAWN`` (never
    below its minItems): what cases are drawn from."""
    if isinstance(node, list):
        return [capped(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = {key: capped(value) for key, value in node.items()}
    if schema.get("type") == "array":  # (the type, not an "items" key: a properties map may name a field so)
        schema["maxItems"] = max(min(schema.get("maxItems", ARRAY_ITEMS_DRAWN), ARRAY_ITEMS_DRAWN),
                                 schema.get("minItems", 0))
    return schema


def room_versions(client: redis.Redis, keys: Keys, known: dict[str, int] | None = None) -> dict[str, int]:
    """Every room's version. The rooms already ``known`` are read in the one round trip that lists the rooms
    (the test asks after each of its thousands of requests, and on a busy host each round trip waits its turn);
    only rooms new to it need a second."""
    known_rooms = sorted(known or {})
    pipe = client.pipeline(transaction=False)
    for shard in range(keys.shard_count):
        pipe.smembers(keys.rooms(shard))
    if known_rooms:
        pipe.mget([keys.version(room) for room in known_rooms])
    answers = pipe.execute()
    rooms = sorted(r.decode() for members in answers[:keys.shard_count] for r in members)
    versions = dict(zip(known_rooms, answers[keys.shard_count], strict=True)) if known_rooms else {}
    new = [room for room in rooms if room not in versions]
    if new:
        versions.update(zip(new, client.mget([keys.version(room) for room in new]), strict=True))
    return {room: int(versions[room] or 0) for room in rooms}


def test_no_generated_request_gets_a_5xx_and_refusals_change_nothing(live_url: str, api, auditor: str,
                                                                    stack) -> None:
    http = httpx.Client(base_url=live_url, timeout=10)
    players: list[tuple[str, str]] = []
    for ruleset in landed_rulesets():
        created = http.post("/rooms", json={"ruleset": ruleset, "player": "fuzz", "room": f"fuzz-{ruleset}"})
        assert created.status_code == 201, created.text
        players.append((created.json()["room"], created.json()["token"]))
    document = httpx.get(f"{live_url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(capped(document))
    contract = ContractCheck(document)  # 2xx answers keep the document's own schemas
    store = redis.Redis.from_url(stack.redis_url)
    keys = Keys(16)
    session = requests.Session()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    changed: list[str] = []
    skipped: list[str] = []
    tags: list[tuple[str, tuple[str, ...]]] = []  # the current strategy's mode and who sends its cases (the last)
    versions = room_versions(store, keys)
    room, token = players[2]
    player_headers = {"Authorization": f"Bearer {token}"}
    # Who sends each drawn case: the anonymous caller draws its own (no token; a room id of its own in the
    # path); the auditor sends the player's cases, its token in place of the player's. Those are exactly the
    # cases an auditor's strategy would draw (derandomized: same seed, same strategy; the header is given,
    # not drawn), so drawing them once spares a third of the generation, the bulk of this test's time, and
    # changes no request sent.
    senders = {"anonymous": {}, "player": {}, "auditor": {"Authorization": f"Bearer {auditor}"}}
    started = time.monotonic()
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:
        path_parameters = {"room": room} if "{room}" in operation.path else None
        for drawn_as, headers, sent_as in (("anonymous", None, ("anonymous",)),
                                           ("player", player_headers, ("player", "auditor"))):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                tags.append((mode.value, sent_as))
                strategy = operation.as_strategy(generation_mode=mode, headers=headers,
                                                 path_parameters=path_parameters if drawn_as != "anonymous" else None)

                @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
                @given(case=strategy)
                def run(case) -> None:
                    nonlocal versions
                    mode_name, identities = tags[-1]
                    for identity in identities:
                        response = case.call(base_url=live_url, session=session, timeout=15,
                                             headers=senders[identity] or None)
                        statuses[response.status_code] += 1
                        label = f"{case.method} {case.formatted_path} [{identity}, {mode_name}]"
                        if response.status_code >= 500:
                            failures.append(f"{label} -> {response.status_code} {response.text[:300]}")
                        elif 200 <= response.status_code < 300 and "application/json" in str(
                                response.headers.get("content-type")):  # schemathesis keeps each header as a list
                            mismatch = contract.problems(case.method, case.formatted_path, response.status_code,
                                                         response.json())
                            failures.extend(f"{label} -> {response.status_code} off its schema: {m}"
                                            for m in mismatch[:3])
                        after = room_versions(store, keys, versions)
                        if response.status_code >= 400:
                            moved = {r: (versions.get(r), v) for r, v in after.items() if versions.get(r, v) != v}
                            if moved:
                                changed.append(f"{label} -> {response.status_code} moved {moved}")
                        versions = after

                try:
                    run()
                except Exception as error:  # a strategy schemathesis cannot build (e.g. nothing to negate)
                    if "Unsatisfiable" not in type(error).__name__ and "negative" not in str(error).lower():
                        raise
                    skipped.extend(f"{operation.method} {operation.path} [{identity}, {mode.value}]"
                                   for identity in sent_as)
    seconds = time.monotonic() - started
    total = sum(statuses.values())
    print(f"\nfuzz: {total} requests over {len(operations)} operations in {seconds:.1f} s; "
          f"status counts {dict(sorted(statuses.items()))}; 5xx = {sum(n for s, n in statuses.items() if s >= 500)}; "
          f"{len(skipped)} strategies not generable")
    store.close()
    assert total >= 20 * len(operations), statuses
    assert not failures, "\n".join(failures[:20])
    assert not changed, "\n".join(changed[:20])
    # The gateway process logged JSON only (ALMANAC_LOG_FORMAT=json), one access line per request.
    lines = (stack.data_dir / "fuzz-gateway.log").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    access = [e for e in entries if e["event"] == "request" and e.get("logger") == "almanac.gateway.access"]
    assert len(access) >= total and all(e["request_id"] and e["ms"] >= 0 and e["status"] for e in access)
    assert {"/rooms/{room}/commands", "/rooms/{room}"} <= {e["route"] for e in access}
