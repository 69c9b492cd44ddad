"""The Python client (almanac.client) against real engine, projector and gateway processes: whole games, retries, feed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from bundle_forgery import edited, invented_refusal
from gateway_stack import CHILD, Stack, client_stack
from whole_games import CLAIM_AHEAD_MS, CLAIM_FIRST_DAY, GAMES, ROUNDS, ended_by_its_rules

from almanac.client import ApiError, Client, Seat
from almanac.events import commitments as cm, registry
from almanac.events.dice import Dice

SECRET = "python-client-test-secret-" + "x" * 32


@pytest.fixture(scope="module")
def live(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Stack]]:
    """(gateway URL, auditor token, stack): engine, projector and a gateway process sharing one secret."""
    with client_stack(redis_url, tmp_path_factory.mktemp("python-client"), SECRET) as live:
        yield live


def play(seats: list[Seat], ruleset: str, rounds: int = ROUNDS, ahead_ms: int = 0) -> int:
    """Each seat's bot (the rule-set's seat bot, fed the seat's own view read through the client, as `almanac bots`
    plays a seat) sends its command through the client, round after round, until the room has ended or ``rounds``
    have passed; the accepted commands. ``ahead_ms``: how far ahead of the host's the seats' gateway clock reads."""
    seat_bot = registry.manifest(ruleset).seat_bot
    assert seat_bot is not None, ruleset
    accepted = 0
    for step in range(rounds):
        moved = False
        for seat in seats:
            shown = seat.view()
            if shown["ended"]:
                return accepted
            dice = Dice(b"client-test", f"{seat.room}/{seat.player}", step)
            command = seat_bot(shown["view"], seat.player, dice, int(time.time() * 1000) + ahead_ms)
            if command is None:
                continue  # nothing to do until the others move (a realm turn already ended)
            moved = True
            try:
                assert seat.command(command).version >= 1
                accepted += 1
            except ApiError as refused:
                assert refused.status == 422, refused  # a move the seat's view allowed refused by the rules
        assert moved, f"{ruleset}: no seat's bot has a move, and the game is not over"
    return accepted


def test_the_python_client_plays_a_whole_game_of_every_built_in_ruleset(live: tuple[str, str, Stack]) -> None:
    url, auditor, stack = live
    ahead = stack.start_gateway("gateway-ahead", preload="clock_ahead", ALMANAC_TEST_CLOCK_AHEAD_MS=str(CLAIM_AHEAD_MS))
    with Client(url) as client, Client(ahead) as later:
        assert sorted(entry["ruleset"] for entry in client.rulesets()) == sorted(GAMES)  # every built-in rule-set
        for ruleset, options in GAMES.items():
            # Given alice's room of the smallest game, and bob in it when it has a second seat
            alice = client.create_room(ruleset, "alice", room=f"py-{ruleset}", options=options or None)
            assert alice.answer["joined"] and alice.token
            seats = [alice]
            if "bob" in options.get("players", ()):
                seats.append(client.join(alice.room, "bob"))
            # When each seat's bot plays through the client until the rules end the game (nobody ends the room)
            if ruleset == "claim":
                # (alice plays her claim the day she stakes it, then plays on two days later, through the gateway
                # whose clock says so, until she proves it up)
                accepted = play(seats, ruleset, rounds=CLAIM_FIRST_DAY)
                assert not client.room(alice.room)["ended"]
                accepted += play([later.seat(alice.room, "alice", alice.token)], ruleset, ahead_ms=CLAIM_AHEAD_MS)
            else:
                accepted = play(seats, ruleset)
            assert accepted > 0, ruleset
            # Then the room ended by its rules, its scores are public, its log verifies, and alice's feed tells it all
            ended_by_its_rules(client, alice.room, auditor, ruleset)
            assert set(alice.scores()) >= {"alice"}
            assert client.verification(alice.room, token=alice.token)["ok"] is True
            latest = alice.events()["latest_version"]
            followed = [event["version"] for event in alice.follow(idle_timeout_s=2)]
            assert followed == list(range(1, latest + 1))


def test_a_command_resent_with_its_id_is_decided_once(live: tuple[str, str, Stack]) -> None:
    url, _, _ = live
    with Client(url) as client:
        alice = client.create_room("board", "alice", room="py-idempotent")
        # Given alice's command, decided
        first = alice.end("once", command_id="end-py-idempotent-0001")
        # When the same command id comes again (a retry after a lost answer)
        again = alice.end("once", command_id="end-py-idempotent-0001")
        # Then it is the same outcome, marked duplicate, and the room has the one end only
        assert (again.first_version, again.version, again.duplicate) == (first.first_version, first.version, True)
        assert alice.events()["latest_version"] == first.version
        # and a fresh id for the same seat is refused by the rules (already ended), as a typed ApiError
        with pytest.raises(ApiError) as refused:
            alice.end("twice")
        assert refused.value.status == 422 and refused.value.code


class RecordingTransport(httpx.HTTPTransport):
    """A real HTTP transport that notes each answer's status and Retry-After (what the client had to ride out)."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[int, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.answers.append((response.status_code, response.headers.get("retry-after")))
        return response


