"""Operations: health (Redis, engine and projector heartbeats) and Prometheus metrics."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from redis.exceptions import ResponseError

from almanac.services.archiver import HEARTBEAT_TTL_S as ARCHIVER_HEARTBEAT_TTL_S
from almanac.services.engine.metrics import RESTORE_BUCKETS_MS
from almanac.services.engine.shard_engine import heartbeat_ttl_ms as engine_heartbeat_ttl_ms
from almanac.services.gateway.api_rooms import gateway
from almanac.services.gateway.errors import (
    STORE_ERRORS,
    STORE_RETRY_AFTER_S,
    ApiError,
    json_response,
    store_failure,
)
from almanac.services.gateway.gateway import Gateway, bearer
from almanac.services.logging import get_logger
from almanac.services.redis_client import refuses_writes
from almanac.storage.keys import (
    archiver_heartbeat_key,
    archiver_stats_key,
    archivers_key,
    engine_heartbeat_key,
    engine_stats_key,
    engines_key,
)
from almanac.storage.process_registry import (
    REGISTRY_FIELDS,
    TTL_FIELD,
    missing_or_forget,
    read_registry_fields,
    registry_fields_of,
)

router = APIRouter(tags=["operations"])
log = get_logger("almanac.gateway")
STALE_AFTER_S = 15.0


async def _engines(gw: Gateway) -> dict[str, Any]:
    """Engines that registered and whose heartbeat has not expired (the key lives 3 leases), whether they are
    ready (see ``health``), and the registered ones missing their heartbeat."""
    names = sorted(n.decode() for n in await gw.client.smembers(engines_key()))
    # One GET per engine in a pipeline, not MGET: on a Redis Cluster the heartbeat keys live in different slots.
    # Beside each, how long it has left to live, and the registry's fields of its counters (how long a beat lives).
    async with gw.client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(engine_heartbeat_key(name))
            pipe.pttl(engine_heartbeat_key(name))
            read_registry_fields(pipe, engine_stats_key(name))
        found = await pipe.execute()
    now = int(time.time() * 1000)  # this gateway's clock: only against its own outage's time
    default_ttl_ms = engine_heartbeat_ttl_ms(gw.settings.lease_ms)
    engines = []
    missing = {}
    for name, raw, left_ms, fields, exists in zip(names, found[::4], found[1::4], found[2::4], found[3::4], strict=True):
        registry = registry_fields_of(fields, exists)
        if raw is None:  # registered, but its heartbeat expired: that engine died (a clean stop leaves the set)
            missing[name] = (engine_stats_key(name), registry)
            continue
        beat = json.loads(raw)
        # The heartbeat's age on Redis' clock alone (the life it was written with, less what is left of it), as the
        # registry counts: the engine's ``time_ms`` is its host's clock, and a host behind this gateway's by more
        # than STALE_AFTER_S made a live engine look stale (and the gateway not ready) for good.
        ttl_ms = int((registry or {}).get(TTL_FIELD, default_ttl_ms))
        # PTTL below 0: the beat expired between the GET and it (-2), or lives without a TTL (-1): as old as a beat
        # gets, not the freshest.
        age_ms = max(0, ttl_ms - left_ms if left_ms >= 0 else ttl_ms)
        beat["age_s"] = round(age_ms / 1000, 3)
        # Ready: a consume round completed after the engine's own last Redis failure (both on its clock) and
        # after the last outage this gateway saw (a heartbeat written before the outage, or while the engine is
        # still in its back-off, does not count). The second compares how long ago each was, never one host's
        # clock with another's: the round's age at the beat (the engine's clock) plus the beat's age (Redis'),
        # against the outage's age on this gateway's clock.
        consumed = beat.get("consumed_ms", 0)
        round_ago_ms = age_ms + max(0, beat.get("time_ms", consumed) - consumed)
        beat["ready"] = bool(consumed) and consumed > beat.get("redis_error_ms", 0) and (
            not gw.store_outage_ms or round_ago_ms < now - gw.store_outage_ms)
        engines.append(beat)
    held = sorted({s for e in engines for s in e.get("shards_held", [])})
    ok = bool(engines) and all(e["age_s"] <= STALE_AFTER_S for e in engines)
    reasons = []
    if not engines:
        reasons.append("no engine has a live heartbeat")
    for beat in engines:
        if beat["age_s"] > STALE_AFTER_S:
            reasons.append(f"engine {beat['name']}: heartbeat {beat['age_s']} s old")
        elif beat.get("shards_held") and not beat["ready"]:
            outage = f"{round((now - gw.store_outage_ms) / 1000, 1)} s ago" if gw.store_outage_ms else "never"
            reasons.append(f"engine {beat['name']}: no completed round since the last Redis outage "
                           f"(the engine saw one at {beat.get('redis_error_ms', 0)} epoch ms on its clock; this "
                           f"gateway saw one {outage})")
    if engines and len(held) < gw.settings.shard_count:
        reasons.append(f"{gw.settings.shard_count - len(held)} of {gw.settings.shard_count} shards have no engine")
    # An engine that died is reported missing until it has been gone long enough to be forgotten
    # (storage.process_registry). It is neither a reason nor a degradation of its own: what it cost users is its
    # shards, and a shard no live engine holds already makes the gateway not ready; once the others (or its
    # restart) hold them, commands are decided as before. Forgetting one keeps its counters (they count since the
    # name first ran, as a clean stop keeps them).
    missing_ms = await missing_or_forget(gw.client, engines_key(), missing,
                                         default_ttl_ms, keep_stats=True)
    return {"ok": ok, "ready": not reasons, "reasons": reasons, "engines": engines, "shards_held": len(held),
            "shard_count": gw.settings.shard_count, "store_outage_ms": gw.store_outage_ms,
            "missing": [{"name": name, "missing_ms": ms} for name, ms in sorted(missing_ms.items())]}


def _outcome_subscription(gw: Gateway) -> dict[str, Any]:
    """The gateway's outcome subscription: live or not, and on which node."""
    return {"subscribed": gw.outcomes.subscribed, "node": gw.outcomes.node}


