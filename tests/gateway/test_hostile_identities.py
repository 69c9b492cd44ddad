"""A client cannot pass for many, nor for someone else, against a real gateway process.

- A token has one spelling: PyJWT decodes base64 leniently, so ``TOKEN=`` was a second valid token string
  (a rate-limit counter and a verified-token cache entry of its own). Any other spelling is 401
  ``token_invalid`` ``{code, message, field}``.
- The command limit is per seat (room and player), not per token: a seat holds a new token each time its
  join is replayed with its command id (a second later, a new ``iat``), and one seat got 15 commands through
  a limit of 5.
- X-Forwarded-For is believed only from the proxies named in ALMANAC_TRUSTED_PROXIES: by default a client on
  loopback (or behind a local proxy) could name any address, and so escape the per-address limits (requests,
  and live feeds alike).
- An IPv6 client is its /64: a subscriber is handed a whole /64, so one client counted address by address
  could pass for 2**64 clients.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import string
import time
from collections.abc import Iterator

import httpx
import pytest
from gateway_stack import Stack
from websockets.sync.client import connect

ELEMENT = {"kind": "place_element", "row": -1, "column": 5}  # refused by the rules (422), after counting
BASE64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


@pytest.fixture(scope="module")
def limited(stack: Stack) -> Iterator[httpx.Client]:
    """A gateway whose seats may send 5 commands a minute (and addresses anything)."""
    url = stack.start_gateway("limited", ALMANAC_RATE_COMMANDS="5 per minute", ALMANAC_RATE_ANON="off")
    with httpx.Client(base_url=url, timeout=10) as http:
        yield http


@pytest.fixture(scope="module")
def trusting(stack: Stack) -> str:
    """A gateway that believes X-Forwarded-For from loopback, two anonymous requests a minute and one live feed
    per address: each story below names addresses no other uses, so they share it (a gateway start less)."""
    return stack.start_gateway("trusting", ALMANAC_RATE_ANON="2 per minute", ALMANAC_TRUSTED_PROXIES="127.0.0.1",
                               ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS="1")


def respellings(token: str) -> list[str]:
    """Other spellings of ``token`` a lenient base64url decoder reads as the same bytes, or nearly."""
    header, claims, signature = token.split(".")
    last = BASE64URL.index(signature[-1])
    return [
        f"{token}=",  # the signature padded (43 characters: one '=' makes 44)
        f"{header}.{claims}.{signature}==",
        f"{header}=.{claims}.{signature}",
        f"{header}.{claims}=.{signature}",
        # The last character of a 32-byte signature carries two unused bits: other values, same bytes.
        *(f"{header}.{claims}.{signature[:-1]}{BASE64URL[last ^ bits]}" for bits in (1, 2, 3)),
        f"{header}.{claims}.{signature}.",  # a fourth, empty part
    ]


def test_a_token_spelled_any_other_way_is_refused_401_and_changes_nothing(limited: httpx.Client) -> None:
    room = f"spell-{secrets.token_hex(3)}"
    token = limited.post("/rooms", json={"ruleset": "board", "player": "ann", "room": room}).json()["token"]
    version = limited.get(f"/rooms/{room}").json()["version"]
    for spelling in respellings(token):
        answer = limited.post(f"/rooms/{room}/commands", json={"command": {**ELEMENT, "row": 5}},
                              headers={"Authorization": f"Bearer {spelling}"})
        assert answer.status_code == 401, (spelling, answer.text)
        refusal = answer.json()
        assert refusal["code"] == "token_invalid" and refusal["field"] == "token" and refusal["message"], refusal
    assert limited.get(f"/rooms/{room}").json()["version"] == version
    # The token as issued is served.
    served = limited.post(f"/rooms/{room}/commands", json={"command": {**ELEMENT, "row": 5}},
                          headers={"Authorization": f"Bearer {token}"})
    assert served.status_code == 200, served.text


def test_one_seat_with_several_tokens_gets_no_more_than_its_limit(limited: httpx.Client) -> None:
    room = f"seat-{secrets.token_hex(3)}"
    create = {"ruleset": "board", "player": "ann", "room": room, "command_id": secrets.token_hex(12)}
    # Given one seat holding three tokens: its create replayed with its (secret) command id, a second apart.
    tokens = []
    for replay in range(3):
        time.sleep(1.05 if replay else 0)  # a token's iat is in whole seconds
        answer = limited.post("/rooms", json=create)
        assert answer.status_code in (200, 201), answer.text
        tokens.append(answer.json()["token"])
    assert len(set(tokens)) == 3
    # When it sends 15 commands, rotating its tokens, then 5 are judged and the rest refused 429.
    statuses = [limited.post(f"/rooms/{room}/commands", json={"command": ELEMENT},
                             headers={"Authorization": f"Bearer {tokens[index % 3]}"}).status_code
                for index in range(15)]
    assert statuses.count(422) == 5 and statuses.count(429) == 10, statuses


def test_x_forwarded_for_is_ignored_unless_its_proxy_is_trusted(stack: Stack, trusting: str) -> None:
    created: list[dict] = []

    def create(http: httpx.Client, address: str) -> int:
        room = f"fwd-{secrets.token_hex(4)}"
        answer = http.post("/rooms", json={"ruleset": "board", "player": "ann", "room": room},
                           headers={"X-Forwarded-For": address})
        created.extend([answer.json()] if answer.status_code == 201 else [])
        return answer.status_code

    # By default the address is the peer's (loopback here), whatever the header says: two a minute, and one
    # live feed at once.
    default = stack.start_gateway("default", ALMANAC_RATE_ANON="2 per minute", ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS="1")
    with httpx.Client(base_url=default, timeout=10) as http:
        statuses = [create(http, f"203.0.113.{index}") for index in range(1, 4)]
    assert statuses == [201, 201, 429], statuses
    with LiveFeeds(default, created[-1]) as feeds:
        assert [feeds.open("203.0.113.1"), feeds.open("203.0.113.2")] == [None, "too_many_feeds_for_address"]
    # Behind a trusted proxy (here: loopback, named), the header names the client: each has its own limits.
    with httpx.Client(base_url=trusting, timeout=10) as http:
        assert [create(http, f"198.51.100.{index}") for index in range(1, 4)] == [201, 201, 201]
        assert [create(http, "198.51.100.9") for _ in range(3)] == [201, 201, 429]
    with LiveFeeds(trusting, created[-1]) as feeds:
        opened = [feeds.open(address) for address in ("198.51.100.1", "198.51.100.2", "198.51.100.1")]
        assert opened == [None, None, "too_many_feeds_for_address"]


def test_a_client_rotating_addresses_in_its_ipv6_64_is_one_client(trusting: str) -> None:
    """Behind a trusted proxy, requests and live feeds from many addresses of one /64 share one limit; the next
    /64 is another client, and an IPv4-mapped address is the IPv4 client it maps."""
    created: list[dict] = []

    def create(http: httpx.Client, address: str) -> int:
        answer = http.post("/rooms", json={"ruleset": "board", "player": "ann", "room": f"v6-{secrets.token_hex(4)}"},
                           headers={"X-Forwarded-For": address})
        created.extend([answer.json()] if answer.status_code == 201 else [])
        return answer.status_code

    url = trusting
    with httpx.Client(base_url=url, timeout=10) as http:
        rotating = [create(http, f"2001:db8:0:7::{index:x}") for index in range(1, 5)]
        assert rotating == [201, 201, 429, 429], rotating
        assert create(http, "2001:db8:0:8::1") == 201  # the next /64: another subscriber
        assert [create(http, "198.51.100.77"), create(http, "::ffff:198.51.100.77"),
                create(http, "198.51.100.77")] == [201, 201, 429]
    with LiveFeeds(url, created[0]) as feeds:
        opened = [feeds.open(address) for address in ("2001:db8:0:9::1", "2001:db8:0:9:ffff::2", "2001:db8:0:a::1")]
        assert opened == [None, "too_many_feeds_for_address", None]


class LiveFeeds(contextlib.ExitStack):
    """Live feeds of one created room, opened through a client that says it forwards for an address; each
    stays open until the block ends."""

    def __init__(self, url: str, room: dict) -> None:
        super().__init__()
        self.url = f"{url.replace('http://', 'ws://')}/rooms/{room['room']}/live?token={room['token']}"

    def open(self, address: str) -> str | None:
        """None when the feed is served (its first message is the room's first event), else the refusal's code."""
        socket = self.enter_context(connect(self.url, additional_headers={"X-Forwarded-For": address},
                                            open_timeout=10))
        return json.loads(socket.recv(timeout=10)).get("code")
