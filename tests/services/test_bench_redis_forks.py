"""`bench e2e --overload`'s windows and Redis's AOF rewrite: rewritten once before the first window and held off until
the last ends, so that the rewrite (a fork, then a child on the stack's CPU) lands in no 2 s window by chance, and a
window in which Redis forked all the same says so (issue 28, item 19)."""

from __future__ import annotations

import time

from almanac.bench.e2e import RedisForks
from almanac.services import bootstrap
from almanac.services.embedded_redis import EmbeddedRedis


def test_the_windows_begin_on_a_fresh_aof_with_redis_own_rewrite_held_off_and_restored_after(tmp_path):
    """Given the stack's Redis with an AOF that has grown, when the benchmark prepares its windows, then the AOF has
    just been rewritten (one more rewrite, none running), Redis rewrites nothing by itself while the windows run
    (auto-aof-rewrite-percentage 0), and its setting is as it was once the windows end."""
    with EmbeddedRedis(tmp_path / "redis", persist=True) as server:
        client = bootstrap.tool_sync_client(server.url)
        try:
            client.mset({f"key:{number}": "x" * 200 for number in range(2_000)})
            forks = RedisForks(server.url)
            before = forks.read()
            forks.rewrite_before()
            during = forks.read()
            assert during["aof_rewrites"] == before["aof_rewrites"] + 1 and not during["rewriting"]
            assert "MB ->" in forks.rewritten and "held off" in forks.rewritten
            assert client.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"] == "0"
            forks.close()
            assert client.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"] == "100"
        finally:
            client.close()


def test_a_window_in_which_redis_forked_says_so_and_a_quiet_one_says_nothing(tmp_path):
    """Given readings of Redis at a window's two ends, when Redis forked for an AOF rewrite between them, then the
    window names the fork, its kind and how long the fork stopped Redis; when it did not, nothing; and without a
    Redis to read (a stack started elsewhere), nothing either."""
    with EmbeddedRedis(tmp_path / "redis", persist=True) as server:
        forks = RedisForks(server.url)
        try:
            start = forks.read()
            assert RedisForks.between(start, forks.read()) == ""
            forks.client.bgrewriteaof()
            while forks.read()["rewriting"]:
                time.sleep(0.01)
            said = RedisForks.between(start, forks.read())
            assert said.startswith("1 fork (AOF rewrite), the last ") and said.endswith(" ms")
        finally:
            forks.close()
    assert RedisForks(None).read() == {} and RedisForks.between({}, {}) == ""
