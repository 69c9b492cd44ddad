"""Ids the gateway makes on its hot path (command ids, request ids): unguessable, without a system call each."""

from __future__ import annotations

import os
import secrets
import threading

BLOCK = 256  # ids drawn from the kernel's random source at once


class UnguessableIds:
    """Hex ids nobody can predict: slices of random bytes drawn from the kernel ``BLOCK`` ids at a time (again in
    a forked child). secrets.token_hex reads the kernel's random source on every call: a system call per command
    on the hot path. A keyed hash of a counter (BLAKE2b, its earlier form) avoided that at 2.4 µs an id; a slice
    of a block costs a fifth of it, and past capacity every refusal names its request with one (issue 28, item 19).
    The lock keeps two threads from taking the same slice (the heavy reads run a loop of their own)."""

    def __init__(self, hex_digits: int) -> None:
        self._digits = hex_digits - hex_digits % 2  # whole bytes, as before
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._lock = threading.Lock()
        self._pool = ""  # a block's hex digits: an id is a slice of a string (no bytes.hex per id)
        self._at = 0

    def __call__(self) -> str:
        digits = self._digits
        with self._lock:
            at = self._at
            if at >= len(self._pool):
                self._pool = secrets.token_hex(digits // 2 * BLOCK)
                at = 0
            self._at = at + digits
            pool = self._pool
        return pool[at:at + digits]
