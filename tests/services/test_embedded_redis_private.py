"""The embedded Redis is its user's only: another user of the host can neither use its port (it asks for a
password) nor read its data directory (0700, files 0600), while the project's own processes, given its URL, work;
a restart over the same data directory keeps the password and the data. A real redis-server, no mocks."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from almanac.services.embedded_redis import PASSWORD_FILE, EmbeddedRedis, running_server_url
from almanac.services.redis_client import redacted_url

SEED_KEY = "alm:{s02}:room:r1:seed"

# What the other user runs (the host's python, no project package): GET the seed on the port, read every file.
STRANGER = r"""
import json, os, socket, sys
data, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen = {"walk_errors": [], "read": []}
with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
    sock.sendall(f"*2\r\n$3\r\nGET\r\n${len(key)}\r\n{key}\r\n".encode())
    seen["get"] = sock.recv(4096).decode(errors="replace")
for root, _, files in os.walk(data, onerror=lambda error: seen["walk_errors"].append(type(error).__name__)):
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as handle:
                handle.read()
            seen["read"].append(os.path.relpath(os.path.join(root, name), data))
        except OSError:
            pass
print(json.dumps(seen))
"""


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A folder every user may enter (as a home folder often is), for the data directory to live in."""
    parent = Path(tempfile.mkdtemp(prefix="almanac-private-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def modes(data_dir: Path) -> dict[str, int]:
    """Every path under ``data_dir`` (itself as ".") and its permission bits."""
    found = {".": stat.S_IMODE(data_dir.stat().st_mode)}
    for path in data_dir.rglob("*"):
        found[str(path.relative_to(data_dir))] = stat.S_IMODE(path.stat().st_mode)
    return found


def test_a_client_without_the_password_is_refused_and_the_data_directory_is_closed(open_parent: Path) -> None:
    # Given a data directory an older run left open (0755), and an embedded Redis started on it holding a seed
    data_dir = open_parent / ".almanac"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    with EmbeddedRedis(data_dir, persist=True) as server:
        owner = redis.Redis.from_url(server.url)
        owner.set(SEED_KEY, "the-secret-seed")
        owner.close()

        # When a client connects to its port without the password (or with a wrong one), then every command is
        # refused and no key is read
        for password in (None, "guessed"):
            stranger = redis.Redis(host="127.0.0.1", port=server.port, password=password)
            for command in (("GET", SEED_KEY), ("KEYS", "*"), ("DBSIZE",), ("CONFIG", "GET", "requirepass")):
                with pytest.raises(redis.exceptions.AuthenticationError):
                    stranger.execute_command(*command)
            stranger.close()

        # Then the data directory is 0700, the password file and the marker 0600, and nothing in it (AOF, log)
        # is open to the group or others
        found = modes(data_dir)
        assert found["."] == 0o700
        assert found[PASSWORD_FILE] == 0o600 and found["redis.running"] == 0o600
        assert {name: oct(mode) for name, mode in found.items() if mode & 0o077} == {}
        password = (data_dir / PASSWORD_FILE).read_text().strip()
        assert len(password) >= 32 and server.password == password

        # and the URL handed out (and the marker other commands find) carries the password; what is shown does not
        assert server.url == f"redis://:{password}@127.0.0.1:{server.port}/0"
        assert running_server_url(data_dir) == server.url
        assert password not in redacted_url(server.url) and str(server.port) in redacted_url(server.url)
        # nor does the server's command line, which every user of the host may list
        assert password not in Path(f"/proc/{server.process.pid}/cmdline").read_text()


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="acting as another user takes root (and the host's /usr/bin/python3)")
def test_another_unix_user_reads_neither_the_seed_nor_the_files(open_parent: Path) -> None:
    # Given an embedded Redis holding a room's seed, in a data directory whose parent everyone may enter
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody on this host")
    data_dir = open_parent / ".almanac"
    with EmbeddedRedis(data_dir, persist=True) as server:
        owner = redis.Redis.from_url(server.url)
        owner.set(SEED_KEY, "the-secret-seed")
        owner.close()
        # When the user nobody asks its port for the seed and reads what it can of the data directory
        ran = subprocess.run(["/usr/bin/python3", "-c", STRANGER, str(data_dir), str(server.port), SEED_KEY],
                             user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                             capture_output=True, text=True, timeout=30, cwd="/")
        assert ran.returncode == 0, ran.stderr
        seen = json.loads(ran.stdout)
    # Then Redis refuses it, and it reads no file (it cannot even enter the directory)
    assert seen["get"].startswith("-NOAUTH"), seen
    assert "the-secret-seed" not in seen["get"]
    assert seen["read"] == [] and seen["walk_errors"] == ["PermissionError"], seen


def test_a_restart_on_the_same_data_directory_keeps_the_password_and_the_data(tmp_path: Path) -> None:
    # Given an embedded Redis that wrote a key (AOF) and stopped
    with EmbeddedRedis(tmp_path / "data", persist=True) as first:
        client = redis.Redis.from_url(first.url)
        client.set(SEED_KEY, "kept")
        client.close()
        first_url, first_password = first.url, first.password
    # When another one starts on the same data directory and port
    port = int(first_url.rsplit(":", 1)[1].split("/")[0])
    with EmbeddedRedis(tmp_path / "data", port=port, persist=True) as second:
        # Then it asks for the same password (a process holding the old URL goes on working) and has the data
        assert second.password == first_password and second.url == first_url
        client = redis.Redis.from_url(first_url)
        assert client.get(SEED_KEY) == b"kept"
        client.close()
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=port).get(SEED_KEY)
