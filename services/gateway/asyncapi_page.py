"""The AsyncAPI document as a page people read: server-rendered HTML, no script, nothing fetched from elsewhere.

``GET /asyncapi`` answers this page to a browser (``Accept: text/html``) and the JSON document to everyone else
(``GET /asyncapi.json`` always the JSON). Channels with their addresses and messages, the operations, then every
schema as a table of its fields: type (a link to the schema it names), required, allowed values, description.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

REF = "#/components/schemas/"
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #fbfbfd; }
header { background: #23324d; color: #fff; padding: 1.2rem 2rem; }
header h1 { margin: 0 0 .3rem; font-size: 1.5rem; }
main { display: grid; grid-template-columns: 17rem 1fr; }
nav { padding: 1rem; border-right: 1px solid #dde; height: calc(100vh - 6rem); overflow: auto; position: sticky; top: 0; }
nav a { display: block; color: #23324d; text-decoration: none; font-size: .85rem; padding: .1rem 0; }
nav h3 { font-size: .8rem; text-transform: uppercase; color: #667; margin: 1rem 0 .3rem; }
section { padding: .5rem 2rem 1rem; }
h2 { border-bottom: 2px solid #23324d; padding-bottom: .2rem; }
.card { background: #fff; border: 1px solid #dde; border-radius: 6px; padding: .7rem 1rem; margin: .8rem 0; }
.card h4 { margin: 0 0 .3rem; font-size: 1.05rem; }
code { background: #eef0f6; padding: 0 .25rem; border-radius: 3px; font-size: .9em; }
table { border-collapse: collapse; width: 100%; font-size: .88rem; }
th, td { text-align: left; border-bottom: 1px solid #eee; padding: .25rem .4rem; vertical-align: top; }
.send { color: #0a6b2f; font-weight: 600; } .receive { color: #7a3e00; font-weight: 600; }
.enum { color: #4a2d7a; } .req { color: #b00020; font-size: .8em; }
"""


def render(document: dict[str, Any]) -> str:
    info = document.get("info", {})
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    messages: dict[str, Any] = document.get("components", {}).get("messages", {})
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(info.get('title', 'AsyncAPI'))}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<header><h1>{escape(info.get('title', ''))} <small>{escape(info.get('version', ''))}</small></h1>"
             f"<div>AsyncAPI {escape(document.get('asyncapi', ''))} &middot; {escape(info.get('description', ''))}"
             " &middot; <a style='color:#cde' href='/asyncapi.json'>the document as JSON</a></div></header><main><nav>",
             "<h3>Channels</h3>", *(f"<a href='#channel-{escape(n)}'>{escape(n)}</a>" for n in document.get("channels", {})),
             "<h3>Operations</h3>", *(f"<a href='#operation-{escape(n)}'>{escape(n)}</a>" for n in document.get("operations", {})),
             "<h3>Messages</h3>", *(f"<a href='#message-{escape(n)}'>{escape(n)}</a>" for n in messages),
             "<h3>Schemas</h3>", *(f"<a href='#schema-{escape(n)}'>{escape(n)}</a>" for n in schemas),
             "</nav><div>"]
    parts.append("<section><h2>Servers</h2>")
    for name, server in document.get("servers", {}).items():
        parts.append(f"<div class='card'><h4>{escape(name)}</h4><code>{escape(server.get('protocol', ''))}://"
                     f"{escape(server.get('host', ''))}</code></div>")
    parts.append("</section><section><h2>Channels</h2>")
    for name, channel in document.get("channels", {}).items():
        listed = ", ".join(_link(ref["$ref"].rsplit("/", 1)[-1], "message") for ref in channel.get("messages", {}).values())
        params = "".join(f"<tr><td><code>{escape(p)}</code></td><td>{escape(v.get('description', ''))}</td></tr>"
                         for p, v in channel.get("parameters", {}).items())
        parts.append(f"<div class='card' id='channel-{escape(name)}'><h4>{escape(name)}</h4>"
                     f"<div><code>{escape(channel.get('address', ''))}</code></div><p>{escape(channel.get('description', ''))}</p>"
                     f"<div>Messages: {listed}</div>" + (f"<table><tr><th>parameter</th><th>meaning</th></tr>{params}</table>"
                                                         if params else "") + "</div>")
    parts.append("</section><section><h2>Operations</h2><table><tr><th>operation</th><th>action</th><th>channel</th>"
                 "<th>summary</th></tr>")
    for name, operation in document.get("operations", {}).items():
        channel = operation.get("channel", {}).get("$ref", "").rsplit("/", 1)[-1]
        action = escape(operation.get("action", ""))
        parts.append(f"<tr id='operation-{escape(name)}'><td>{escape(name)}</td><td class='{action}'>{action}</td>"
                     f"<td>{_link(channel, 'channel')}</td><td>{escape(operation.get('summary', ''))}</td></tr>")
    parts.append("</table></section><section><h2>Messages</h2>")
    for name, message in messages.items():
        payload = message.get("payload", {})
        parts.append(f"<div class='card' id='message-{escape(name)}'><h4>{escape(name)}</h4><p>{escape(message.get('summary', ''))}"
                     f"</p><div>Content type <code>{escape(message.get('contentType', ''))}</code>, payload "
                     f"{_type(payload)}</div></div>")
    parts.append("</section><section><h2>Schemas</h2>")
    for name, schema in schemas.items():
        parts.append(_schema_card(name, schema))
    parts.append("</section></div></main></body></html>")
    return "".join(parts)


