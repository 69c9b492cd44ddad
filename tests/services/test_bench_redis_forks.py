"""`bench e2e --overload`'s windows and Redis's AOF rewrite: rewritten once before the first window and held off until
the last ends, so that the rewrite (a fork, then a child on the stack's CPU) lands in no 2 s window by chance, and a
window in which Redis forked all the same says so (issue 28, item 19)."""

from __future__ import annotations

import time

from almanac.bench.e2e import RedisForks, judge_windows
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


def test_each_window_carries_its_processes_cpu_its_forks_and_its_aof_size_into_the_verdict():
    """Given three windows (capacity, overload, capacity) as the runner measures them, when they are judged, then
    each judged window keeps each process's CPU in cores, what Redis forked for in it and its AOF's size, so the
    printed line says which process took the stack's CPU and whether a rewrite fell in that window."""
    def window(kind_rate: int, cpu: float, forked: str) -> dict:
        return {"offered_per_s": kind_rate, "seconds": 2.0, "answers": [(200, 0.01)] * 100, "stack_cpu_s": cpu,
                "generator_cpu_s": 0.1, "others_cpu_s": 0.0, "elapsed_s": 2.0, "load_1m": 0.5,
                "process_cpu_s": {"gateway": cpu * 0.6, "redis": cpu * 0.4}, "redis_forks": forked, "aof_mb": 50.0}

    verdict = judge_windows([window(50, 1.0, ""), window(150, 1.0, "1 fork (AOF rewrite), the last 9.0 ms"),
                             window(50, 1.0, "")], deadline_s=1.0)
    overload = verdict["windows"][1]
    assert overload["process_cores"] == {"gateway": 0.3, "redis": 0.2}
    assert overload["redis_forks"].startswith("1 fork (AOF rewrite)") and verdict["windows"][0]["redis_forks"] == ""
    assert overload["aof_mb"] == 50.0
