"""The dice source: every random outcome derived from the room's secret seed, a salt and the event version.

Construction (documented so anyone can re-check a roll once the seed is revealed):

    block(i) = HMAC-SHA256(key = secret_seed, message = f"{salt}|{version}|{i}".encode())

The blocks i = 0, 1, 2, ... are concatenated into a byte stream that is read 8 bytes at a time
as big-endian unsigned 64-bit integers. ``randbelow(n)`` takes the next integer ``x`` and rejects
it while ``x >= 2**64 - (2**64 % n)`` (so every outcome is exactly equally likely), then returns
``x % n``. A die face is ``randbelow(6)``; a shuffle is Fisher-Yates from the last position down,
drawing ``randbelow(i + 1)``. The salt is the room id, or ``"challenge"`` for rooms created from a
public challenge seed, so that every room of a challenge deals the same cards.

Deciding the same command at the same version therefore always gives the same dice. The dice
only ever feed `decide`; every outcome is written into the event it decides, so replay never draws.

Dice schemes (recorded per room in ``room.created.dice_scheme``; docs/dice.md has the threat model):

- scheme 1 (every room created before schemes existed, and every challenge room): the HMAC key
  above is the server's secret seed itself.
- scheme 2 (player entropy): the key is ``dice_key(seed, pairs)``, where ``pairs`` are the
  (player, nonce) of every player seated before the decision, sorted by player:

      key = HMAC-SHA256(key = secret_seed,
                        message = b"almanac-dice-v2" + b"".join(b"|" + player + b"=" + nonce_hex))

  (player ids cannot contain ``|`` or ``=``; nonces are 32 bytes, in lowercase hex). The key is a
  pure function of (seed, nonces), so a fork passes its own seed and the same construction applies.
- scheme 3 (command-bound, every new secret-seed room): each command draws from its own key,
  ``command_key(seed, player, nonce, command_id, body)``, with version 0: see ``command_key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")

_TWO_64 = 1 << 64


def seed_commitment(secret_seed: bytes) -> str:
    """The public commitment to a secret seed, recorded when the room is created."""
    return hashlib.sha256(secret_seed).hexdigest()


# The dice construction every room uses unless it recorded another (rooms created before schemes: 1).
SERVER_SEED_ONLY = 1
PLAYER_ENTROPY = 2
# Scheme 3: every roll is bound to the command that causes it (its id and content, not its version) and to
# the nonce its player committed at join; players may register a key and sign their commands (docs/dice.md).
COMMAND_BOUND = 3
DICE_SCHEMES = (SERVER_SEED_ONLY, PLAYER_ENTROPY, COMMAND_BOUND)
# The schemes whose players commit to nonces at join (the server holds them; the end reveals them).
NONCE_SCHEMES = frozenset({PLAYER_ENTROPY, COMMAND_BOUND})
NONCE_BYTES = 32


def nonce_commitment(nonce: bytes) -> str:
    """The public commitment to a player's secret nonce, recorded in the player's join."""
    return hashlib.sha256(nonce).hexdigest()


def nonces_by_commitment(nonces_hex: Iterable[str]) -> dict[str, bytes]:
    """Revealed nonces (hex, e.g. ``room.ended.revealed_nonces.values()``) as ``step(nonces=...)`` takes them.

    Check each against its player's join commitment first (``verify`` does): this keys every nonce by
    its own hash, so a forged nonce simply matches no commitment.
    """
    return {nonce_commitment(nonce): nonce for nonce in map(bytes.fromhex, nonces_hex)}


def server_nonce(secret_seed: bytes, player: str) -> bytes:
    """The nonce the server uses for a player who sent none: derived from the seed, so it is fixed
    before anyone joined, secret until the seed is revealed, and checkable by anyone afterwards."""
    return hmac.new(secret_seed, b"almanac-server-nonce|" + player.encode(), hashlib.sha256).digest()


@lru_cache(maxsize=4096)
def dice_key(secret_seed: bytes, pairs: tuple[tuple[str, bytes], ...]) -> bytes:
    """Scheme 2's HMAC key from the server seed and the seated players' (player, nonce) pairs.

    Cached: a room's key changes only when a player joins, so it is derived once per join, not per
    roll. ``pairs`` are sorted here, so the order seats were taken does not matter.
    """
    message = b"almanac-dice-v2" + b"".join(
        b"|" + player.encode() + b"=" + nonce.hex().encode() for player, nonce in sorted(pairs)
    )
    return hmac.new(secret_seed, message, hashlib.sha256).digest()


def canonical_json(value: object) -> bytes:
    """The one byte form of a JSON value that is hashed or signed: keys sorted, no spaces, UTF-8, no NaN.

    ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()``; JavaScript
    clients produce the same bytes by sorting keys recursively before ``JSON.stringify`` (integers and
    strings only: the command schemas carry no floats).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def command_key(secret_seed: bytes, player: str, nonce: bytes, command_id: str, body: object) -> bytes:
    """Scheme 3's HMAC key of one command's dice::

        key = HMAC-SHA256(key = secret_seed,
                          message = b"almanac-dice-v3|" + player + b"=" + hex(nonce) + b"|" + command_id
                                    + b"|" + hex(sha256(canonical_json(body))))

    ``nonce`` is the commanding player's committed nonce (``server_nonce`` for a player without one: the
    create, a join, an unseated sender). The command's dice are ``Dice(key, room, 0)``: no version enters, so
    where the operator puts the command in the log changes none of its draws, and a resend with the same id
    and body draws the same.
    """
    digest = hashlib.sha256(canonical_json(body)).hexdigest()
    message = b"|".join((b"almanac-dice-v3", player.encode() + b"=" + nonce.hex().encode(), command_id.encode(),
                         digest.encode()))
    return hmac.new(secret_seed, message, hashlib.sha256).digest()