def _link(name: str, kind: str) -> str:
    return f"<a href='#{kind}-{escape(name)}'>{escape(name)}</a>"


def _type(schema: Any) -> str:
    """A field's type in a few words: references as links, unions with `or`, arrays and maps by their items."""
    if not isinstance(schema, dict) or not schema:
        return "any"
    if "$ref" in schema:
        return _link(schema["$ref"][len(REF):] if schema["$ref"].startswith(REF) else schema["$ref"], "schema")
    for union in ("oneOf", "anyOf"):
        if union in schema:
            return " or ".join(_type(member) for member in schema[union])
    if "const" in schema:
        return f"<code>{escape(json.dumps(schema['const']))}</code>"
    kind = schema.get("type")
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(_type(item) for item in schema["prefixItems"]) + "]"
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict) and not schema.get("properties"):
        keys = schema.get("propertyNames", {}).get("enum")
        key_text = "one of " + ", ".join(f"<code>{escape(str(k))}</code>" for k in keys) if keys else "string"
        return f"map from {key_text} to {_type(schema['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(escape(str(k)) for k in kind)
    if "enum" in schema:
        return "<span class='enum'>one of " + ", ".join(f"<code>{escape(json.dumps(v))}</code>"
                                                       for v in schema["enum"]) + "</span>"
    return escape(str(kind or "any"))


def _constraints(schema: dict[str, Any]) -> str:
    found = []
    for key, label in (("minimum", "&ge;"), ("maximum", "&le;"), ("minLength", "length &ge;"),
                       ("maxLength", "length &le;"), ("maxItems", "items &le;")):
        if key in schema:
            found.append(f"{label} {escape(str(schema[key]))}")
    if "default" in schema:
        found.append(f"default <code>{escape(json.dumps(schema['default']))}</code>")
    return "; ".join(found)


def _schema_card(name: str, schema: dict[str, Any]) -> str:
    head = (f"<div class='card' id='schema-{escape(name)}'><h4>{escape(name)}</h4>"
            f"<p>{escape(str(schema.get('description', '')))}</p>")
    properties = schema.get("properties")
    if not properties:
        return f"{head}<div>{_type(schema)}</div></div>"
    required = set(schema.get("required", []))
    rows = "".join(
        f"<tr><td><code>{escape(field)}</code>{' <span class=req>required</span>' if field in required else ''}</td>"
        f"<td>{_type(value)}</td><td>{_constraints(value) if isinstance(value, dict) else ''}</td>"
        f"<td>{escape(str(value.get('description', '')) if isinstance(value, dict) else '')}</td></tr>"
        for field, value in properties.items())
    return (f"{head}<table><tr><th>field</th><th>type</th><th>allowed</th><th>description</th></tr>{rows}</table></div>")
