"""Secrets kept in the data directory: generated once (32 random bytes, hex, mode 0600) and read back after."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path


def file_secret(data_dir: str, name: str, setting: str) -> str:
    """The hex secret kept in ``data_dir/name``, generated the first time; ``setting`` names the setting that
    would replace it (said when the file stays empty). O_EXCL: two processes racing both end with the
    winner's."""
    path = Path(data_dir) / name
    try:
        existing = path.read_text().strip()
        if existing:
            return existing
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_when_written(path, setting)
    fresh = secrets.token_hex(32)
    with os.fdopen(fd, "w") as handle:
        handle.write(fresh + "\n")
    return fresh


def _read_when_written(path: Path, setting: str, attempts: int = 50) -> str:
    # The winner of the O_EXCL race may not have written yet.
    for _ in range(attempts):
        text = path.read_text().strip()
        if text:
            return text
        time.sleep(0.01)
    raise RuntimeError(f"{path} stays empty; delete it or set {setting}")
