"""The console's routes: its web UI's files (the ``console/`` folder beside this module) at ``/``, and the small
JSON routes it needs beside the public API."""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from pathlib import Path as FilePath
from typing import Any

import msgspec
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from almanac.events import codec, registry, room as room_rules
from almanac.events.errors import RuleError
from almanac.events.forensics.tree_diff import change_rows
from almanac.services.gateway.api_ops import _engines, _is_auditor, _projector
from almanac.services.gateway.api_rooms import PageCursor, PageLimit, RoomId, gateway, rooms_page
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import bearer
from almanac.services.gateway.room_reader import Viewer, room_summary
from almanac.services.gateway.schemas import MAX_VERSION, NAME_PATTERN, TOKEN_REQUIRED
from almanac.storage.keys import engine_stats_key
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

STATIC_DIR = FilePath(__file__).parent / "console"  # the files; this module serves them
ASSETS_URL = "/console"
MAX_SERIES_VERSIONS = 20_000
# Versions folded between two yields of a /series fold to its worker's loop: where a read whose client went away
# is cancelled (heavy_reads.HeavyReads.run). Each fold step costs ~0.25 ms: a yield every ~25 ms of fold.
SERIES_YIELD_EVERY = 100

router = APIRouter(tags=["console"])


def mount(app: Any) -> None:
    """Serve the console's files (HTML, JS, CSS and the vendored libraries) from inside the package."""
    app.mount(ASSETS_URL, StaticFiles(directory=STATIC_DIR), name="console")
    app.include_router(router)


@router.get("/", include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html")


@router.get("/favicon.ico", include_in_schema=False)  # what a browser asks for any page without an icon (/asyncapi)
async def favicon() -> FileResponse:
    return FileResponse(STATIC_DIR / "vendor" / "swagger-ui" / "favicon-32x32.png", media_type="image/png")


# A rule-set as a URL names it: its name, or name@version.
RULESET_REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}(@[0-9]{1,6})?$"


def ruleset_schema(name: str) -> dict[str, Any]:
    """JSON Schemas of a rule-set's commands and creation options, from its msgspec Structs."""
    try:
        decider = registry.get(name)
    except RuleError as error:
        raise ApiError(404, error.code, error.message, "ruleset", allowed=error.allowed) from None
    types = [*decider.command_types, decider.options_type]
    schemas, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    commands = []
    for command_type, schema in zip(decider.command_types, schemas, strict=False):
        resolved = components.get(schema["$ref"].rsplit("/", 1)[-1], schema)
        commands.append({"kind": command_type.__struct_config__.tag, "title": resolved.get("title", ""),
                         "description": resolved.get("description", ""), "schema": schema})
    return {"ruleset": decider.name, "commands": commands, "options": schemas[-1], "$defs": components}


