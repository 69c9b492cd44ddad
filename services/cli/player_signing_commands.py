"""`almanac player-key` and `almanac sign`: a player's Ed25519 key and a signed command body (docs/dice.md)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from almanac.events.signing import command_bytes, join_bytes
from almanac.services.cli import app
from almanac.services.cli.common import fail

KeyFile = Annotated[Path, typer.Option("--key", help="The player's key file (written by `almanac player-key`).")]


def _public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


@app.command("player-key")
def player_key(
    file: Annotated[Path, typer.Argument(help="Where to write the new private key (32 bytes hex; mode 0600).")],
) -> None:
    """Make a player's Ed25519 key: send `public_key` (printed) with your join, then sign with `almanac sign`."""
    if file.exists():
        raise fail(f"{file} exists; a key is never overwritten")
    key = Ed25519PrivateKey.generate()
    secret = key.private_bytes_raw().hex()
    descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(secret + "\n")
    print(json.dumps({"public_key": _public_hex(key), "key_file": str(file)}))


def _load(path: Path) -> Ed25519PrivateKey:
    try:
        return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(path.read_text().strip()))
    except OSError as error:
        raise fail(f"cannot read {path}: {error.strerror}") from None
    except ValueError:
        raise fail(f"{path} is not a key written by `almanac player-key` (32 bytes as hex)") from None


@app.command("sign")
def sign_command(
    room: Annotated[str, typer.Option(help="The room id.")],
    player: Annotated[str, typer.Option(help="Your player id (the seat that registered the key).")],
    key: KeyFile,
    command: Annotated[str | None, typer.Argument(help='The command as JSON, e.g. \'{"kind": "roll", "dice": 3}\' '
                                                  "(none with --join).")] = None,
    command_id: Annotated[str | None, typer.Option("--command-id", help="Your id for the command (keep it for "
                                                   "resends: a resend with the same id keeps its roll).")] = None,
    join: Annotated[bool, typer.Option("--join", help="Sign your join instead: print the body for POST "
                                       "/rooms/{room}/join registering the key (for POST /rooms, send its "
                                       "`signature` as `join_signature`).")] = False,
    nonce: Annotated[str | None, typer.Option(help="With --join: your secret nonce (64 hex; default: a fresh one) "
                                              "whose commitment the join signs.")] = None,
    seen_version: Annotated[int | None, typer.Option("--seen-version", min=0, help="The room version you saw (your "
                                                     "latest answer's or checkpoint's `version`): the signature covers "
                                                     "it, so your refusal stands at that version only. On 409 "
                                                     "`version_moved` sign again with its `allowed` version and "
                                                     "the same --command-id.")] = None,
) -> None:
    """Print the body for POST /rooms/{room}/commands with the command signed by your key over the version you saw
    (the v2 form, events.signing), or with --join the join body signed by the key it registers (docs/dice.md)."""
    signer = _load(key)
    if join:
        if command is not None:
            raise fail("--join signs the join itself: give no command")
        try:
            secret = bytes.fromhex(nonce) if nonce is not None else os.urandom(32)
        except ValueError:
            secret = b""
        if len(secret) != 32:
            raise fail("--nonce is 32 bytes as 64 hex digits")
        commitment = hashlib.sha256(secret).hexdigest()
        public_key = _public_hex(signer)
        signature = signer.sign(join_bytes(room, player, public_key, commitment)).hex()
        print(json.dumps({"player": player, "public_key": public_key, "nonce": secret.hex(),
                          "nonce_commitment": commitment, "signature": signature}))
        return
    if command is None or command_id is None or seen_version is None:
        raise fail("give the command (JSON), --command-id and --seen-version, or --join")
    try:
        body = json.loads(command)
    except ValueError as error:
        raise fail(f"the command is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise fail("the command is a JSON object with a kind")
    recorded_id = f"{room}:{player}:{command_id}"  # the id the engine records (services.gateway.gateway)
    signature = signer.sign(command_bytes(room, player, recorded_id, body, seen_version)).hex()
    print(json.dumps({"command": body, "command_id": command_id, "seen_version": seen_version,
                      "signature": signature}))
