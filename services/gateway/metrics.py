"""The gateway's Prometheus metrics through prometheus_client: one registry per gateway (process metrics
included), counters and real latency histograms, rendered in the Prometheus text format."""

from __future__ import annotations

import gc
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter as _Counter,
    Gauge as _Gauge,
    GCCollector,
    Histogram as _Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import generate_latest

from almanac.services.heap import PAUSE_BUCKETS_S, pauses

# The command route's template, whose answers the public counts keep apart from the rules' decisions.
COMMAND_ROUTE = "/rooms/{room}/commands"

# Commands answer in milliseconds; the finest buckets are what tell a p50 of 2 ms from one of 5 ms.
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5,
                     1.0, 2.5, 5.0, 10.0)


class _Labelled:
    """A labelled metric's children kept by their labels: prometheus_client's ``labels()`` validates, sorts and
    locks on every call (a quarter of the gateway's metric calls per command); label values are bounded
    (route templates, statuses, rule-sets, error codes), so the children are few."""

    def __init__(self, metric: _Counter | _Histogram) -> None:
        self._metric = metric
        self._children: dict[tuple[tuple[str, str], ...], object] = {}

    def child(self, **labels: str):  # noqa: ANN201 - prometheus_client's child of the metric
        """The child for ``labels``, for a caller that keeps it (``GatewayMetrics``' hot label sets)."""
        return self._child(labels)

    def _child(self, labels: dict[str, str]):  # noqa: ANN202 - prometheus_client's child of the metric
        key = tuple(labels.items())
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._metric.labels(**labels)
        return child


class Counter(_Labelled):
    """A labelled counter: ``inc(amount, **labels)`` with the label names declared up front."""

    def __init__(self, registry: CollectorRegistry, name: str, help_text: str, labels: tuple[str, ...]) -> None:
        super().__init__(_Counter(name, help_text, labels, registry=registry))

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._child(labels).inc(amount)


