"""What a player holds of each room: the signed checkpoints and refusal receipts its answers carried, exported as files.

Every answer about a room carries a ``checkpoint`` (room, version, head, signed by the deployment; docs/bundle-format.md
section 2) and a refusal by the rules a ``receipt`` (section 8). They are the player's evidence against a bundle the
operator hands out later: ``almanac verify-bundle BUNDLE --checkpoints C.json --receipts R.json`` reads exactly the
files ``checkpoint_file`` and ``receipt_file`` write (sections 2.1 and 8.2). The client keeps them as they came,
without checking signatures (it holds no trusted key set of its own: ``verify-bundle`` checks each against the key
set given to it, and names any that does not verify); an answer is never changed by keeping it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# As the console keeps them (services/gateway/console/app.js): the newest per room, a bound on a long-lived client.
CHECKPOINTS_KEPT = 5000
RECEIPTS_KEPT = 1000


class Held:
    """Checkpoints and refusal receipts per room, each kept once (a resend's answer carries the same one)."""

    def __init__(self, *, checkpoints_kept: int = CHECKPOINTS_KEPT, receipts_kept: int = RECEIPTS_KEPT) -> None:
        self.checkpoints_kept = checkpoints_kept
        self.receipts_kept = receipts_kept
        # room -> (version, head, kid) -> checkpoint; room -> (command_id, sig) -> receipt (insertion order kept)
        self._checkpoints: dict[str, dict[tuple[Any, Any, Any], dict[str, Any]]] = {}
        self._receipts: dict[str, dict[tuple[Any, Any], dict[str, Any]]] = {}

    def rooms(self) -> list[str]:
        return sorted(set(self._checkpoints) | set(self._receipts))

    def checkpoints(self, room: str) -> list[dict[str, Any]]:
        """The checkpoints held of ``room``, by version (two of one version with different heads both stay: proof)."""
        return sorted(self._checkpoints.get(room, {}).values(), key=lambda c: c["version"])

    def receipts(self, room: str) -> list[dict[str, Any]]:
        """The refusal receipts held of ``room``, in the order they came."""
        return list(self._receipts.get(room, {}).values())

    def keep(self, answer: Any) -> Any:
        """Keep what ``answer`` (an API answer, a live-feed message, a refusal's body) carries; ``answer`` itself."""
        if isinstance(answer, Mapping):
            self.keep_checkpoint(answer.get("checkpoint"))
            self.keep_receipt(answer.get("receipt"))
            if answer.get("format") == "almanac-checkpoints" and isinstance(answer.get("checkpoints"), list):
                for checkpoint in answer["checkpoints"]:  # GET /rooms/{room}/checkpoints: a file of them
                    self.keep_checkpoint(checkpoint)
        return answer

    def keep_checkpoint(self, checkpoint: Any) -> None:
        if not (isinstance(checkpoint, Mapping) and isinstance(checkpoint.get("room"), str)
                and type(checkpoint.get("version")) is int):
            return
        held = self._checkpoints.setdefault(checkpoint["room"], {})
        held.setdefault((checkpoint["version"], checkpoint.get("head"), checkpoint.get("kid")), dict(checkpoint))
        if len(held) > self.checkpoints_kept:  # drop the oldest versions
            for key in sorted(held, key=lambda k: k[0])[:len(held) - self.checkpoints_kept]:
                del held[key]

    def keep_receipt(self, receipt: Any) -> None:
        if not (isinstance(receipt, Mapping) and isinstance(receipt.get("room"), str)):
            return
        held = self._receipts.setdefault(receipt["room"], {})
        held.setdefault((receipt.get("command_id"), receipt.get("sig")), dict(receipt))
        while len(held) > self.receipts_kept:
            del held[next(iter(held))]

    def checkpoint_file(self, room: str, keys: Mapping | None = None) -> dict[str, Any]:
        """An ``almanac-checkpoints`` document of ``room`` (what ``verify-bundle --checkpoints`` reads), with the key
        set ``keys`` (the deployment's, as fetched) when given."""
        document: dict[str, Any] = {"format": "almanac-checkpoints", "format_version": 1}
        if keys is not None:
            document["keys"] = dict(keys)
        document["checkpoints"] = self.checkpoints(room)
        return document

    def receipt_file(self, room: str, keys: Mapping | None = None) -> dict[str, Any]:
        """An ``almanac-receipts`` document of ``room`` (what ``verify-bundle --receipts`` reads)."""
        document: dict[str, Any] = {"format": "almanac-receipts", "format_version": 1}
        if keys is not None:
            document["keys"] = dict(keys)
        document["receipts"] = self.receipts(room)
        return document

    def write(self, room: str, *, checkpoints: Path | str | None = None, receipts: Path | str | None = None,
              keys: Mapping | None = None) -> None:
        """Write ``room``'s checkpoint file and/or receipt file; each replaced whole (a reader never sees half)."""
        if checkpoints is not None:
            write_json(Path(checkpoints), self.checkpoint_file(room, keys))
        if receipts is not None:
            write_json(Path(receipts), self.receipt_file(room, keys))


def write_json(path: Path, document: Any) -> None:
    """``document`` as JSON at ``path``, through a temporary file renamed over it: a crash leaves the old file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(document, out, indent=1)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
