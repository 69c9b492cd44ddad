"""The gateway's metrics are Prometheus text that Prometheus' own parser reads: real histograms, its
process's figures, and one registry per gateway."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from almanac.services.gateway.api_ops import auditors_engine_field
from almanac.services.gateway.metrics import GatewayMetrics


def samples(metrics: GatewayMetrics, auditor: bool = True) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.render(auditor)) for s in family.samples}


def test_command_latency_is_a_cumulative_histogram_with_millisecond_buckets() -> None:
    metrics = GatewayMetrics()
    for seconds in (0.0015, 0.0025, 0.004, 0.004, 0.2):
        metrics.command_latency.observe(seconds, ruleset="board")
    seen = samples(metrics)
    bucket = lambda le: seen[("almanac_command_latency_seconds_bucket", (("le", le), ("ruleset", "board")))]  # noqa: E731
    assert (bucket("0.001"), bucket("0.002"), bucket("0.003"), bucket("0.005"), bucket("0.25"), bucket("+Inf")) == (
        0, 1, 2, 4, 5, 5)
    assert seen[("almanac_command_latency_seconds_count", (("ruleset", "board"),))] == 5
    assert abs(seen[("almanac_command_latency_seconds_sum", (("ruleset", "board"),))] - 0.212) < 1e-9


def test_counters_process_figures_and_websockets_are_exported() -> None:
    metrics = GatewayMetrics()
    metrics.decided("board", accepted=True)
    metrics.decided("board", accepted=True)
    metrics.decided("board", accepted=False, code="board.off_map")
    metrics.request("/rooms/{room}/commands", "POST", 200, 0.001)
    metrics.request("/rooms/{room}", "GET", 404, 0.001)
    metrics.open_websockets = 3
    seen = samples(metrics)
    assert seen[("almanac_commands_total", (("outcome", "accepted"), ("ruleset", "board")))] == 2
    assert seen[("almanac_command_decisions_total", (("outcome", "accepted"), ("ruleset", "board")))] == 2
    assert seen[("almanac_command_rejects_total", (("code", "board.off_map"), ("ruleset", "board")))] == 1
    assert seen[("almanac_http_requests_total",
                 (("method", "POST"), ("route", "/rooms/{room}/commands"), ("status", "200")))] == 1
    assert seen[("almanac_http_requests_total", (("method", "GET"), ("route", "/rooms/{room}"), ("status", "404")))] == 1
    assert seen[("almanac_websocket_connections", ())] == 3
    assert seen[("process_cpu_seconds_total", ())] > 0 and seen[("process_resident_memory_bytes", ())] > 0


def test_refusal_codes_are_rendered_for_auditors_only() -> None:
    """A refusal code tells a player's hidden state (``realm.not_enough_gold``): the public metrics never name
    it, the auditors' do."""
    metrics = GatewayMetrics()
    metrics.decided("realm", accepted=False, code="realm.not_enough_gold")
    public = metrics.render()
    assert "not_enough_gold" not in public and "almanac_command_rejects_total" not in public
    assert samples(metrics)[("almanac_command_rejects_total", (("code", "realm.not_enough_gold"),
                                                               ("ruleset", "realm")))] == 1