@router.get("/rulesets/{ref}/picture.js", include_in_schema=False)  # a static asset of the console, like its own files
async def ruleset_picture(ref: str = Path(pattern=RULESET_REF_PATTERN)) -> Response:
    """The manifest's ``console_picture`` ("package:file.js"), served from the package; 404 when it has none."""
    try:
        manifest = registry.manifest(ref)
    except RuleError as error:
        raise ApiError(404, error.code, error.message, "ruleset", allowed=error.allowed) from None
    if not manifest.console_picture:
        raise ApiError(404, "no_picture", f"{manifest.ref} has no console picture: the console shows its state tree",
                       "ruleset")
    package, _, name = manifest.console_picture.partition(":")
    source = resources.files(package).joinpath(name).read_bytes()
    return Response(source, media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@router.get("/rulesets/{name}/schema", summary="JSON Schemas of a rule-set's commands (and its creation options)")
async def get_ruleset_schema(name: str = Path(pattern=RULESET_REF_PATTERN)) -> Response:
    return json_response(ruleset_schema(name))


@router.get("/status", summary="System status for the console: engines, leases, projector lag, dead letters",
            description="`commands_total`: the commands the engines accepted (each moves its room's version). "
            "`commands_decided`, accepted and refused, only for an auditor's token (null otherwise): on a quiet "
            "server a count that moves on a refusal while no room's version does tells a rival the refusal, and a "
            "refusal can tell a player's hidden state. An invalid or expired token is refused (401).")
async def status(request: Request) -> Response:
    gw = gateway(request)
    token = bearer(request)
    auditor = token is not None and _is_auditor(gw, token)
    engine, projector = await _engines(gw), await _projector(gw)
    accepted = decided = 0
    for beat in engine["engines"]:
        counters = await gw.client.hgetall(engine_stats_key(beat["name"]))
        accepted += int(counters.get(b"accepted", 0))
        decided += int(counters.get(b"commands", 0))
    async with gw.client.pipeline(transaction=False) as pipe:
        for shard in range(gw.settings.shard_count):
            pipe.xlen(gw.keys.dead_letters(shard))
        dead = await pipe.execute()
    return json_response({
        "time_ms": int(time.time() * 1000),
        "engine": engine,
        "projector": projector,
        "commands_total": accepted,
        "commands_decided": decided if auditor else None,
        "dead_letters": {"total": sum(dead), "by_shard": {str(s): n for s, n in enumerate(dead) if n}},
    })


@router.get("/status/rooms", summary="Rooms with their last activity and how far the read models lag behind, a "
                                     "page at a time in GET /rooms' order; follow next_cursor")
async def rooms_activity(request: Request, ruleset: str | None = Query(None, pattern=NAME_PATTERN),
                         limit: int = PageLimit, cursor: str | None = PageCursor) -> Response:
    gw = gateway(request)
    rooms, next_cursor = await rooms_page(request, ruleset, limit, cursor)
    async with gw.client.pipeline(transaction=False) as pipe:
        for row in rooms:
            pipe.xrevrange(gw.keys.events(row["room"]), "+", "-", count=1)
        tails = await pipe.execute()
    # A room whose stream Redis no longer holds may be archived: its version is its pointer's (one round trip for
    # all of them), and its last activity the time of that version's event.
    pointers = getattr(gw.store, "pointers", None)
    archived = {} if pointers is None else await pointers([row["room"] for row, tail in zip(rooms, tails,
                                                                                               strict=True) if not tail])
    listed = []
    for row, tail in zip(rooms, tails, strict=True):
        latest, last_ms = 0, None
        if tail:
            entry_id, fields = tail[0]
            latest = int(entry_id.split(b"-", 1)[0])
            envelope = codec.decode_envelope(fields[b"e"], row["room"], latest)
            last_ms = envelope.server_time_ms
        elif (pointer := archived.get(row["room"])) is not None:
            latest = pointer.version
            last_ms = await _archived_activity(gw.store, row, latest)
        listed.append({**row, "latest_version": latest, "last_activity_ms": last_ms,
                       "projector_lag_versions": max(0, latest - int(row.get("version", 0)))})
    return json_response({"rooms": codec.to_builtins(listed), "next_cursor": next_cursor})


async def _archived_activity(store: RedisEventStore, row: dict[str, Any], latest: int) -> int | None:
    """The time of an archived room's last event: its listing row's ``updated_at_ms`` when the row was projected
    at that version (it is that event's time: projections.read_model_rows), so a poll of hundreds of archived rooms reads
    no object; else that event, read from the archive."""
    if int(row.get("version", 0)) == latest and row.get("updated_at_ms") is not None:
        return int(row["updated_at_ms"])
    last = await store.read(row["room"], latest, latest)
    return last[-1].server_time_ms if last else None


@router.get("/rooms/{room}/at/{version}", openapi_extra=TOKEN_REQUIRED,
            summary="Time travel: the room at a version; auditors get the full state and every seat's view, "
                    "a player only their own view")
async def room_at(request: Request, room: str = RoomId, version: int = Path(ge=1),
                  player: str | None = Query(None, pattern=NAME_PATTERN),
                  since: int | None = Query(None, ge=1, le=MAX_VERSION,
                                            description="also what changed since this version in the same tree (the "
                                                        "player's view, or the whole state): the one tree-diff")) -> Response:
    gw = gateway(request)
    viewer = gw.viewer(bearer(request), room)
    if not viewer.auditor:
        player = viewer.whose_view(player)
    latest = await gw.store.latest_version(room)
    if latest == 0:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    for asked, field in ((version, "version"), (since, "since")):
        if asked is not None and asked > latest:
            raise ApiError(422, "version_out_of_range", f"room {room!r} has versions 1..{latest}", field)
    state = await gw.reader.at_version(room, version)
    assert state is not None
    decider = room_rules.decider_of(state)  # the room's own version, not what the bare name means today
    answer: dict[str, Any] = {"room": room, "version": version, "latest_version": latest,
                              "summary": room_summary(state), "scores": viewer.scores(state)}
    if player is not None:
        answer["player"] = player
        answer["view"] = viewer.view(state, player)
    else:  # an auditor who names no seat: the whole state and every seat's view
        answer["state"] = codec.to_builtins(state.game)
        answer["views"] = {seat: viewer.view(state, seat) for seat in decider.seats(state.game)}
    if since is not None:
        earlier = await gw.reader.at_version(room, since)
        assert earlier is not None
        then = viewer.view(earlier, player) if player is not None else codec.to_builtins(earlier.game)
        answer["since"] = since
        answer["changes"] = change_rows(then, answer["view"] if player is not None else answer["state"])
    # Signed at the head the answer was read against (latest_version: cached, no re-hash of an old version).
    return await gw.room_answer(room, answer, version=latest)


@router.get("/rooms/{room}/series",
            summary="Scores per player at every version, for anyone (the public scores, as /scores); "
                    "auditors get the complete scores and each player's numeric resources")
async def room_series(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    # No token: the public. A token given must be valid for this room; the viewer decides what it shows.
    viewer = gw.viewer(bearer(request), room, public=True)
    # Kept by the room's latest version (its events never change) and what the reader may see.
    latest = await gw.store.latest_version(room)
    memo = ("series", room, latest, viewer.auditor)
    series = await gw.heavy.run(lambda loader: _series(loader, room, viewer), memo=memo)
    # Outside the memo (a kept answer is shared): signed at the last version the series covers.
    return await gw.room_answer(room, series, version=series["versions"][-1] if series["versions"] else latest)


async def _series(loader: RoomLoader, room: str, viewer: Viewer) -> dict[str, Any]:
    """The room's scores (and, for an auditor, numeric resources) at every version: a fold of the whole room."""
    envelopes = await loader.store.read(room, 1, MAX_SERIES_VERSIONS)
    if not envelopes:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    # A fork's first event folds onto its parent's state at the fork's version (as every load does).
    state = await loader.base_of(envelopes[0])
    versions: list[int] = []
    scores: dict[str, list[int | None]] = {}
    resources: dict[str, list[int | None]] = {}
    for position, envelope in enumerate(envelopes):
        if position % SERIES_YIELD_EVERY == 0:
            await asyncio.sleep(0)  # where a read whose client went away is cancelled (heavy_reads.HeavyReads.run)
        state = room_rules.evolve(state, codec.decode_event(envelope), room, envelope.version)
        if state is None or state.game is None:
            continue
        index = len(versions)
        versions.append(envelope.version)
        for name, value in viewer.scores(state).items():
            scores.setdefault(name, [None] * index).append(value)
        if viewer.auditor:
            decider = room_rules.decider_of(state)
            for name, value in _numbers(codec.to_builtins(decider.resources(state.game))).items():
                resources.setdefault(name, [None] * index).append(value)
        for series in (*scores.values(), *resources.values()):
            series.extend([None] * (index + 1 - len(series)))
    return {"room": room, "versions": versions, "scores": scores, "resources": resources}


def _numbers(value: Any, prefix: str = "", depth: int = 0) -> dict[str, int]:
    """The whole numbers inside a resources tree, by dotted path (what the charts can plot)."""
    found: dict[str, int] = {}
    if isinstance(value, bool):
        return found
    if isinstance(value, int):
        found[prefix or "value"] = value
    elif isinstance(value, dict) and depth < 4:
        for key, item in value.items():
            found.update(_numbers(item, f"{prefix}.{key}" if prefix else str(key), depth + 1))
    return found
