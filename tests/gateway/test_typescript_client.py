"""The TypeScript client (clients/typescript): up to date with the OpenAPI document, and a whole game of every built-in
rule-set played through it in Node against engine, projector and gateway processes."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from gateway_stack import CHILD, Stack, client_stack
from whole_games import CLAIM_AHEAD_MS, CLAIM_FIRST_DAY, GAMES, ROUNDS, ended_by_its_rules

from almanac.client import Client
from almanac.events import registry
from almanac.events.commitments import read_checkpoint_file, read_receipt_file, receipt_label
from almanac.events.dice import Dice
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.signing import command_bytes

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
SECRET = "typescript-client-test-secret-" + "x" * 32
NODE = shutil.which("node")
NPM = shutil.which("npm")
needs_node = pytest.mark.skipif(NODE is None or NPM is None, reason="the TypeScript client runs on node, installed by npm")


def test_the_committed_openapi_document_is_the_servers() -> None:
    # The document the TypeScript types were generated from is what `almanac openapi` prints now (in a process of
    # its own: this one has the tests' extra rule-set registered). A change to a route or a game fails here until
    # `almanac openapi --out clients/typescript/openapi.json && npm run generate` is run and committed.
    printed = subprocess.run([sys.executable, "-c", CHILD, "openapi"], capture_output=True, text=True, check=True,
                             timeout=120).stdout
    assert json.loads(printed) == json.loads((PACKAGE / "openapi.json").read_text()), \
        "clients/typescript/openapi.json is stale: run `almanac openapi --out clients/typescript/openapi.json` " \
        "and `npm run generate` in clients/typescript"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of clients/typescript with its locked dependencies installed and compiled (skips when npm cannot
    reach its registry)."""
    if NODE is None or NPM is None:
        pytest.skip("the TypeScript client runs on node, installed by npm")
    work = tmp_path_factory.mktemp("ts") / "typescript"
    shutil.copytree(PACKAGE, work, ignore=shutil.ignore_patterns("node_modules", "dist"))
    env = {**os.environ, "npm_config_fetch_retries": os.environ.get("npm_config_fetch_retries", "1"),
           "npm_config_fetch_timeout": os.environ.get("npm_config_fetch_timeout", "30000")}
    try:
        installed = subprocess.run([NPM, "ci", "--no-audit", "--no-fund"], cwd=work, env=env, capture_output=True,
                                   text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("npm ci did not finish in 300 s (the npm registry is unreachable or slow)")
    if installed.returncode != 0:
        pytest.skip(f"cannot install the TypeScript client's packages from the npm registry: {installed.stderr[-300:]}")
    subprocess.run([NPM, "run", "build"], cwd=work, check=True, capture_output=True, timeout=300)
    return work


@needs_node
def test_the_typescript_types_are_generated_from_the_committed_document(built: Path) -> None:
    # openapi-typescript's own check: generating again from openapi.json gives the committed src/schema.d.ts
    checked = subprocess.run([NPM, "run", "check"], cwd=built, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout[-1000:] + checked.stderr[-1000:]
    # and the check can fail: a hand edit of the types is caught
    schema = built / "src" / "schema.d.ts"
    generated = schema.read_text()
    schema.write_text(generated.replace('"stone" | "bronze" | "iron" | "steel" | "gold"',
                                        '"stone" | "bronze" | "iron" | "steel" | "gold" | "mithril"'))
    assert subprocess.run([NPM, "run", "check"], cwd=built, capture_output=True, timeout=300).returncode != 0
    # (the types put back as generated for the module's other stories: the first check said they are what
    # `npm run generate` writes, so writing them back spares a third npm and node start)
    schema.write_text(generated)


CONSOLE_SIGNING = ROOT / "services" / "gateway" / "console" / "signing.js"


@needs_node
def test_the_console_signs_with_the_committed_build_of_the_clients_signing_module(built: Path, tmp_path: Path) -> None:
    # The console has no signing code of its own: app.js and verify.js import signing.js, and signing.js is
    # clients/typescript/src/signing.ts compiled as it is. A change to the source fails here until
    # `npm run build:console` in clients/typescript is run and its output committed.
    console = CONSOLE_SIGNING.parent
    for page in ("app.js", "verify.js"):
        text = (console / page).read_text()
        assert 'from "./signing.js"' in text and "almanac-command-v2" not in text and "almanac-join-v1" not in text
    # One compiler run (tsc is slow to start) with build:console's options: the source as it is, and beside it a
    # copy whose signed bytes were changed, to show the comparison can fail
    edited = built / "edited" / "signing.ts"
    edited.parent.mkdir(exist_ok=True)
    edited.write_text((built / "src" / "signing.ts").read_text().replace('"almanac-command-v2"', '"almanac-command-v3"'))
    (built / "tsconfig.check.json").write_text(json.dumps({
        "extends": "./tsconfig.console.json", "compilerOptions": {"rootDir": ".", "outDir": str(tmp_path)},
        "files": ["src/signing.ts", "edited/signing.ts"]}))
    subprocess.run([NODE, "node_modules/typescript/bin/tsc", "-p", "tsconfig.check.json"], cwd=built, check=True,
                   capture_output=True, timeout=300)
    assert (tmp_path / "src" / "signing.js").read_text() == CONSOLE_SIGNING.read_text(), \
        "services/gateway/console/signing.js is stale: run `npm run build:console` in clients/typescript and commit it"
    assert (tmp_path / "edited" / "signing.js").read_text() != CONSOLE_SIGNING.read_text()


class Driver:
    """clients/typescript/test/driver.mjs in Node: one JSON line per operation of the TypeScript client."""

    def __init__(self, built: Path, url: str) -> None:
        self.process = subprocess.Popen([NODE, "--experimental-websocket", "test/driver.mjs", url], cwd=built,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def __call__(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, self.process.stderr.read() if self.process.stderr else "the driver exited"
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(10)


@pytest.fixture(scope="module")
def live(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Stack]]:
    """(gateway URL, auditor token, stack): engine, projector and a gateway process sharing one secret."""
    with client_stack(redis_url, tmp_path_factory.mktemp("ts-stack"), SECRET) as live:
        yield live


def play_in_node(driver: Driver, room: str, players: list[str], ruleset: str, rounds: int = ROUNDS,
                 ahead_ms: int = 0) -> int:
    """Each seat's bot (the rule-set's seat bot, fed the seat's own view as the TypeScript client reads it) picks a
    command and the TypeScript client sends it, round after round, until the room has ended or ``rounds`` have
    passed; the accepted commands. ``ahead_ms``: how far ahead of the host's the driver's gateway stamps."""
    seat_bot = registry.manifest(ruleset).seat_bot
    assert seat_bot is not None, ruleset
    accepted = 0
    for step in range(rounds):
        moved = False
        for player in players:
            shown = driver("view", room=room, player=player)
            assert shown["ok"] and shown["player"] == player, shown
            if shown["ended"]:
                return accepted
            dice = Dice(b"ts-test", f"{room}/{player}", step)
            command = seat_bot(shown["view"], player, dice, int(time.time() * 1000) + ahead_ms)
            if command is None:
                continue  # nothing to do until the others move (a realm turn already ended)
            moved = True
            answer = driver("command", room=room, player=player, command=msgspec.to_builtins(command))
            assert answer["ok"] or answer["status"] == 422, answer  # the rules may refuse a move the view allowed
            accepted += answer["ok"]
        assert moved, f"{ruleset}: no seat's bot has a move, and the game is not over"
    return accepted


@needs_node
def test_the_typescript_client_plays_a_whole_game_of_every_built_in_ruleset(
        built: Path, live: tuple[str, str, Stack]) -> None:
    url, auditor, stack = live
    ahead = stack.start_gateway("gateway-ahead", preload="clock_ahead", ALMANAC_TEST_CLOCK_AHEAD_MS=str(CLAIM_AHEAD_MS))
    driver, later = Driver(built, url), Driver(built, ahead)
    try:
        with Client(url, token=auditor) as watcher:  # the auditor's eyes, for what the story checks
            for ruleset, options in GAMES.items():
                # Given alice's room of the smallest game created through the TypeScript client, and bob in it when
                # it has a second seat
                room = f"ts-{ruleset}"
                created = driver("create", ruleset=ruleset, player="alice",
                                 extra={"room": room, **({"options": options} if options else {})})
                assert created["ok"], created
                players = ["alice"]
                if "bob" in options.get("players", ()):
                    assert driver("join", room=room, player="bob")["ok"]
                    players.append("bob")
                # When each seat's bot plays through it until the rules end the game (nobody ends the room)
                if ruleset == "claim":
                    # (alice plays her claim the day she stakes it; two days later she takes her seat back with her
                    # seat key, through the gateway whose clock says so, and plays on until she proves it up)
                    accepted = play_in_node(driver, room, players, ruleset, rounds=CLAIM_FIRST_DAY)
                    assert not watcher.room(room)["ended"]
                    assert later("reclaim", room=room, player="alice", seat_key=created["seat_key"])["ok"]
                    accepted += play_in_node(later, room, players, ruleset, ahead_ms=CLAIM_AHEAD_MS)
                else:
                    accepted = play_in_node(driver, room, players, ruleset)
                assert accepted > 0, ruleset
                # Then the room ended by its rules and verifies, alice's view and events read through the client,
                # and her live feed (a WebSocket in Node) gives every version once, in order
                ended_by_its_rules(watcher, room, auditor, ruleset)
                assert watcher.verification(room)["ok"] is True
                view = driver("view", room=room, player="alice")
                assert view["ok"] and view["player"] == "alice" and view["ended"]
                latest = driver("events", room=room, player="alice")["latest_version"]
                followed = driver("follow", room=room, player="alice", until=latest)
                assert followed["versions"] == list(range(1, latest + 1)), ruleset
    finally:
        driver.close()
        later.close()


MINE = {"kind": "mine", "ore": "stone"}
REFUSED_SMELT = {"kind": "smelt", "ore": "bronze", "amount": 5000}  # no city starts with bronze ore: always refused


@needs_node
def test_the_typescript_client_signs_its_seats_commands_with_webcrypto(built: Path,
                                                                       live: tuple[str, str, Stack]) -> None:
    url, auditor, _ = live
    # The bytes the TypeScript client signs are events.signing's (keys sorted at every depth, non-ASCII as UTF-8)
    driver = Driver(built, url)
    body = {"kind": "mine", "ore": "stone", "note": "bjørn \u2028", "a": {"z": 1, "b": [2, "ü", {"y": None}]}}
    assert bytes.fromhex(driver("bytes", room="r-1", player="ann", command_id="r-1:ann:c-1", body=body,
                                seen=7)["hex"]) == command_bytes("r-1", "ann", "r-1:ann:c-1", body, 7)
    elsewhere = None
    try:
        with Client(url, token=auditor) as watcher:
            # Given ann creates a realm room (scheme 3, seat bots: its bot policy is version 2) and bob joins, each
            # with an Ed25519 key WebCrypto made in Node
            nonce = secrets.token_hex(32)
            ann = driver("create", ruleset="realm", player="ann", sign=True,
                         extra={"options": {"players": ["ann", "bob"]}, "nonce": nonce, "seat_bots": True})
            assert ann["ok"] and ann["room"].startswith("realm-") and ann["seen"] == 3, ann
            room = ann["room"]
            assert driver("join", room=room, player="bob", sign=True, nonce=secrets.token_hex(32))["ok"]
            # When bob mines (the room moves to 5 while ann's seat saw 3) and ann sends a command the rules refuse,
            # the client gets 409 version_moved, signs again over 5 and gets the rules' refusal there
            assert driver("command", room=room, player="bob", command=MINE)["version"] == 5
            refused = driver("command", room=room, player="ann", command=REFUSED_SMELT, command_id="smelt-1")
            assert (refused["status"], refused["code"]) == (422, "realm.not_enough_bronze"), refused
            assert driver("seen", room=room, player="ann")["seen"] == 5
            # and her mine and her nonce's reveal are signed and accepted
            assert driver("command", room=room, player="ann", command=MINE)["version"] == 6
            revealed = driver("reveal", room=room, player="ann", nonce=nonce)
            assert revealed["ok"] and [e["type"] for e in revealed["events"]] == ["room.nonce_revealed"], revealed
            # When ann takes her seat back elsewhere with her seat key and her key exported as the console does
            exported = driver("export_key", room=room, player="ann")["key"]
            assert len(base64.b64decode(exported)) == 48  # PKCS#8 DER of an Ed25519 key
            elsewhere = Driver(built, url)
            back = elsewhere("reclaim", room=room, player="ann", seat_key=ann["seat_key"], key=exported)
            assert back["ok"] and back["public_key"] == ann["public_key"] and back["seen"] == 7, back
            assert elsewhere("command", room=room, player="ann", command=MINE)["version"] == 8
            # Then an attacker holding ann's token cannot bend a signature her client made: another command id,
            # another version or another body is refused, nothing written; her own body as signed is accepted
            before = watcher.events(room)["latest_version"]
            signed = elsewhere("signed", room=room, player="ann", command=MINE, command_id="m-9", seen=8)["body"]
            token = {"Authorization": f"Bearer {back['token']}"}
            bent = [{**signed, "command_id": "m-10"}, {**signed, "seen_version": 7},
                    {**signed, "command": {"kind": "mine", "ore": "gold"}}]
            answers = [watcher.http.post(f"/rooms/{room}/commands", json=b, headers=token) for b in bent]
            assert [(a.status_code, a.json()["code"]) for a in answers] == [(422, "signature_invalid")] * 3
            assert watcher.events(room)["latest_version"] == before
            # (nothing kept under her id either: her body as signed is decided, not answered with a forged refusal)
            honest = watcher.http.post(f"/rooms/{room}/commands", json=signed, headers=token)
            assert honest.status_code == 200, honest.text
            # and bob leaves his seat to a bot and ann ends the room, both signed
            assert driver("hand_to_bot", room=room, player="bob")["how"] == "left"
            assert elsewhere("end", room=room, player="ann", reason="over")["ok"]
            report = watcher.verification(room)
            assert report["ok"] is True, report
            assert (report["dice_scheme"], report["signing_players"], report["unsigned_players"]) == (3, ["ann", "bob"], [])
            assert (report["signed_joins"], report["refusals_signed"]) == (["ann", "bob"], 1), report
            # and what ann's first client held (its checkpoints, the receipt of her refused smelt) verifies the room's
            # bundle, and proves a bundle that tells her refusal with another code wrong, naming the receipt
            driver("view", room=room, player="ann")  # her last read of the ended room: its answer's checkpoint is on the head
            held = driver("held", room=room, player="ann")
            [receipt] = held["receipts"]["receipts"]
            assert (receipt["command_id"], receipt["code"]) == (f"{room}:ann:smelt-1", "realm.not_enough_bronze")
            latest = watcher.room(room)["version"]
            bundle = watcher.request("GET", f"/rooms/{room}/dispute", params={"from": 1, "to": latest})
            checkpoints, keys = read_checkpoint_file(held["checkpoints"])
            receipts, _ = read_receipt_file(held["receipts"])
            assert len(checkpoints) >= 3 and keys is not None
            verdict = verify_bundle(bundle, checkpoints=checkpoints, keys=keys, receipts=receipts)
            assert verdict.status == "VERIFIED", verdict.text()
            [told] = [r for r in bundle["refusals"] if r["command"]["command_id"] == receipt["command_id"]]
            told["error"]["code"] = "realm.invented"
            verdict = verify_bundle(bundle, checkpoints=checkpoints, keys=keys, receipts=receipts)
            assert not verdict.ok and receipt_label(receipt) in verdict.text(), verdict.text()
    finally:
        driver.close()
        if elsewhere is not None:
            elsewhere.close()


@contextlib.contextmanager
def substituting_proxy(upstream: str, operators_key: str) -> Iterator[str]:
    """An operator in the way of the client: relays every request to ``upstream`` and answers each join with
    ``operators_key`` in place of the key its ``room.player_joined`` registered. Its URL."""

    class Relay(BaseHTTPRequestHandler):
        def relay(self) -> None:
            sent = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
            headers = {name: value for name, value in self.headers.items()
                       if name.lower() in ("authorization", "content-type", "accept")}
            answer = httpx.request(self.command, upstream + self.path, content=sent, headers=headers, timeout=15)
            payload = answer.content
            if self.path.endswith("/join") and answer.status_code < 300:
                body = answer.json()
                for event in body.get("events", []):
                    if isinstance(event.get("event"), dict) and "public_key" in event["event"]:
                        event["event"]["public_key"] = operators_key
                payload = json.dumps(body).encode()
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = relay

        def log_message(self, *args: Any) -> None:  # quiet: the test reads answers, not the relay's log
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@needs_node
def test_the_typescript_client_raises_a_join_answered_with_another_key(built: Path,
                                                                       live: tuple[str, str, Stack]) -> None:
    # Given alice's room with a seat for bob, and an operator in the way of bob's join who answers it with a key of
    # its own (signed by itself, valid in every other respect: only bob, who made his key, can tell)
    url, _, _ = live
    created = httpx.post(f"{url}/rooms", json={"ruleset": "realm", "player": "alice",
                                              "options": {"players": ["alice", "bob"]}}, timeout=15)
    assert created.status_code == 201, created.text
    with substituting_proxy(url, "ab" * 32) as proxy:
        driver = Driver(built, proxy)
        try:
            # When bob joins through the TypeScript client with a key it made
            substituted = driver("join", room=created.json()["room"], player="bob", sign=True)
        finally:
            driver.close()
    # and, for contrast, joins another room with nobody in the way
    other = httpx.post(f"{url}/rooms", json={"ruleset": "realm", "player": "alice",
                                            "options": {"players": ["alice", "bob"]}}, timeout=15).json()["room"]
    honest = Driver(built, url)
    try:
        joined = honest("join", room=other, player="bob", sign=True)
    finally:
        honest.close()
    # Then the client raises KeySubstituted to him instead of handing him a seat, and the honest join seats him
    assert (substituted["ok"], substituted["code"]) == (False, "key_substituted"), substituted
    assert joined["ok"] and joined["public_key"], joined