def test_the_public_counts_a_refused_command_as_if_it_had_never_been_sent() -> None:
    """Issue 28: a rival on a quiet server must not learn that another player's command was refused (a refused
    ``smelt`` is a rival's bronze), and a public count that moves while no room's version does tells it. Given one
    gateway that decided nothing and one whose command was refused (its round trip and its 422 answer counted),
    when the public reads both, then it reads the same figures (histograms' timings aside: the process's); an
    accepted command is counted for all (its room's version moves for all to see); the auditors see the refusal."""
    silent, refused, accepted = GatewayMetrics(), GatewayMetrics(), GatewayMetrics()
    refused.decided("realm", accepted=False, code="realm.not_enough_gold", seconds=0.002)
    refused.request("/rooms/{room}/commands", "POST", 422, 0.002)
    accepted.decided("realm", accepted=True, seconds=0.002)
    accepted.request("/rooms/{room}/commands", "POST", 200, 0.002)

    def counts(metrics: GatewayMetrics, public: bool) -> dict:
        return {key: value for key, value in samples(metrics, not public).items()
                if key[0].startswith("almanac_") and not key[0].startswith("almanac_gc_")
                and not key[0].endswith(("_created", "_sum"))}

    assert counts(refused, public=True) == counts(silent, public=True)
    assert counts(accepted, public=True) != counts(silent, public=True)
    audited = counts(refused, public=False)
    assert audited != counts(silent, public=False)
    assert audited[("almanac_command_refused_latency_seconds_count", (("ruleset", "realm"),))] == 1
    assert audited[("almanac_http_refused_requests_total",
                    (("method", "POST"), ("route", "/rooms/{room}/commands"), ("status", "422")))] == 1


def test_two_gateways_in_one_process_keep_their_own_counts() -> None:
    first, second = GatewayMetrics(), GatewayMetrics()
    first.commands.inc(outcome="timeout", ruleset="claim")
    assert ("almanac_commands_total", (("outcome", "timeout"), ("ruleset", "claim"))) in samples(first)
    assert ("almanac_commands_total", (("outcome", "timeout"), ("ruleset", "claim"))) not in samples(second)


def test_a_series_counts_the_same_whatever_order_its_labels_are_given_in() -> None:
    metrics = GatewayMetrics()
    metrics.commands.inc(outcome="accepted", ruleset="board")
    metrics.commands.inc(ruleset="board", outcome="accepted")
    metrics.commands.inc(outcome="rejected", ruleset="board")
    metrics.commands.inc(2, outcome="accepted", ruleset="realm")
    seen = samples(metrics)
    total = lambda outcome, ruleset: seen[("almanac_commands_total", (("outcome", outcome), ("ruleset", ruleset)))]  # noqa: E731
    assert (total("accepted", "board"), total("rejected", "board"), total("accepted", "realm")) == (2, 1, 2)


def test_refusals_shed_by_the_connection_guard_are_counted_when_the_metrics_are_scraped() -> None:
    """Issue 28, item 19: past capacity most requests are refused by the connection guard, and each refusal's cost
    is taken from the commands served. Given the guard shed three commands from one read and two from another,
    when the metrics are scraped, then they count five 503s on the command route and five ``overloaded`` commands,
    and none of the guard's refusals was timed into the request latency histogram (their time is microseconds)."""
    metrics = GatewayMetrics()
    metrics.shed(3)
    metrics.shed(2)
    seen = samples(metrics)
    assert seen[("almanac_commands_total", (("outcome", "overloaded"), ("ruleset", "")))] == 5
    assert seen[("almanac_http_requests_total",
                 (("method", "POST"), ("route", "/rooms/{room}/commands"), ("status", "503")))] == 5
    assert ("almanac_http_request_latency_seconds_count", (("route", "/rooms/{room}/commands"),)) not in seen
    metrics.shed(1)
    assert samples(metrics)[("almanac_commands_total", (("outcome", "overloaded"), ("ruleset", "")))] == 6


def test_every_engine_count_that_moves_for_a_refused_command_is_the_auditors() -> None:
    """Issue 28: an engine counter that counts refused commands among others tells a rival, set against the public
    ``accepted``, that a refusal happened. Given the engine's counters that move for a refused command (the
    trimmed command-stream entries among them, a retention window later), then each is the auditors' alone; those
    that move only for what every seat sees stay public."""
    for field in ("commands", "rejected", "batches", "batches_ahead", "commands_trimmed", "latency_le_5", "latency_count"):
        assert auditors_engine_field(field), field
    for field in ("accepted", "duplicates", "conflicts", "shards_held"):
        assert not auditors_engine_field(field), field
