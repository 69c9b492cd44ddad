"""The AsyncAPI document of Almanac's Redis channels (command streams, feed, outcomes, dead letters, room
streams) and the live WebSocket, generated from the same msgspec Structs the services encode."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from almanac.events.envelope import Envelope
from almanac.services.bus import COMMAND_FIELD
from almanac.services.gateway import asyncapi_page, game_schemas
from almanac.services.gateway.api_docs import command_components, typed_room_events
from almanac.services.gateway.errors import json_response
from almanac.services.gateway.responses import Failure, LiveEvent
from almanac.services.room_service import CommandRecord, Outcome

router = APIRouter(tags=["operations"])
REF = "#/components/schemas/"

# The key's hash tag is the parameter's value, braces included: AsyncAPI reads each ``{name}`` of an address as one
# parameter, so the tag's own braces cannot also stand in the template (storage/keys.py shard_tag).
_SHARD = {"shard": {"description": "the shard's Redis hash tag {sNN}, braces included: NN = crc32(room) % "
                                   "ALMANAC_SHARDS, two digits", "examples": ["{s07}"]}}


@cache
def asyncapi_document() -> dict[str, Any]:
    unions, commands = command_components(REF)
    # every installed version's event union (services/gateway/game_schemas.py names them)
    events = [union for parts in game_schemas.game_components(REF)[0].values() for union in parts["event"]]
    _, structs = msgspec.json.schema_components([CommandRecord, Outcome, Envelope, LiveEvent, Failure],
                                                ref_template=REF + "{name}")
    schemas: dict[str, Any] = {**structs, **commands, **unions}
    schemas["CommandRecord"]["properties"]["body"] = {
        "description": "the client's command: a room command (create_room, join_room, end_room) or one of "
                       "the room's rule-set commands",
        "anyOf": [{"type": "object", "properties": {"kind": {"enum": ["create_room", "join_room", "end_room"]}}},
                  *({"$ref": REF + name} for name in unions)],
    }
    schemas["FeedEntry"] = {
        "type": "object", "description": "one entry per append to a room of the shard",
        "properties": {"r": {"type": "string", "description": "room id"},
                       "v": {"type": "string", "description": "first version appended"},
                       "l": {"type": "string", "description": "last version appended"}},
        "required": ["r", "v", "l"],
    }
    schemas["DeadLetter"] = {
        "type": "object", "description": "a command the engine set aside after max_attempts failures",
        "properties": {
            "entry_id": {"type": "string"}, "data": {"type": "string", "description": "msgpack(CommandRecord)"},
            "reason": {"type": "string"}, "attempts": {"type": "string"}, "engine": {"type": "string"},
            "time_ms": {"type": "string"}, "room": {"type": "string"}, "command_id": {"type": "string"},
        },
    }
    # The live frame and the refusal are the Structs the OpenAPI document takes them from (responses.LiveEvent,
    # Failure = its Error), their event typed the same way: one type, two documents.
    typed_room_events(schemas, [{"$ref": REF + name} for name in events])
    # An outcome's refusal is a rule error's ``to_dict`` (events/errors.py): its ``allowed`` is what the rule says,
    # a list of values or a bound (a version, a count, {"min": ...}), so any JSON value.
    schemas["RuleRefusal"] = {
        "type": "object", "description": "why the rules refused a command (events/errors.py RuleError.to_dict)",
        "properties": {"code": {"type": "string", "description": "stable machine-readable reason"},
                       "message": {"type": "string", "description": "a sentence for people"},
                       "field": {"type": "string", "description": "the command field at fault, when there is one"},
                       "allowed": {"description": "the values or the bound that would have been accepted"}},
        "required": ["code", "message"], "additionalProperties": False,
    }
    schemas["Outcome"]["properties"]["error"] = {"description": "the refusal (accepted false); null when accepted",
                                                 "anyOf": [{"$ref": REF + "RuleRefusal"}, {"type": "null"}],
                                                 "default": None}

    def message(name: str, schema: str, summary: str, content_type: str = "application/msgpack") -> dict[str, Any]:
        return {"name": name, "summary": summary, "contentType": content_type, "payload": {"$ref": REF + schema}}

    messages = {
        "command": message("command", "CommandRecord",
                           f"stream entry with the field {COMMAND_FIELD!r} = msgpack(CommandRecord) and, "
                           "optionally, 'reply' = the reply channel its outcome goes to"),
        "feedEntry": message("feedEntry", "FeedEntry", "stream entry fields r, v, l", "text/plain"),
        "outcome": message("outcome", "Outcome", "msgpack(Outcome), published once per command"),
        "deadLetter": message("deadLetter", "DeadLetter", "stream entry fields as listed", "text/plain"),
        "event": message("event", "Envelope", "stream entry id <version>-0, field 'e' = msgpack(Envelope)"),
        "liveEvent": message("liveEvent", "LiveEvent", "one JSON text frame per event", "application/json"),
        "liveRefusal": message("liveRefusal", "Failure", "one JSON text frame {code, message, field} before the close "
                               "code 4000 + HTTP status", "application/json"),
    }
    channels = {
        "shardCommands": {"address": "alm:{shard}:commands", "parameters": _SHARD,
                          "description": "the engine's input: gateways XADD, the shard's lease holder XREADGROUPs",
                          "messages": {"command": {"$ref": "#/components/messages/command"}}},
        "shardFeed": {"address": "alm:{shard}:feed", "parameters": _SHARD,
                      "description": "one entry per append (the projector's input); entries the projector "
                                     "applied more than ALMANAC_STREAM_RETAIN_S ago are trimmed",
                      "messages": {"feedEntry": {"$ref": "#/components/messages/feedEntry"}}},
        "replies": {"address": "alm:reply:{submitter}",
                    "parameters": {"submitter": {"description": "a gateway process's random id"}},
                    "description": "pub/sub: the engine PUBLISHes the outcome of an entry that names this reply "
                                   "channel; each gateway process SUBSCRIBEs to its own",
                    "messages": {"outcome": {"$ref": "#/components/messages/outcome"}}},
        "outcomes": {"address": "alm:outcome:{command_id}",
                     "parameters": {"command_id": {"description": "<room>:<player>:<client command id>"}},
                     "description": "pub/sub: the engine PUBLISHes the outcome of an entry that names no reply "
                                    "channel; a client SUBSCRIBEs to its command's before it submits",
                     "messages": {"outcome": {"$ref": "#/components/messages/outcome"}}},
        "deadLetters": {"address": "alm:{shard}:dead", "parameters": _SHARD,
                        "description": "commands that failed max_attempts times",
                        "messages": {"deadLetter": {"$ref": "#/components/messages/deadLetter"}}},
        "roomEvents": {"address": "alm:{shard}:room:{room}:events",
                       "parameters": {**_SHARD, "room": {"description": "room id"}},
                       "description": "the room's log: immutable, hash-chained",
                       "messages": {"event": {"$ref": "#/components/messages/event"}}},
        "live": {"address": "/rooms/{room}/live", "servers": [{"$ref": "#/servers/gateway"}],
                 "parameters": {"room": {"description": "room id"}},
                 "description": "the gateway's WebSocket feed (query from_version, token)",
                 "messages": {"liveEvent": {"$ref": "#/components/messages/liveEvent"},
                              "liveRefusal": {"$ref": "#/components/messages/liveRefusal"}}},
        "watch": {"address": "/rooms/{room}/watch", "servers": [{"$ref": "#/servers/gateway"}],
                  "parameters": {"room": {"description": "room id"}},
                  "description": "spectators: the room's events as the public sees them, no token (query "
                                 "from_version, delay: versions the feed trails the room by)",
                  "messages": {"liveEvent": {"$ref": "#/components/messages/liveEvent"},
                              "liveRefusal": {"$ref": "#/components/messages/liveRefusal"}}},
    }
    for channel in channels.values():
        channel.setdefault("servers", [{"$ref": "#/servers/redis"}])

    def operation(action: str, channel: str, summary: str) -> dict[str, Any]:
        return {"action": action, "channel": {"$ref": f"#/channels/{channel}"}, "summary": summary}

    return {
        "asyncapi": "3.0.0",
        "info": {"title": "Almanac streams and channels", "version": "0.1.0",
                 "description": "Redis Streams and pub/sub channels between the gateway, the engines and the "
                                "projector; the gateway's live WebSocket. Key layout: docs/architecture.md."},
        "servers": {"redis": {"host": "localhost:6379", "protocol": "redis"},
                    "gateway": {"host": "localhost:8000", "protocol": "ws"}},
        "channels": channels,
        "operations": {
            "submitCommand": operation("send", "shardCommands", "a gateway submits a command"),
            "processCommand": operation("receive", "shardCommands", "an engine decides commands of its shards"),
            "publishReply": operation("send", "replies", "the engine publishes an outcome to its submitter"),
            "awaitReply": operation("receive", "replies", "a gateway waits for its own commands' outcomes"),
            "publishOutcome": operation("send", "outcomes", "the engine publishes an outcome by command id"),
            "awaitOutcome": operation("receive", "outcomes", "a bus client waits for its command's outcome"),
            "appendFeed": operation("send", "shardFeed", "the engine's append script adds one feed entry"),
            "project": operation("receive", "shardFeed", "the projector applies the feed to read models"),
            "deadLetter": operation("send", "deadLetters", "the engine sets a failing command aside"),
            "appendEvents": operation("send", "roomEvents", "the engine appends a room's events"),
            "followRoom": operation("receive", "live", "a client follows a room's events"),
            "watchRoom": operation("receive", "watch", "a spectator follows a room's public events"),
        },
        "components": {"schemas": schemas, "messages": messages},
    }


# The page runs no script and loads nothing: its own inline style only.
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:"


@router.get("/asyncapi", summary="The AsyncAPI 3 document of Almanac's streams and channels",
            description="JSON; a browser (Accept: text/html) gets it rendered as a page of documentation.")
async def asyncapi(request: Request) -> Response:
    # A browser asks for text/html first; a client sends */* or application/json and gets the document.
    if request.headers.get("accept", "").split(",")[0].strip().startswith("text/html"):
        return HTMLResponse(asyncapi_page.render(asyncapi_document()), headers={"Content-Security-Policy": PAGE_POLICY})
    return json_response(asyncapi_document())


@router.get("/asyncapi.json", include_in_schema=False)
async def asyncapi_json() -> Response:
    return json_response(asyncapi_document())