async def _projector(gw: Gateway) -> dict[str, Any]:
    status = await gw.read_models.status()
    # A shard no live projector holds has a stale read model, whether its projector is listed missing, was forgotten
    # (a crash long ago) or never ran: as a shard without an engine is counted (``_engines``). A missing projector
    # whose shards the live ones hold (one replaced under another name) is listed only. The shards a projector holds
    # are those its heartbeat names.
    held = {shard for beat in status["projectors"] for shard in beat["shards"]}
    stale = not set(range(gw.settings.shard_count)) <= held
    return {"ok": bool(status.get("alive")) and not stale, **status}


@router.get(
    "/health",
    summary="Ready to take commands? Redis reachable; engine and projector heartbeats",
    description="200 `ok` (or `degraded`: the projector is behind or down, or the live projectors do not hold every "
    "shard, so read models are stale; or the "
    "outcome subscription is down, `outcomes.subscribed` false, so commands are answered by polling) when "
    "commands can be taken. 503 with `reasons` and Retry-After when not: `down` (Redis unreachable) or "
    "`not_ready`: no live engine, a shard without an engine, or an engine that has not completed a consume "
    "round (group, pending claim, read) since the last Redis outage it or this gateway saw. Redis answering "
    "again is not enough: the engine must show it works after the reconnect. A registered engine or projector "
    "whose heartbeat expired is listed under `missing` until 120 of its heartbeat TTLs have passed since a "
    "gateway first found it missing: that changes nothing by itself (its shards, held by another or by none, are "
    "counted as above), one stopped cleanly is not listed.",
    responses={503: {"description": "`down` or `not_ready`, with `reasons`"}},
)
async def health(request: Request) -> Response:
    gw = gateway(request)
    retry = {"Retry-After": str(STORE_RETRY_AFTER_S)}
    started = time.perf_counter()
    try:
        await gw.client.ping()
    except (*STORE_ERRORS, ResponseError) as error:
        if not store_failure(error):
            raise
        refusing = refuses_writes(error)  # MISCONF, BUSY and a stale replica's MASTERDOWN refuse PING too
        gw.note_store_outage()
        reason = "Redis refuses writes (it cannot persist, a script holds it, or it is a replica)" if refusing else \
            "Redis cannot be reached"
        return json_response({"status": "down", "ready": False, "reasons": [reason],
                              "redis": {"ok": False, "error": type(error).__name__}}, 503, retry)
    redis_status = {"ok": True, "ping_ms": round((time.perf_counter() - started) * 1000, 3)}
    engine, projector = await _engines(gw), await _projector(gw)
    outcomes = _outcome_subscription(gw)
    body = {"redis": redis_status, "engine": engine, "projector": projector, "outcomes": outcomes,
            "reasons": engine["reasons"]}
    if not engine["ok"] or not engine["ready"]:
        return json_response({"status": "not_ready", "ready": False, **body}, 503, retry)
    # Without its outcome subscription the gateway still answers commands (from the stored outcome, by
    # polling), only slower: degraded, not unready.
    status = "ok" if projector["ok"] and outcomes["subscribed"] else "degraded"
    return json_response({"status": status, "ready": True, **body})


