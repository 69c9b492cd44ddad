"""One name per Redis key: every key name is spelled in storage/keys.py, and nowhere else.

A key spelled in two modules is a key with two names: a rename in one leaves the other reading a key nobody
writes (the bots' shard hashes, delays, reservations, removal marks and wake stream were spelled in
services/bots.py beside ``bot_seats_key`` in storage/keys.py, and the rate limits' prefix in the gateway as a
literal ``alm:`` that ignored the deployment's key prefix). The scan finds a key name by its shape: an f-string
that starts with a key prefix (``f"{keys.prefix}:..."``) or a literal that starts with the default one (``"alm:"``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from allow_lists import stale, unexcused

from almanac.storage.keys import DEFAULT_PREFIX

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "projections", "storage", "bench", "client", "events", "games", "examples")
THE_MODULE = "storage/keys.py"
BUILT_COPIES = {"build", "dist", "node_modules"}  # copies a build leaves in the tree (see test_composition_root)

# Each exception and why it is not a key name of ours to define there.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "services/gateway/asyncapi.py": (
        {"'alm:{shard}:commands'", "'alm:{shard}:feed'", "'alm:reply:{submitter}'", "'alm:outcome:{command_id}'",
         "'alm:{shard}:dead'", "'alm:{shard}:room:{room}:events'"},
        "the AsyncAPI document's channel addresses, templates for readers (tests/gateway/test_asyncapi_addresses.py "
        "fills each and compares it with storage/keys.py's name)"),
    "bench/engine.py": ({"f'{prefix}:raw:{stream}'", "f'{prefix}:*'"},
                        "the benchmark's own baseline streams under its scratch prefix, and the pattern that clears them"),
    "bench/store.py": ({"f'{prefix}:raw:{round_number}'", "f'{prefix}:packed:{round_number}'", "f'{prefix}:*'"},
                       "the benchmark's own baseline streams under its scratch prefix, and the pattern that clears them"),
    "bench/forensics_tools.py": ({"f'{prefix}:*'"}, "the pattern that clears the benchmark's scratch prefix"),
}


def key_names(path: Path) -> list[tuple[int, str]]:
    """(line, source) of each key name a file spells: ``f"{...prefix}:..."`` or a literal ``"alm:..."``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.JoinedStr) and len(node.values) >= 2:
            head, rest = node.values[0], node.values[1]
            if (isinstance(head, ast.FormattedValue) and ast.unparse(head.value).endswith("prefix")
                    and isinstance(rest, ast.Constant) and str(rest.value).startswith(":")):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(
                f"{DEFAULT_PREFIX}:"):
            found.append((node.lineno, repr(node.value)))
    return sorted(found)


def _scanned() -> dict[str, list[tuple[int, str]]]:
    return {str(path.relative_to(ROOT)): key_names(path)
            for folder in SCANNED for path in sorted((ROOT / folder).rglob("*.py"))
            if str(path.relative_to(ROOT)) != THE_MODULE and not BUILT_COPIES & set(path.relative_to(ROOT).parts)}


def test_no_module_but_storage_keys_spells_a_redis_key_name():
    """Given every module of the product and the benchmarks, when the key names each spells are listed, then none
    is found outside storage/keys.py that the allow-list does not excuse."""
    assert unexcused(_scanned(), ALLOWED) == {}


def test_the_allow_list_names_only_what_is_there():
    assert stale(_scanned(), ALLOWED) == {}


def test_the_scan_sees_a_key_spelled_by_hand(tmp_path):
    """Given a module that spells a shard key, a global key and a literal key, when it is scanned, then each is found
    (and a message that merely mentions a prefix is not)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def own(keys, shard, tag):\n"
                     "    a = f'{keys.prefix}:{tag}:bots'\n"
                     "    b = f'{keys.prefix}:{{bots}}:wake'\n"
                     "    c = 'alm:ratelimit'\n"
                     "    d = f'the prefix is {keys.prefix}'\n"
                     "    return a, b, c, d\n")
    assert [line for line, _ in key_names(probe)] == [2, 3, 4]