class Dice:
    """A deterministic stream of random draws for one (seed, salt, version)."""

    __slots__ = ("_key", "_prefix", "_block", "_buffer", "_offset", "draws")

    def __init__(self, secret_seed: bytes, salt: str, version: int) -> None:
        self._key = secret_seed
        self._prefix = f"{salt}|{version}|".encode()
        self._block = 0
        self._buffer = b""
        self._offset = 0
        self.draws = 0

    def _next_u64(self) -> int:
        if self._offset + 8 > len(self._buffer):
            self._buffer = hmac.new(self._key, self._prefix + str(self._block).encode(), hashlib.sha256).digest()
            self._block += 1
            self._offset = 0
        value = int.from_bytes(self._buffer[self._offset : self._offset + 8], "big")
        self._offset += 8
        self.draws += 1
        return value

    def randbelow(self, n: int) -> int:
        """A uniform integer in ``0 .. n-1``."""
        if n <= 0:
            raise ValueError("randbelow needs a positive bound")
        limit = _TWO_64 - (_TWO_64 % n)
        while True:
            value = self._next_u64()
            if value < limit:
                return value % n

    def randint(self, low: int, high: int) -> int:
        """A uniform integer in ``low .. high`` inclusive."""
        return low + self.randbelow(high - low + 1)

    def d6(self, count: int = 1) -> tuple[int, ...]:
        """``count`` six-sided dice, faces 1..6."""
        return tuple(self.randbelow(6) + 1 for _ in range(count))

    def choice(self, items: Sequence[T]) -> T:
        return items[self.randbelow(len(items))]

    def shuffle(self, items: Sequence[T]) -> tuple[T, ...]:
        """A Fisher-Yates shuffle; returns a new tuple."""
        result = list(items)
        for i in range(len(result) - 1, 0, -1):
            j = self.randbelow(i + 1)
            result[i], result[j] = result[j], result[i]
        return tuple(result)


class ScriptedDice(Dice):
    """Dice that return prepared values, for tests and worked examples: each draw pops the next value.

    A value drawn through ``randbelow(n)`` must be below ``n``; running out of values is an error,
    so a test cannot silently depend on draws it did not script.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Sequence[int]) -> None:
        super().__init__(b"scripted", "scripted", 0)
        self._values = list(values)

    def randbelow(self, n: int) -> int:
        if not self._values:
            raise AssertionError("scripted dice ran out of values")
        value = self._values.pop(0)
        if not 0 <= value < n:
            raise AssertionError(f"scripted value {value} is not below {n}")
        self.draws += 1
        return value

    @property
    def remaining(self) -> int:
        return len(self._values)
