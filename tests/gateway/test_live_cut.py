"""The live feed across cut connections: a client whose TCP connection is cut mid-stream, again and again while
the room moves, resumes from the last version it saw and ends with every version once (a real gateway)."""

from __future__ import annotations

import json
import secrets
import socket
import threading
from pathlib import Path

import httpx
from gateway_stack import engine_and_gateway
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

ROUNDS = 40


def test_a_feed_cut_mid_stream_resumes_with_no_gap_and_no_duplicate(redis_url: str, tmp_path: Path) -> None:
    with engine_and_gateway(redis_url, tmp_path) as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        alice, bob = f"alice-{secrets.token_hex(2)}", f"bob-{secrets.token_hex(2)}"
        created = http.post("/rooms", json={"ruleset": "realm", "player": alice,
                                            "options": {"players": [alice, bob], "years": 100}}).json()
        room = created["room"]
        tokens = [created["token"], http.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]]
        done = threading.Event()

        def play() -> None:  # the room moves all the while: both players end their turn, season after season
            with httpx.Client(base_url=url, timeout=30) as writer:
                for _ in range(ROUNDS):
                    for token in tokens:
                        answer = writer.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                                             json={"command": {"kind": "end_turn"}})
                        assert answer.status_code == 200, answer.text
            done.set()

        writer = threading.Thread(target=play)
        writer.start()
        seen: list[int] = []
        cuts = 0
        try:
            while True:
                latest = http.get(f"/rooms/{room}").json()["version"]
                if done.is_set() and seen and seen[-1] == latest:
                    break
                ws_url = url.replace("http://", "ws://") + f"/rooms/{room}/live?from_version={len(seen) + 1}"
                with connect(ws_url, additional_headers={"Authorization": f"Bearer {tokens[1]}"},
                             open_timeout=10) as feed:
                    try:
                        # A few messages, then the connection is cut: no close frame, the TCP socket just goes
                        for _ in range(1 + cuts % 5):
                            seen.append(json.loads(feed.recv(timeout=5))["version"])
                    except (TimeoutError, ConnectionClosed):
                        pass
                    feed.socket.shutdown(socket.SHUT_RDWR)
                    feed.socket.close()
                cuts += 1
        finally:
            writer.join(60)
        # Then every version arrived exactly once, in order, over all those connections
        assert seen == list(range(1, latest + 1)), (cuts, seen[:20])
        assert cuts > 10