@router.get("/metrics", summary="Prometheus text metrics; with an auditor token also the refusals",
            description="Anyone may read the public metrics. They count only what everyone can see happen: a "
            "command the rules accepted moves its room's version, one they refused moves nothing public, so "
            "every count and timing of a refusal (which could reveal a player's hidden state on a quiet server) "
            "is added only for an auditor's token (`Authorization: Bearer`): "
            "`almanac_command_decisions_total`, `almanac_command_rejects_total` by refusal code (e.g. "
            "`realm.not_enough_gold`), `almanac_command_refused_latency_seconds`, the command route's 422 answers "
            "(`almanac_http_refused_requests_total`, `almanac_http_refused_request_latency_seconds`) and the engine "
            "counters `commands`, `rejected`, `batches`, `batches_ahead` and `latency_*`. Any other valid token "
            "reads the public ones, an invalid or expired one is refused (401).",
            response_class=Response)
async def metrics(request: Request) -> Response:
    gw = gateway(request)
    token = bearer(request)
    auditor = token is not None and _is_auditor(gw, token)
    extra: list[str] = []
    try:
        extra = await _scrape_engine_and_projector(gw, auditor)
    except Exception:  # metrics of the other services must never break the gateway's own
        log.warning("metrics.scrape_failed", exc_info=True)
    return Response(gw.metrics.render(auditor) + "\n".join(extra) + "\n", media_type="text/plain; version=0.0.4")


def _is_auditor(gw: Gateway, token: str) -> bool:
    """Whether ``token`` is an auditor's; a player's is not (401 for one that is not valid at all)."""
    try:
        gw.auditor(token)
    except ApiError as error:
        if error.code != "auditors_only":
            raise
        return False
    return True


def auditors_engine_field(field: str) -> bool:
    """Whether an engine counter is the auditors' alone: one that counts or times the commands the rules refused,
    alone or among every decided one (``rejected``, ``commands``, the batches, the latency histogram). On a quiet
    server such a count moving while no room's version does tells a rival that a command was refused, and a
    refusal can tell hidden state (issue 28). The public keeps ``accepted`` (each moves a room's version for all to
    see), duplicates, failures, conflicts, restores and the engine's own collector figures."""
    return field in AUDITORS_ENGINE_FIELDS or field.startswith("latency_")


# ``commands_trimmed`` counts the command-stream entries trimmed, refused commands' among them: set against the
# public ``accepted`` (a retention window later) it would tell that a refusal happened.
AUDITORS_ENGINE_FIELDS = frozenset({"commands", "rejected", "batches", "batches_ahead", "commands_trimmed"})


async def _scrape_engine_and_projector(gw: Gateway, auditor: bool) -> list[str]:
    lines: list[str] = []
    engine = await _engines(gw)
    lines += ["# HELP almanac_engine_up Engines with a live heartbeat.", "# TYPE almanac_engine_up gauge",
              f"almanac_engine_up {len(engine['engines'])}"]
    if engine["engines"]:
        lines += ["# HELP almanac_engine_counter Engine counters (commands, rejects, conflicts, latency buckets).",
                  "# TYPE almanac_engine_counter counter"]
        restores: list[str] = []
        for beat in engine["engines"]:
            counters = await gw.client.hgetall(engine_stats_key(beat["name"]))
            for field, value in sorted(counters.items()):
                if field.decode() in REGISTRY_FIELDS or not auditor and auditors_engine_field(field.decode()):
                    continue  # the registry's fields are no counters; the refusals' counters are the auditors'
                lines.append(f'almanac_engine_counter{{engine="{beat["name"]}",field="{field.decode()}"}} '
                             f"{int(value)}")
            restores += _restore_histogram(beat["name"], {k.decode(): int(v) for k, v in counters.items()})
        lines += ["# HELP almanac_room_restore_seconds Rooms brought back from the archive (archived idle, then "
                  "commanded) and how long the command waited for each (write-back into Redis and load).",
                  "# TYPE almanac_room_restore_seconds histogram", *restores]
    status = await gw.read_models.status()
    lines += ["# HELP almanac_projector_lag_ms Age of the oldest feed entry the projector has not applied.",
              "# TYPE almanac_projector_lag_ms gauge"]
    lines += [f'almanac_projector_lag_ms{{shard="{s["shard"]}"}} {s["lag_ms"]}' for s in status["shards"]]
    lines += ["# HELP almanac_projector_up Projectors with a live heartbeat.", "# TYPE almanac_projector_up gauge",
              f"almanac_projector_up {len(status['projectors'])}"]
    return lines + await _scrape_archivers(gw, auditor)


