"""Delayed spectator feeds sign each checkpoint once: every feed (and answer) naming a version reuses its
signature, so a hundred spectators behind the room cost one Ed25519 signature per version, not one per message."""

from __future__ import annotations

from fastapi.testclient import TestClient
from test_spectators import played_room

DELAY = 2


def test_spectators_delayed_alike_share_one_signature_per_version(api: TestClient) -> None:
    # Given a realm room some turns in, and the gateway's count of checkpoint signatures
    room, *_, latest = played_room(api)
    checkpoints = api.app.state.gateway.checkpoints

    # When a first spectator watches it delayed, and a live answer signs the head in between
    with api.websocket_connect(f"/rooms/{room}/watch?delay={DELAY}") as socket:
        first = [socket.receive_json() for _ in range(latest - DELAY)]
    api.get(f"/rooms/{room}")
    signed_before = checkpoints.signatures
    # and a second and third spectator watch it with the same delay
    later = []
    for _ in range(2):
        with api.websocket_connect(f"/rooms/{room}/watch?delay={DELAY}") as socket:
            later.append([socket.receive_json() for _ in range(latest - DELAY)])

    # Then they got the same checkpoints, and not one of them was signed again
    assert all(feed == first for feed in later)
    assert [m["checkpoint"]["version"] for m in first] == list(range(1, latest - DELAY + 1))
    assert checkpoints.signatures == signed_before
