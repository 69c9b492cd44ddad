"""Rule errors: a refusal with a stable machine-readable code and a message a person can act on."""

from __future__ import annotations

from typing import Any


class RuleError(Exception):
    """A command was refused by the rules; nothing changes.

    `code` is stable and machine-readable (``"sectors.not_enough_wood"``), `message` says what was
    wrong and what is allowed, `field` names the command field at fault when there is one and
    `allowed` optionally carries the allowed values or range.
    """

    def __init__(self, code: str, message: str, field: str | None = None, allowed: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.allowed = allowed

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            result["field"] = self.field
        if self.allowed is not None:
            result["allowed"] = self.allowed
        return result

    def __repr__(self) -> str:
        return f"RuleError({self.code!r}, {self.message!r}, field={self.field!r})"


class InvalidCommand(RuleError):
    """A command (or its creation options) does not fit its schema: refused at the decoding boundary.

    Unlike a rule refusal it is never recorded: no event, no refusal record, no stored outcome; the
    same bytes are refused the same way every time, so there is nothing to remember.
    """


class SecretMissing(InvalidCommand):
    """A secret the dice need (the room's seed, a player's nonce) is not in the store, so nothing of the room can be
    decided now: a room mid-import (its secrets are written after its events) or one that lost them. Never recorded:
    a refusal the log itself cannot decide again (the secrets are back, or revealed, by the time anyone verifies)
    would fail ``verify`` for ever."""


class UnusableSnapshotError(Exception):
    """A stored snapshot no longer decodes (its state format changed); replay from the log instead."""


class CorruptEventError(Exception):
    """A stored entry could not be decoded or failed its hash check; names the room and version."""

    def __init__(self, room: str, version: int, reason: str) -> None:
        super().__init__(f"room {room!r} version {version}: {reason}")
        self.room = room
        self.version = version
        self.reason = reason


class RulesNotInstalledError(RuleError):
    """A room was created under a rule-set version this node does not have: it must not be folded at all.

    Folding a room with other rules than it was created with would silently change its past, so every
    reader refuses instead: the engine answers its commands with this error (and stores nothing), the
    gateway answers 409, the projector skips the room with a log line, ``verify`` reports it.
    """

    def __init__(self, ref: str, installed: list[str]) -> None:
        known = ", ".join(installed) or "none"
        super().__init__(
            "ruleset_not_installed",
            f"{ref} is not installed on this node (installed versions of it: {known})",
            field="ruleset",
            allowed=installed,
        )
        self.ref = ref