def test_the_client_waits_out_429_as_retry_after_says_and_every_call_lands(live: tuple[str, str, Stack]) -> None:
    _, _, stack = live
    # Given a gateway that lets one client address create only 2 rooms a second
    url = stack.start_gateway("gateway-limited", ALMANAC_RATE_ANON="2/second")
    transport = RecordingTransport()
    with Client(url, transport=transport) as client:
        # When the client creates six rooms at once
        seats = [client.create_room("board", "p", room=f"py-limited-{n}") for n in range(6)]
    # Then every room exists, once, and the gateway did refuse some tries with 429 and a Retry-After
    assert [seat.room for seat in seats] == [f"py-limited-{n}" for n in range(6)]
    refused = [after for status, after in transport.answers if status == 429]
    assert refused and all(after is not None for after in refused)
    assert sum(1 for status, _ in transport.answers if status == 201) == 6


def test_the_live_feed_follows_across_a_gateway_restart_without_gap_or_duplicate(
        live: tuple[str, str, Stack], tmp_path: Path) -> None:
    _, _, stack = live
    # Given a gateway of its own on a known port, and alice following her room's feed
    port = int(stack.start_gateway("gateway-restart").rsplit(":", 1)[1])
    url = f"http://127.0.0.1:{port}"
    seen: list[int] = []
    # retries for up to ~100 s: a loaded CI host can take 20 s and more to start the new gateway process
    with Client(url, retries=200, max_backoff_s=0.5) as client:
        alice = client.create_room("claim", "alice", room="py-restart")
        follower = threading.Thread(target=lambda: seen.extend(e["version"] for e in alice.follow(idle_timeout_s=8)))
        follower.start()
        policy_moves = _bot_moves(client, alice, 3)
        # When the gateway process is stopped mid-feed and another comes up on the same port
        stack.processes["gateway-restart"].terminate()
        stack.processes["gateway-restart"].wait(10)
        log = open(tmp_path / "gateway-again.log", "ab")  # noqa: SIM115 - the child owns it
        stack.processes["gateway-again"] = subprocess.Popen(
            [sys.executable, "-c", CHILD, "gateway"], env={**stack.env, "ALMANAC_HTTP_PORT": str(port)},
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        policy_moves += _bot_moves(client, alice, 3)  # the client's retries ride out the restart
        follower.join(60)
        latest = alice.events()["latest_version"]
    # Then the feed saw every version once, in order, across the restart
    assert policy_moves > 0
    assert seen == list(range(1, latest + 1))


def _bot_moves(client: Client, seat: Seat, count: int) -> int:
    """Up to ``count`` moves of the claim bot for ``seat`` (the room's full state through the player's view is
    not needed: claim hides nothing), the accepted ones."""
    manifest = registry.manifest("claim")
    done = 0
    for step in range(count):
        view: dict[str, Any] = seat.view()["view"]
        game = msgspec.convert(view, manifest.decider.state_type, strict=False)
        command = manifest.policy(game, seat.player, Dice(b"client-test", seat.room, step), int(time.time() * 1000))
        if command is None:
            break
        try:
            seat.command(command)
            done += 1
        except ApiError as refused:
            assert refused.status == 422, refused
    return done


def test_a_seat_key_gets_the_seat_back_through_the_client(live: tuple[str, str, Stack]) -> None:
    url, _, _ = live
    with Client(url) as client:
        alice = client.create_room("realm", "alice", room="py-seat-key", options={"players": ["alice", "bob"]})
        if alice.seat_key is None:
            pytest.skip("this gateway issues no seat keys yet (issue 32's seats that survive)")
        # Given alice lost her token (closed the tab) but kept her seat key: a new client, nothing else kept
        with Client(url) as elsewhere:
            again = elsewhere.reclaim_seat(alice.room, "alice", alice.seat_key)
            # Then the token it gets acts for her seat (one minted in the same second is the same bytes)
            assert again.player == "alice" and again.view()["player"] == "alice"
        # and a wrong key is refused
        with pytest.raises(ApiError) as refused:
            client.reclaim_seat(alice.room, "alice", "A" * 43)
        assert refused.value.status == 403


def test_seats_are_handed_to_bots_through_the_client(live: tuple[str, str, Stack]) -> None:
    url, _, _ = live
    with Client(url) as client:
        # Given alice's realm room for alice, bob and carol, carol seated and bob's seat empty
        alice = client.create_room("realm", "alice", room="py-bots", options={"players": ["alice", "bob", "carol"]},
                                   seat_bots=True)
        carol = client.join(alice.room, "carol")
        # When alice, the creator, hands bob's empty seat to a bot
        empty = alice.hand_to_bot("bob")
        assert (empty["seat"], empty["how"], empty["added"]) == ("bob", "empty", True)
        # Then carol's seat, which carol holds, is not hers to hand over: a typed 409
        with pytest.raises(ApiError) as held:
            alice.hand_to_bot("carol")
        assert (held.value.status, held.value.code) == (409, "seat_held")
        # When carol leaves her own seat to a bot (the default seat is the client's own)
        left = carol.hand_to_bot()
        # Then the room decided it as a command of carol's, which alice sees among the room's events
        assert (left["seat"], left["how"]) == ("carol", "left")
        assert [event["type"] for event in left["handed"]["events"]] == ["room.seat_to_bot"]
        seen = [e for e in alice.events()["events"] if e["type"] == "room.seat_to_bot"]
        assert [(e["event"]["player"], e["event"]["reason"]) for e in seen] == [("carol", "left")]
        # and leaving it again is answered as a bot seat already
        assert carol.hand_to_bot()["how"] == "already"
        # Given a room created without seat bots, when its player leaves their seat, then a typed 422
        plain = client.create_room("realm", "dora", room="py-no-bots", options={"players": ["dora", "eve"]})
        with pytest.raises(ApiError) as refused:
            plain.hand_to_bot()
        assert (refused.value.status, refused.value.code) == (422, "no_bot_policy")


async def test_the_asyncio_client_plays_and_follows_like_the_other(live: tuple[str, str, Stack]) -> None:
    from almanac.client.aio import AsyncClient  # noqa: PLC0415

    url, _, _ = live
    async with AsyncClient(url) as client:
        # Given a realm room of two, made and joined on an event loop
        alice = await client.create_room("realm", "alice", room="py-async", options={"players": ["alice", "bob"]})
        bob = await client.join(alice.room, "bob")
        # When both end their turn (the season ends) and bob ends the room
        for seat in (alice, bob):
            await seat.command({"kind": "end_turn"})
        await bob.end("over")
        # Then bob's feed, followed on the loop, has every version once, and a refusal is a typed ApiError
        latest = (await bob.events())["latest_version"]
        assert [event["version"] async for event in bob.follow(idle_timeout_s=2)] == list(range(1, latest + 1))
        with pytest.raises(ApiError) as refused:
            await alice.command({"kind": "end_turn"})
        assert refused.value.status == 422


def test_answers_not_ready_in_time_are_followed_to_the_end(live: tuple[str, str, Stack]) -> None:
    _, _, stack = live
    # Given a gateway that waits only 1 ms for the engine, and the engine stopped for a moment
    url = stack.start_gateway("gateway-impatient", ALMANAC_COMMAND_TIMEOUT_MS="1")
    stack.processes["engine"].terminate()
    stack.processes["engine"].wait(15)
    transport = RecordingTransport()
    with Client(url, transport=transport) as client:
        # When a room is created through the client meanwhile (answered 202: nothing decides it yet)
        created: list[Seat] = []
        creating = threading.Thread(target=lambda: created.append(client.create_room(
            "realm", "alice", room="py-pending", options={"players": ["alice", "bob"]})))
        creating.start()
        # until the client has been answered 202 at least once (it then rides them out), at most the 2 s this
        # story used to sleep: the engine comes back only once the client is riding out a 202, as before
        deadline = time.monotonic() + 2.0
        while not any(status == 202 for status, _ in list(transport.answers)) and time.monotonic() < deadline:
            time.sleep(0.02)
        stack.start("engine")  # and the engine comes back
        creating.join(60)
        [alice] = created
        bob = client.join(alice.room, "bob")
        ended = bob.command({"kind": "end_turn"})
        # Then each call has its real answer (the tokens act; the command's versions), the 202s ridden out
        assert alice.view()["player"] == "alice" and ended.version >= 4
    assert any(status == 202 for status, _ in transport.answers)


def verify_bundle_cli(stack: Stack, bundle: Path, *files: str) -> tuple[int, str]:
    """`almanac verify-bundle BUNDLE ...` in a process of its own with nothing of the deployment (no Redis, no
    secret): its exit code and output."""
    env = {name: value for name, value in stack.env.items() if name not in ("REDIS_URL", "ALMANAC_SECRET")}
    done = subprocess.run([sys.executable, "-c", CHILD, "verify-bundle", str(bundle), *files], env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_what_a_player_holds_through_the_client_proves_an_altered_bundle_wrong(live: tuple[str, str, Stack],
                                                                               tmp_path: Path) -> None:
    url, auditor, stack = live
    seat_bot = registry.manifest("board").seat_bot
    with Client(url) as client:
        # Given alice plays her board room through the client: moves the rules accept, and one they refuse
        alice = client.create_room("board", "alice", room="py-held")
        for step in range(2):
            shown = alice.view()
            alice.command(seat_bot(shown["view"], "alice", Dice(b"held", alice.room, step), 0))
        wrong = {"kind": "place_element", "element": 999, "row": 0, "column": 0, "rotation": 0, "mirror": False}
        with pytest.raises(ApiError) as refused:
            alice.command(wrong, command_id="wrong-element")
        assert refused.value.status == 422 and "receipt" in refused.value.body, refused.value.body
        alice.end("done")
        # When she exports what her client held of the room
        checkpoints, receipts = tmp_path / "alice.checkpoints.json", tmp_path / "alice.receipts.json"
        client.export_held(alice.room, checkpoints=checkpoints, receipts=receipts)
        # and the operator hands out the room's bundle
        latest = client.room(alice.room)["version"]
        bundle = client.request("GET", f"/rooms/{alice.room}/dispute", token=auditor,
                                params={"from": 1, "to": latest})
    held_checkpoints = json.loads(checkpoints.read_text())
    held_receipts = json.loads(receipts.read_text())
    # Then the files are the formats verify-bundle reads, with a checkpoint of every answer and her one receipt
    assert held_checkpoints["format"] == "almanac-checkpoints" and held_checkpoints["keys"]["keys"]
    versions = [c["version"] for c in held_checkpoints["checkpoints"]]
    assert versions == sorted(set(versions)) and versions[0] == alice.answer["checkpoint"]["version"]
    assert versions[-1] == latest, versions
    assert held_receipts["format"] == "almanac-receipts"
    [receipt] = held_receipts["receipts"]
    assert receipt["command_id"].endswith(":wrong-element") and receipt["code"] == refused.value.code
    honest = tmp_path / "bundle.json"
    honest.write_text(json.dumps(bundle))
    held = ("--checkpoints", str(checkpoints), "--receipts", str(receipts))
    # and the honest bundle VERIFIES against them (without her receipt her refusal rests on the operator's word)
    code, said = verify_bundle_cli(stack, honest, *held)
    assert code == 0 and "VERIFIED" in said, said
    code, said = verify_bundle_cli(stack, honest, "--checkpoints", str(checkpoints))
    assert code == 3 and "INCOMPLETE" in said, said

    # And a bundle with an event edited (re-sealed by an operator holding every secret) fails at her checkpoint
    forged = tmp_path / "edited.json"
    forged.write_text(json.dumps(edited(bundle, 2, lambda e: e.setdefault("note", "forged"))))
    code, said = verify_bundle_cli(stack, forged, *held)
    named = [cm.checkpoint_label(c) for c in held_checkpoints["checkpoints"]]
    assert code == 1 and "checkpoints" in said and any(label in said for label in named), said
    # and a bundle that tells her refusal with another code (an invented refusal of her command) fails at her receipt
    told = json.loads(json.dumps(bundle))
    [shown] = [r for r in told["refusals"] if r["command"]["command_id"] == receipt["command_id"]]
    shown["error"]["code"] = "board.invented"
    forged.write_text(json.dumps(told))
    code, said = verify_bundle_cli(stack, forged, *held)
    assert code == 1 and cm.receipt_label(receipt) in " ".join(said.split()), said
    # and a refusal of a command she never sent is not covered by anything she holds: never VERIFIED
    forged.write_text(json.dumps(invented_refusal(bundle, "alice", {"kind": "end_room", "reason": "never"}, 2,
                                                  "room_ended")))
    code, said = verify_bundle_cli(stack, forged, *held)
    assert code != 0 and "VERIFIED" not in said.replace("NOT VERIFIED", ""), said
