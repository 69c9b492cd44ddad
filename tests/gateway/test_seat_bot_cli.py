"""`almanac bot ROOM --seat NAME` as a real subprocess against engine, projector and gateway: one seat is a person's
(the Python client), the other is played by the bot through the public API with that seat's own key."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_stack import CHILD, Stack, client_stack

from almanac.client import ApiError, Client, PlayerKey, Seat
from almanac.client.seat_bot import ATTEMPTS, SeatBot, bot_command_id, bot_key
from almanac.events import commitments as cm, registry
from almanac.events.dice import Dice
from almanac.services.bots import ruleset_policy

SECRET = "seat-bot-cli-test-secret-" + "y" * 32
BOT_MOVES = 3  # the bot's accepted commands the story waits for before the person ends the room
WAIT_S = 120.0  # generous: a busy shared machine; only that the game moves is asserted, never a speed


@pytest.fixture(scope="module")
def live(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Stack]]:
    with client_stack(redis_url, tmp_path_factory.mktemp("seat-bot-cli"), SECRET) as live:
        yield live


def start_bot(stack: Stack, url: str, room: str, seat: str, key_file: Path, *extra: str) -> subprocess.Popen:
    """`almanac bot` in its own process, with nothing of the deployment: no Redis URL, no secret."""
    env = {name: value for name, value in stack.env.items() if name not in ("REDIS_URL", "ALMANAC_SECRET")}
    log = open(stack.data_dir / f"bot-{room}.log", "wb")  # noqa: SIM115 - the child owns it
    process = subprocess.Popen([sys.executable, "-c", CHILD, "bot", room, "--seat", seat, "--seat-key-file",
                                str(key_file), "--url", url, "--delay", "0.05", "--poll", "1", *extra],
                               env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return process


def bot_commands(client: Client, auditor: str, room: str, seat: str) -> list[str]:
    """The ids of the seat's bot's commands in the room's log: they carry the bot's ids (``bot-...``) under the seat
    (a command may record several events)."""
    events = client.events(room, token=auditor)["events"]
    return sorted({e["command_id"] for e in events if (e.get("command_id") or "").startswith(f"{room}:{seat}:bot-")})


def person_plays_until_the_bot_moved(client: Client, auditor: str, person: Seat, bot_seat: str,
                                     process: subprocess.Popen, log: Path) -> list[str]:
    """The person plays their city from their view (the realm's bot stands in for their choices) until the bot has
    BOT_MOVES commands in the log; their ids."""
    manifest = registry.manifest("realm")
    deadline, step = time.monotonic() + WAIT_S, 0
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        moved = bot_commands(client, auditor, person.room, bot_seat)
        if len(moved) >= BOT_MOVES:
            return moved
        seen = person.view()
        command = manifest.seat_bot(seen["view"], person.player, Dice(b"person", person.room, step), 0)
        step += 1
        if command is not None:
            try:
                person.command(command)
            except ApiError as refused:
                assert refused.status == 422, refused
        time.sleep(0.2)
    raise AssertionError(f"the bot did not move in {WAIT_S} s: {log.read_text(errors='replace')}")


def end_and_verify(client: Client, auditor: str, person: Seat, process: subprocess.Popen, log: Path) -> dict:
    """The person ends the room; the bot then stops by itself with exit 0; the room's verification."""
    person.end("the story is over")
    try:
        assert process.wait(timeout=60) == 0, log.read_text(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
    report = client.verification(person.room, token=auditor)
    assert report["ok"] is True, report
    return report


def test_almanac_bot_plays_a_seat_with_its_seat_key_through_the_api(live: tuple[str, str, Stack],
                                                                    tmp_path: Path) -> None:
    url, auditor, stack = live
    with Client(url) as client:
        # Given alice's realm room for alice and bob, and bob's seat key kept in a file (nothing else of bob's)
        alice = client.create_room("realm", "alice", room="bot-cli-keyed", options={"players": ["alice", "bob"]})
        bob = client.join(alice.room, "bob")
        assert bob.seat_key, "the gateway issues seat keys (issue 32)"
        key_file = tmp_path / "bob.seat-key"
        key_file.write_text(bob.seat_key + "\n")
        # When bob runs `almanac bot` for his seat, as a process of its own that holds no deployment secret, keeping
        # what his seat is answered
        kept = tmp_path / "bob.checkpoints.json", tmp_path / "bob.receipts.json"
        process = start_bot(stack, url, alice.room, "bob", key_file, "--keep-checkpoints", str(kept[0]),
                            "--keep-receipts", str(kept[1]))
        log = stack.data_dir / f"bot-{alice.room}.log"
        # and alice plays her city meanwhile
        moved = person_plays_until_the_bot_moved(client, auditor, alice, "bob", process, log)
        # Then the game moved by the bot's commands, each in the log under bob's seat with the bot's own ids
        assert len(moved) >= BOT_MOVES
        assert all(command_id.startswith(f"{alice.room}:bob:bot-") for command_id in moved)
        # and when alice ends the room the bot stops on its own (exit 0), and the room verifies
        end_and_verify(client, auditor, alice, process, log)
        # and its output said each move it sent, and why it stopped
        said = log.read_text(errors="replace")
        assert said.count(": sent ") >= BOT_MOVES and "the room ended; the bot stops" in said, said
        # and bob's files hold a signed checkpoint up to the end and a receipt of each refusal the bot was answered
        # (a command sent as the room ended is one too: refused room_ended, not said)
        checkpoints, keys = cm.read_checkpoint_file(json.loads(kept[0].read_text()))
        receipts, _ = cm.read_receipt_file(json.loads(kept[1].read_text()))
        latest = client.room(alice.room)["version"]
        assert keys and checkpoints[-1]["version"] == latest and len(receipts) >= said.count(" refused: 422 "), said
        assert all((r["room"], r["player"]) == (alice.room, "bob") for r in receipts), receipts
        trusted = cm.trusted_keys(keys)
        assert all(cm.signature_valid(trusted[c["kid"]], c) for c in checkpoints)
        assert all(cm.receipt_signature_valid(trusted[r["kid"]], r) for r in receipts)


def test_almanac_bot_signs_every_command_of_a_signed_seat(live: tuple[str, str, Stack], tmp_path: Path) -> None:
    url, auditor, stack = live
    with Client(url) as client:
        # Given a signed realm room (scheme 3): ann's and bob's joins registered keys; bob keeps his key and seat key
        ann = client.create_room("realm", "ann", options={"players": ["ann", "bob"]}, player_key=PlayerKey.generate(),
                                 nonce=secrets.token_hex(32))
        bob_key = PlayerKey.generate()
        bob = client.join(ann.room, "bob", player_key=bob_key, nonce=secrets.token_hex(32))
        key_file, player_key_file = tmp_path / "bob.seat-key", tmp_path / "bob.player-key"
        key_file.write_text(bob.seat_key or "")
        player_key_file.write_text(bob_key.export())
        # When bob's bot plays his seat with his player key
        process = start_bot(stack, url, ann.room, "bob", key_file, "--player-key", str(player_key_file))
        log = stack.data_dir / f"bot-{ann.room}.log"
        person_plays_until_the_bot_moved(client, auditor, ann, "bob", process, log)
        report = end_and_verify(client, auditor, ann, process, log)
        # Then every command of both seats was signed, the bot's included
        assert (report["signing_players"], report["unsigned_players"]) == (["ann", "bob"], []), report
        assert report["commands_signed"] >= BOT_MOVES + 1, report


def test_a_restarted_bot_sends_the_same_command_under_the_same_id(live: tuple[str, str, Stack]) -> None:
    url, _, _ = live
    with Client(url) as client:
        # Given bob's seat in a realm room, and his bot's move at the room's version, sent once
        alice = client.create_room("realm", "alice", room="bot-cli-restart", options={"players": ["alice", "bob"]})
        bob = client.join(alice.room, "bob")
        seen = bob.view()
        policy = ruleset_policy("realm", seen["ruleset_version"])
        first = SeatBot(bob, policy, delay_s=0, max_rounds=1)
        first.step(seen)
        assert first.report.sent == 1
        # When the bot restarts (a new SeatBot, the same seat key) and decides again at that same version
        again = SeatBot(client.reclaim_seat(alice.room, "bob", bob.seat_key or ""), policy, delay_s=0)
        lines: list[str] = []
        again.say = lines.append
        again.step(seen)
        # Then it sent the same id, which the server answered with the first outcome (nothing decided twice)
        assert lines and "already decided" in lines[0], lines
        key = bot_key(bob.seat_key or "")
        assert bot_command_id(key, alice.room, "bob", seen["version"]).startswith("bot-")


def test_the_demos_players_are_seat_bots_playing_through_the_api(live: tuple[str, str, Stack]) -> None:
    from io import StringIO  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from almanac.services.cli.demo import Demo  # noqa: PLC0415

    url, auditor, _ = live
    # Given `almanac demo`'s two players at a realm room (one city each) and a board map of their own
    demo = Demo(url, auditor, Console(file=StringIO()))
    try:
        rooms = demo.play("realm") + demo.play("board")
    finally:
        demo.client.close()
    with Client(url) as client:
        for room in rooms:
            # Then every game command in each room came from the seat's bot (client/seat_bot.py SeatBot, as
            # `almanac bot` plays): under the bot's ids, derived from the seat's own secret, at the room's version
            assert room.accepted > 0, room.refused
            events = client.events(room.room, token=auditor)["events"]
            game = [e for e in events if e["type"].startswith(f"{room.ruleset}.")]
            assert game, events[-3:]
            for player, seat in room.seats.items():
                key = bot_key(seat.seat_key or seat.token)
                ours = {f"{room.room}:{player}:{bot_command_id(key, room.room, player, version, attempt)}"
                        for version in range(1, events[-1]["version"] + 1) for attempt in range(ATTEMPTS)}
                assert {e["command_id"] for e in game if e["player"] == player} <= ours, room.room


def test_almanac_bot_without_one_credential_says_so_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner  # noqa: PLC0415

    from almanac.services.cli import _load_commands, app  # noqa: PLC0415

    _load_commands()
    runner = CliRunner()
    env = {"COLUMNS": "200", "ALMANAC_DATA_DIR": str(tmp_path / "none")}
    # Given no seat key and no token, then one line naming both, exit code 1 (nothing is sent anywhere)
    neither = runner.invoke(app, ["bot", "r", "--seat", "bob", "--url", "http://127.0.0.1:9"], env=env)
    assert neither.exit_code == 1 and "--seat-key" in neither.output and "--token" in neither.output
    # Given both, the same refusal: the bot plays one seat with one credential
    both = runner.invoke(app, ["bot", "r", "--seat", "bob", "--seat-key", "k", "--token", "t", "--url",
                               "http://127.0.0.1:9"], env=env)
    assert both.exit_code == 1 and "one of them" in both.output
    # Given a delay past the bound, then a usage error
    slow = runner.invoke(app, ["bot", "r", "--seat", "bob", "--token", "t", "--delay", "601"], env=env)
    assert slow.exit_code == 2