def sample(value: float) -> str:
    """A sample's value with every digit kept (``:g`` keeps six significant ones: a byte counter past a million
    read rounded, and stood still between scrapes while it grew)."""
    return str(int(value)) if value.is_integer() else repr(value)


def _restore_histogram(engine: str, counters: dict[str, int]) -> list[str]:
    """One engine's ``almanac_room_restore_seconds`` series from its counters (services.engine.metrics)."""
    labels = f'engine="{engine}"'
    lines = [f'almanac_room_restore_seconds_bucket{{{labels},le="{bound / 1000:g}"}} '
             f'{counters.get(f"restore_le_{bound}", 0)}' for bound in RESTORE_BUCKETS_MS]
    count = counters.get("rooms_restored", 0)
    return lines + [f'almanac_room_restore_seconds_bucket{{{labels},le="+Inf"}} {count}',
                    f"almanac_room_restore_seconds_sum{{{labels}}} {sample(counters.get('restore_us_sum', 0) / 1e6)}",
                    f"almanac_room_restore_seconds_count{{{labels}}} {count}"]


# The archiver's figures (services.archiver writes them beside its heartbeat): name, type, help.
_ARCHIVER_METRICS = (
    ("rooms", "counter", "Rooms moved to the archive."),
    ("bytes", "counter", "Bytes of archive objects written (compressed; auditors only)."),
    ("commands", "counter", "Commands (accepted and refused) of the archived rooms (auditors only)."),
    ("errors", "counter", "Rooms whose move failed (retried on the next pass)."),
    ("rooms_per_s", "gauge", "Rooms archived per second in the archiver's last pass."),
    ("lag_rooms", "gauge", "Ended rooms past ALMANAC_DEDUPE_RETAIN not archived yet."),
    ("lag_s", "gauge", "Seconds the oldest of those has waited past its window."),
)


async def _scrape_archivers(gw: Gateway, auditor: bool) -> list[str]:
    prefix = gw.store.keys.prefix
    names = sorted(n.decode() for n in await gw.client.smembers(archivers_key(prefix)))
    # One round trip for every archiver (a pipeline, not one call after another; on a Cluster the keys' slots differ).
    async with gw.client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.exists(archiver_heartbeat_key(name, prefix))
            pipe.hgetall(archiver_stats_key(name, prefix))
        found = await pipe.execute()
    alive = [name for name, beating in zip(names, found[::2], strict=True) if beating]
    stats = dict(zip(names, found[1::2], strict=True))
    # An archiver gone for good (storage.process_registry) is forgotten: its figures are no longer shown.
    missing = {n: (archiver_stats_key(n, prefix), stats[n] or None) for n in names if n not in alive}
    kept = await missing_or_forget(gw.client, archivers_key(prefix), missing, ARCHIVER_HEARTBEAT_TTL_S * 1000)
    names = [n for n in names if n in alive or n in kept]
    lines = ["# HELP almanac_archiver_up Archivers with a live heartbeat.", "# TYPE almanac_archiver_up gauge",
             f"almanac_archiver_up {len(alive)}"]
    for field, kind, help_text in _ARCHIVER_METRICS:
        if field in ("commands", "bytes") and not auditor:
            continue  # refused ones among them, and their records in the objects: the auditors' (auditors_engine_field)
        metric = f"almanac_archiver_{field}" + ("_total" if kind == "counter" else "")
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} {kind}"]
        for name in names:
            value = stats[name].get(field.encode())
            if value is not None:
                lines.append(f'{metric}{{archiver="{name}"}} {sample(float(value))}')
    return lines