class Histogram(_Labelled):
    """A labelled histogram: ``observe(seconds, **labels)``."""

    def __init__(self, registry: CollectorRegistry, name: str, help_text: str, labels: tuple[str, ...],
                 buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        super().__init__(_Histogram(name, help_text, labels, registry=registry, buckets=buckets))

    def observe(self, value: float, **labels: str) -> None:
        self._child(labels).observe(value)


class CollectorPauseHistogram:
    """``almanac_gc_pause_seconds``: how long each cyclic garbage collection stopped this process, by
    generation (prometheus_client's GCCollector counts collections, not their length). A pause holds every
    command in flight: it is where a latency tail with no slow request in it comes from. And
    ``almanac_gc_frozen_objects``: the start-up heap left out of the collections (services.heap)."""

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        counted = pauses()
        family = HistogramMetricFamily("almanac_gc_pause_seconds",
                                       "Cyclic garbage collections of this process by generation, by pause length.",
                                       labels=("generation",))
        bounds = [repr(bound) for bound in PAUSE_BUCKETS_S] + ["+Inf"]
        for generation, seconds in counted.seconds.items():
            family.add_metric([str(generation)], list(zip(bounds, counted.cumulative((generation,)), strict=True)),
                              seconds)
        yield family
        yield GaugeMetricFamily("almanac_gc_frozen_objects", "Objects left out of every collection (the start-up heap).",
                                value=gc.get_freeze_count())


class _CountedBy:
    """A counter whose value is read at each scrape from a count kept elsewhere (a plain integer where it is
    counted: the heavy reads' worker and loop never lock for it)."""

    def __init__(self, name: str, help_text: str, value: Callable[[], int]) -> None:
        self.name, self.help_text, self.value = name, help_text, value

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        yield CounterMetricFamily(self.name, self.help_text, value=self.value())


class GatewayMetrics:
    """Everything one gateway counts, in its own registry (two gateways in one process never mix)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)  # CPU seconds, RSS, open files, GC: the process's own cost
        pauses()  # counted from now on
        self.registry.register(CollectorPauseHistogram())
        self.requests = Counter(self.registry, "almanac_http_requests_total",
                                "HTTP requests by route template and status.", ("method", "route", "status"))
        self.commands = Counter(
            self.registry, "almanac_commands_total",
            "Commands by outcome: accepted (by the rules: each moves its room's version), conflict, timeout, "
            "invalid (refused before the engine), overloaded. Refused by the rules: auditors only.",
            ("outcome", "ruleset"),
        )
        # That the rules refused a command, and why, tells a player's hidden state (a refused ``smelt`` on a
        # quiet server: a rival's bronze): public figures that move on a refusal while no room's version does
        # tell it as surely as its code (issue 28). So every count and timing of a refusal lives in a registry
        # of its own that /metrics renders for auditors only: the public counts only what everyone sees happen.
        self.audit_registry = CollectorRegistry()
        self.decisions = Counter(self.audit_registry, "almanac_command_decisions_total",
                                 "Commands the rules decided, accepted or rejected (auditors only).",
                                 ("outcome", "ruleset"))
        self.rejects = Counter(self.audit_registry, "almanac_command_rejects_total",
                               "Commands refused by the rules, by error code (auditors only).", ("code", "ruleset"))
        self.refused_latency = Histogram(self.audit_registry, "almanac_command_refused_latency_seconds",
                                         "Round trip of commands the rules refused (auditors only).", ("ruleset",))
        self.refused_requests = Counter(
            self.audit_registry, "almanac_http_refused_requests_total",
            "Requests to the command route answered 422: refused by the rules or at the input check (auditors "
            "only; the public count has the route's other answers).", ("method", "route", "status"))
        self.refused_request_latency = Histogram(
            self.audit_registry, "almanac_http_refused_request_latency_seconds",
            "Latency of the command route's 422 answers (auditors only).", ("route",))
        self.conflicts = Counter(self.registry, "almanac_command_conflicts_total",
                                 "Commands that ended in an unresolved version conflict.", ("ruleset",))
        self.command_latency = Histogram(self.registry, "almanac_command_latency_seconds",
                                         "Command round trip in the gateway, submit to outcome, of every command "
                                         "but those the rules refused (auditors: the refused latency).",
                                         ("ruleset",))
        self.request_latency = Histogram(self.registry, "almanac_http_request_latency_seconds",
                                         "HTTP request latency by route.", ("route",))
        # The children every accepted command and every answered request update, by their label values: five
        # label lookups per command (a dict and a tuple built each) were a third of its ~8 us of metrics.
        self._accepted: dict[str, tuple] = {}
        self._answered: dict[tuple[str, str, int], tuple] = {}
        self.open_websockets = 0
        self.shed_pending = 0  # the guard's refusals not yet folded into the counters (``shed``)
        websockets = _Gauge("almanac_websocket_connections", "Open WebSocket connections.", registry=self.registry)
        websockets.set_function(lambda: self.open_websockets)

    def watch_inflight(self, inflight: Callable[[], int], limit: Callable[[], int]) -> None:
        """Gauges read at each scrape: the commands in flight now, and the in-flight limit."""
        _Gauge("almanac_gateway_inflight", "Commands in flight in this gateway process.",
               registry=self.registry).set_function(inflight)
        _Gauge("almanac_gateway_inflight_limit", "The in-flight limit (ALMANAC_GATEWAY_MAX_INFLIGHT).",
               registry=self.registry).set_function(limit)

    def watch_heavy_reads(self, running: Callable[[], int], limit: Callable[[], int], asked: Callable[[], int]) -> None:
        """The heavy reads (gateway.heavy_reads): running now, the limit, and how many were asked in all."""
        _Gauge("almanac_gateway_heavy_reads", "Whole-room reads running in this gateway process now (each holds a "
               "slot until its work has ended on the heavy-read worker).", registry=self.registry).set_function(running)
        _Gauge("almanac_gateway_heavy_reads_limit", "Whole-room reads this process runs at once.",
               registry=self.registry).set_function(limit)
        self.registry.register(_CountedBy("almanac_gateway_heavy_reads_asked", "Whole-room reads asked of this "
                                          "process: answered, from the memo, refused overloaded or abandoned.", asked))

    def decided(self, ruleset: str, accepted: bool, code: str = "", seconds: float | None = None) -> None:
        """A command the rules decided, its round trip ``seconds``: public when accepted (its room's version moves
        for all to see), for auditors only when refused (with why)."""
        if accepted:
            children = self._accepted.get(ruleset)
            if children is None:
                children = self._accepted[ruleset] = (
                    self.decisions.child(outcome="accepted", ruleset=ruleset),
                    self.commands.child(outcome="accepted", ruleset=ruleset),
                    self.command_latency.child(ruleset=ruleset))
            children[0].inc()
            children[1].inc()
            if seconds is not None:
                children[2].observe(seconds)
            return
        self.decisions.inc(outcome="rejected", ruleset=ruleset)
        self.rejects.inc(code=code or "unknown", ruleset=ruleset)
        if seconds is not None:
            self.refused_latency.observe(seconds, ruleset=ruleset)

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        """One answered HTTP request: its count by route template and status, and its latency. The command
        route's 422s (a refusal, by the rules or at the input check) are counted and timed for auditors only:
        in the public count they would move while no room's version does (see ``decided``)."""
        if route == COMMAND_ROUTE and status == 422:
            self.refused_requests.inc(route=route, method=method, status="422")
            self.refused_request_latency.observe(seconds, route=route)
            return
        children = self._answered.get((route, method, status))
        if children is None:  # route templates, methods and statuses are few: so are these
            children = self._answered[route, method, status] = (
                self.requests.child(route=route, method=method, status=str(status)),
                self.request_latency.child(route=route))
        children[0].inc()
        children[1].observe(seconds)

    def shed(self, count: int) -> None:
        """``count`` commands the connection guard refused as overloaded from one read: one integer added here,
        folded into ``requests`` (503) and the commands' ``overloaded`` when the metrics are rendered. Past
        capacity this runs for most requests, and each refusal's cost is taken from the commands served (three
        metric updates and two clock reads per refusal were a tenth of the guard's own cost of one, issue 28,
        item 19). Shed refusals are not in the request latency histogram: their time is the guard's microseconds."""
        self.shed_pending += count

    def _fold_shed(self) -> None:
        count, self.shed_pending = self.shed_pending, 0
        if count:
            self.commands.inc(count, outcome="overloaded", ruleset="")
            self.requests.inc(count, route=COMMAND_ROUTE, method="POST", status="503")

    def render(self, auditor: bool = False) -> str:
        """The public metrics; with ``auditor`` also those that could reveal hidden state (refusals, their codes,
        counts and timings)."""
        self._fold_shed()
        public = generate_latest(self.registry).decode()
        return public + generate_latest(self.audit_registry).decode() if auditor else public
