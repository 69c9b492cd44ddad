"""Ids the gateway makes on its hot path (command ids, request ids): unguessable, without a system call each."""

from __future__ import annotations

import hashlib
import itertools
import os
import secrets


class UnguessableIds:
    """Hex ids nobody can predict: a keyed hash (BLAKE2b, a PRF) of a counter under a random key drawn once
    per process (again in a forked child). secrets.token_hex reads the kernel's random source on every
    call: a system call per command on the hot path."""

    def __init__(self, hex_digits: int) -> None:
        self._digest_size = hex_digits // 2
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._key = secrets.token_bytes(32)
        self._counter = itertools.count()

    def __call__(self) -> str:
        return hashlib.blake2b(next(self._counter).to_bytes(8, "big"), key=self._key,
                               digest_size=self._digest_size).hexdigest()
