"""Scans held to an allow-list (each entry with its reason): what a scan found that the list does not excuse, and
entries that excuse what is no longer there (a stale entry hides the next real one)."""

from __future__ import annotations

from collections.abc import Mapping


def unexcused(scanned: Mapping[str, list[tuple[int, str]]],
              allowed: Mapping[str, tuple[set[str], str]]) -> dict[str, list[str]]:
    """Per file, each ``line what`` the scan found that its allow-list entry does not name."""
    found = {path: [f"{line} {what}" for line, what in hits if what not in allowed.get(path, (set(), ""))[0]]
             for path, hits in scanned.items()}
    return {path: hits for path, hits in found.items() if hits}


def stale(scanned: Mapping[str, list[tuple[int, str]]],
          allowed: Mapping[str, tuple[set[str], str]]) -> dict[str, list[str]]:
    """Per allow-list entry, what it excuses that the scan no longer finds in its file."""
    left = {path: sorted(whats - {what for _, what in scanned.get(path, [])}) for path, (whats, _) in allowed.items()}
    return {path: whats for path, whats in left.items() if whats}
