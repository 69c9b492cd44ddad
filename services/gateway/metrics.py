"""Prometheus text metrics kept in process: counters and latency histograms, no client library needed."""

from __future__ import annotations

import bisect
from collections import defaultdict

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.values: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] += amount

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        lines += [f"{self.name}{_labels(k)} {v:g}" for k, v in sorted(self.values.items())]
        return lines


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self.counts: dict[tuple[tuple[str, str], ...], list[int]] = {}
        self.sums: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[key] += value

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, counts in sorted(self.counts.items()):
            running = 0
            for bound, count in zip(self.buckets, counts, strict=False):
                running += count
                lines.append(f"{self.name}_bucket{_labels(key + (('le', f'{bound:g}'),))} {running}")
            running += counts[-1]
            lines.append(f"{self.name}_bucket{_labels(key + (('le', '+Inf'),))} {running}")
            lines.append(f"{self.name}_sum{_labels(key)} {self.sums[key]:.6f}")
            lines.append(f"{self.name}_count{_labels(key)} {running}")
        return lines


class Gauge:
    """Values computed at scrape time (e.g. projector lag), set just before rendering."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def set(self, value: float, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] = value

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge"]
        lines += [f"{self.name}{_labels(k)} {v:g}" for k, v in sorted(self.values.items())]
        return lines


class GatewayMetrics:
    def __init__(self) -> None:
        self.requests = Counter("almanac_http_requests_total", "HTTP requests by route template and status.")
        self.commands = Counter(
            "almanac_commands_total",
            "Commands by outcome: accepted, rejected, conflict, timeout, invalid (refused before the engine).",
        )
        self.rejects = Counter("almanac_command_rejects_total", "Commands refused by the rules, by error code.")
        self.conflicts = Counter("almanac_command_conflicts_total", "Commands that ended in an unresolved version conflict.")
        self.command_latency = Histogram(
            "almanac_command_latency_seconds", "Command round trip in the gateway: submit to outcome."
        )
        self.request_latency = Histogram("almanac_http_request_latency_seconds", "HTTP request latency by route.")
        self.websockets = Gauge("almanac_websocket_connections", "Open WebSocket connections.")
        self.open_websockets = 0

    def render(self) -> str:
        self.websockets.set(self.open_websockets)
        lines: list[str] = []
        for metric in (
            self.requests,
            self.request_latency,
            self.commands,
            self.rejects,
            self.conflicts,
            self.command_latency,
            self.websockets,
        ):
            lines += metric.render()
        return "\n".join(lines) + "\n"
