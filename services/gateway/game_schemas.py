"""Every hosted rule-set's commands, events and state as JSON Schemas, from its msgspec types via the manifests.

For each rule-set ``name`` (component names carry ``Name`` as a prefix, since sectors and claim both have a
``Build``), its default version's parts as below, and those of every other installed version ``n`` under
``<Name>V<n>`` where they differ (a room of any version answers within the documents; a type two versions share,
realm@2's every one, is documented once: ``names[name]["versions"]`` maps each version to its parts):

* ``<Name>Command``: its commands, a union told apart by ``kind``; a field whose values the manifest publishes
  (``RuleSet.allowed_values``, "kind.field") is an enum (a map field: its keys are);
* ``<Name>Event``: the payload of any event of its rooms (the room's own events included) as a player may
  receive it: a field the rule-set may hide from that player (its ``secrets``) is its value or
  ``{"hidden": true}``; a string field named as a command field with an enum takes that enum (``_carry_enums``);
* ``<Name>State``: the game's state, as an auditor reads it under ``state.game``;
* ``<Name>View``: what one player sees (``RuleSet.view_type``: ``shown_view``, as the API answers it), when the
  manifest declares it; its strings and the state's are enums from the rule data or marked free (events/schema.py);
* its creation options (``options_type``) and resolved setup (``setup_type``), under their own names (prefixed):
  ``names[name]["options"]`` / ``["setup"]`` name them, for a room's creation request;
* ``<Name>Resources``: what its Decider's ``resources(state)`` answers (``RuleSet.resources_type``; one of each
  installed version's when they differ);
* ``<Name><Model>Row``: a row of each read model it declares (``ReadModel.row_type``, over its versions), with the
  ``fork`` mark the projector adds to a sandbox fork's rows: ``names[name]["read_models"]`` maps model -> row.

A rule-set that declares no resources or row type (a plugin's choice) has that part documented as its own object.

Nothing here names a rule-set: a new game installed through the ``almanac.rulesets`` entry points is covered
by construction. The OpenAPI document (api_docs) and the AsyncAPI document (asyncapi) both use it.
"""

from __future__ import annotations

import copy
from typing import Any, get_origin

import msgspec

from almanac.events import registry
from almanac.events.disclosure import Hidden
from almanac.events.room import SEAT_EVENTS, NonceRevealed, PlayerJoined, RoomCreated, RoomEnded, RoomForked
from almanac.services.gateway.responses import ForkMark

HIDDEN_SCHEMA = "Hidden"
FORK_MARK = ForkMark.__name__  # services/gateway/responses.py's: a room summary's fork too


def prefix_of(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").replace(".", "_").split("_"))


def game_components(ref_prefix: str = "#/components/schemas/") -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """(per rule-set name: the component names of its ``command``, ``event`` and ``state`` unions, every component).

    The unions themselves are components too: ``<Name>Command``, ``<Name>Event``, ``<Name>State`` (the default
    version's), ``<Name>V<n>Command``... (another installed version's, where they differ). Each rule-set's
    ``versions`` maps every installed version to the names of its own parts."""
    components: dict[str, Any] = {}
    (hidden_ref,), found = msgspec.json.schema_components([Hidden], ref_template=f"{ref_prefix}{{name}}")
    components.update(found)
    _, found = msgspec.json.schema_components([ForkMark], ref_template=f"{ref_prefix}{{name}}")
    components.update(found)
    names: dict[str, Any] = {}
    for name in registry.hosted():
        prefix = prefix_of(name)
        ref = f"{ref_prefix}{prefix}{{name}}"
        default = registry.manifest(name)
        versions = [registry.at(name, version) for version in registry.versions(name)] or [default]
        # The default version first: its components keep the rule-set's own prefix, as they always had; another
        # version's are named ``<Name>V<n>...`` and kept only where they differ from an earlier version's.
        ordered = [default, *(manifest for manifest in versions if manifest.version != default.version)]
        names[name] = {part: [] for part in PARTS}
        names[name]["versions"] = {}
        prefixes: list[str] = []
        for manifest in ordered:
            own_prefix = f"{prefix}V{manifest.version}" if prefixes else prefix
            # the default version's parts, which later versions may share, are described as the rule-set's
            label = manifest.ref if prefixes else name
            own, parts = _version_components(label, manifest, own_prefix, hidden_ref, ref_prefix)
            renamed = _merge(components, own, own_prefix, prefixes, ref_prefix)
            parts = {part: renamed[component] for part, component in parts.items()}
            names[name]["versions"][manifest.version] = parts
            for part, component in parts.items():
                if component not in names[name][part]:
                    names[name][part].append(component)
            prefixes.append(own_prefix)
        names[name]["audit_step"] = _audit_steps(versions, components, ref, prefix)
        names[name]["resources"] = [_resources(name, versions, components, ref, prefix, ref_prefix)]
        names[name]["read_models"] = _read_model_rows(name, versions, components, ref, prefix, ref_prefix)
    return names, components


PARTS = ("command", "event", "state", "view", "options", "setup")


def _version_components(label: str, manifest: Any, prefix: str, hidden_ref: dict[str, Any],
                        ref_prefix: str) -> tuple[dict[str, Any], dict[str, str]]:
    """One version's components, every name under ``prefix``, and the names of its parts (``PARTS``); its unions'
    descriptions name ``label`` (the rule-set, or the version)."""
    decider = manifest.decider
    ref = f"{ref_prefix}{prefix}{{name}}"
    room_events = (RoomCreated[decider.setup_type], PlayerJoined, NonceRevealed, RoomEnded, RoomForked, *SEAT_EVENTS)
    event_types = (*room_events, *decider.event_types)
    views = (manifest.view_type,) if manifest.view_type is not None else ()
    groups = [decider.command_types, event_types, (decider.state_type,), views]
    schemas, found = msgspec.json.schema_components(
        [t for group in groups for t in group] + [decider.options_type, decider.setup_type], ref_template=ref)
    *schemas, options_ref, setup_ref = schemas
    view_ref = schemas[-1] if views else None
    if views:
        schemas = schemas[:-1]
    own = {f"{prefix}{key}": value for key, value in found.items()}
    _string_keys(own)
    command_refs = schemas[: len(decider.command_types)]
    event_refs = schemas[len(decider.command_types): len(decider.command_types) + len(event_types)]
    state_ref = schemas[-1]
    _publish_allowed_values(manifest, own, command_refs, ref_prefix)
    # the events whole (an auditor's, an audit step's) and as a player receives them
    whole, event_refs = event_refs, _player_events(decider, event_types, event_refs, own, hidden_ref, ref_prefix)
    _carry_enums(own, command_refs, [*whole, *event_refs], ref_prefix)
    parts = {part: _named(own, schema, f"{prefix}Create{part.capitalize()}", ref_prefix)
             for part, schema in (("options", options_ref), ("setup", setup_ref))}
    mapping = {t.__struct_config__.tag: s["$ref"] for t, s in zip(decider.command_types, command_refs, strict=True)}
    own[f"{prefix}Command"] = {
        "title": f"{prefix}Command", "description": f"A command of a {label} room, told apart by `kind`.",
        "oneOf": [{"$ref": r} for r in mapping.values()],
        "discriminator": {"propertyName": "kind", "mapping": mapping},
    }
    own[f"{prefix}Event"] = {
        "title": f"{prefix}Event",
        "description": f"The payload of an event of a {label} room (the envelope's `type` names which) as a "
                       "player may receive it: a field hidden from that player is `{\"hidden\": true}`.",
        "anyOf": event_refs,
    }
    own[f"{prefix}State"] = {"title": f"{prefix}State", "description": f"The state of a {label} game.",
                             **state_ref}
    # A game that declares no view type: its view is documented as an object of its own making.
    view = view_ref if view_ref is not None else {"type": "object"}
    own[f"{prefix}View"] = {"title": f"{prefix}View",
                            "description": f"What a player of a {label} room sees (its view).", **view}
    parts.update({part: f"{prefix}{part.capitalize()}" for part in ("command", "event", "state", "view")})
    return own, parts


def _merge(components: dict[str, Any], own: dict[str, Any], prefix: str, earlier: list[str],
           ref_prefix: str) -> dict[str, str]:
    """Add one version's components (named under ``prefix``) to ``components``, each that is the same as an earlier
    version's (``earlier`` prefixes, the rest of its name alike) taken as that one: the name each ends up with.

    "The same" is a bisimulation: a component is kept as the earlier one when, its references read as the
    components they are kept as, it equals it (its title and description aside: names, not types). Assumed of
    every candidate at first, dropped where it fails, until none fails: types that refer to each other, even in a
    cycle, are shared together."""
    renamed = {component: component for component in own}
    for other in earlier:  # the default version first, then each later one
        assumed = {component: f"{other}{component[len(prefix):]}" for component in own
                   if renamed[component] == component and f"{other}{component[len(prefix):]}" in components}
        changed = True
        while changed:
            changed = False
            reading = {**renamed, **assumed}
            for component, target in list(assumed.items()):
                if not _same(_renamed(own[component], reading, ref_prefix), components[target]):
                    del assumed[component]
                    changed = True
        renamed.update(assumed)
    for component, schema in own.items():
        final = renamed[component]
        if final != component:
            continue
        schema = _renamed(schema, renamed, ref_prefix)
        if component in components and not _same(schema, components[component]):
            raise ValueError(f"the API documents name two different schemas {component}: rename a rule-set")
        components[component] = schema
    return renamed


def _same(one: dict[str, Any], other: dict[str, Any]) -> bool:
    plain = ("title", "description")
    return ({k: v for k, v in one.items() if k not in plain} == {k: v for k, v in other.items() if k not in plain})


def _renamed(schema: Any, renamed: dict[str, str], ref_prefix: str) -> Any:
    """``schema`` with every reference to a component of ``renamed`` pointing at the name it ends up with."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(ref_prefix):
                value = f"{ref_prefix}{renamed.get(value[len(ref_prefix):], value[len(ref_prefix):])}"
            elif key == "discriminator" and isinstance(value, dict) and "mapping" in value:  # references too
                value = {**value, "mapping": {tag: _renamed({"$ref": target}, renamed, ref_prefix)["$ref"]
                                              for tag, target in value["mapping"].items()}}
            else:
                value = _renamed(value, renamed, ref_prefix)
            out[key] = value
        return out
    if isinstance(schema, list):
        return [_renamed(value, renamed, ref_prefix) for value in schema]
    return schema


def _distinct(types: list[Any]) -> list[Any]:
    return list(dict.fromkeys(types))


def _declared(components: dict[str, Any], types: list[type], ref: str, prefix: str) -> list[str]:
    """Register the schemas of ``types`` (prefixed, as the rule-set's other parts) and name their components."""
    refs, found = msgspec.json.schema_components(types, ref_template=ref)
    own = {f"{prefix}{key}": value for key, value in found.items()}
    _string_keys(own)
    for name, schema in own.items():
        # a record the events share (realm's Transfer) keeps the enums _carry_enums gave it there
        if name not in components or _without_enums(components[name]) != _without_enums(schema):
            components[name] = schema
    return [r["$ref"].rsplit("/", 1)[-1] for r in refs]


def _without_enums(schema: Any) -> Any:
    """``schema`` without any string enum (``_set_enum``'s, or the rule data's a type declares): two schemas alike
    but for those are one record, kept with the enums it was given first."""
    if isinstance(schema, dict):
        plain = {key: _without_enums(value) for key, value in schema.items()
                 if not (key == "enum" and schema.get("type") == "string")}
        if "propertyNames" in schema:  # a map's keys: their enum is _set_enum's, any other bound msgspec's
            keys = {key: value for key, value in schema["propertyNames"].items() if key != "enum"}
            if keys:
                plain["propertyNames"] = keys
            else:
                del plain["propertyNames"]
        return plain
    if isinstance(schema, list):
        return [_without_enums(value) for value in schema]
    return schema


def _union(title: str, description: str, members: list[str], ref_prefix: str) -> dict[str, Any]:
    if len(members) == 1:
        return {"title": title, "description": description, "$ref": f"{ref_prefix}{members[0]}"}
    return {"title": title, "description": description, "anyOf": [{"$ref": f"{ref_prefix}{m}"} for m in members]}


def _resources(name: str, versions: list[Any], components: dict[str, Any], ref: str, prefix: str,
               ref_prefix: str) -> str:
    """``<Name>Resources``: one of the resources types the installed versions declare."""
    title = f"{prefix}Resources"
    description = f"Every player's resources and holdings in a {name} room (its rule-set's `resources`)."
    types = _distinct([manifest.resources_type for manifest in versions])
    if None in types:  # a version that declares none: its resources are documented as its own object
        components[title] = {"title": title, "description": description, "type": "object"}
    else:
        components[title] = _union(title, description, _declared(components, types, ref, prefix), ref_prefix)
    return title


def _read_model_rows(name: str, versions: list[Any], components: dict[str, Any], ref: str, prefix: str,
                     ref_prefix: str) -> dict[str, str]:
    """Model name -> ``<Name><Model>Row``, a row of that read model (one of its versions' row types)."""
    found: dict[str, list[Any]] = {}
    for manifest in versions:
        for model in manifest.read_models:
            row_types = model.row_type if isinstance(model.row_type, tuple) else (model.row_type,)
            found.setdefault(model.name, []).extend(row_types)
    rows: dict[str, str] = {}
    for model, types in found.items():
        title = f"{prefix}{prefix_of(model)}Row"
        description = f"A row of the {model} read model of {name} rooms."
        types = _distinct(types)
        if None in types:
            components[title] = {"title": title, "description": description, "type": "object"}
        else:
            members = _declared(components, types, ref, prefix)
            for member in members:  # the projector marks every row of a sandbox fork (projections/read_model_rows.py)
                components[member].setdefault("properties", {})["fork"] = {
                    "$ref": f"{ref_prefix}{FORK_MARK}",
                    "description": "set on a sandbox fork's rows: its parent room and the version it starts from"}
            components[title] = _union(title, description, members, ref_prefix)
        rows[model] = title
    return rows


def _audit_steps(versions: list[Any], components: dict[str, Any], ref: str, prefix: str) -> list[str] | None:
    """The component names of the steps the rule-set's audit views tell (their ``step_types``, over its installed
    versions); None when one of its views declares none (its steps are then only known to be objects)."""
    views = [view for manifest in versions for view in manifest.audit_views]
    if any(not view.step_types for view in views):
        return None
    step_types = _distinct([t for view in views for t in view.step_types])
    if not step_types:
        return []
    return _declared(components, step_types, ref, prefix)


def _string_keys(schema: Any) -> None:
    """A map's key constraints (msgspec writes a constrained key's ``propertyNames`` without its type) say they
    are strings: JSON object keys always are."""
    if isinstance(schema, dict):
        names = schema.get("propertyNames")
        if isinstance(names, dict) and not names.keys() & {"type", "enum", "const", "$ref", "anyOf"}:
            names["type"] = "string"
        for value in schema.values():
            _string_keys(value)
    elif isinstance(schema, list):
        for value in schema:
            _string_keys(value)


def _named(components: dict[str, Any], schema: dict[str, Any], name: str, ref_prefix: str) -> str:
    """The component name of a schema: its own when it is a reference, else ``name`` (registered)."""
    if "$ref" in schema:
        return schema["$ref"][len(ref_prefix):]
    components[name] = schema
    return name


def _component(components: dict[str, Any], ref: dict[str, Any], ref_prefix: str) -> dict[str, Any]:
    return components[ref["$ref"][len(ref_prefix):]]


def _publish_allowed_values(manifest: Any, components: dict[str, Any], command_refs: list[dict[str, Any]],
                            ref_prefix: str) -> None:
    by_kind = {t.__struct_config__.tag: ref for t, ref in zip(manifest.decider.command_types, command_refs, strict=True)}
    for path, values in manifest.allowed_values.items():
        kind, _, field = path.partition(".")
        if kind not in by_kind:
            raise ValueError(f"{manifest.ref}: allowed_values names {path!r}, but it has no command {kind!r}")
        properties = _component(components, by_kind[kind], ref_prefix).get("properties", {})
        if field not in properties:
            raise ValueError(f"{manifest.ref}: allowed_values names {path!r}, but {kind} has no field {field!r}")
        _set_enum(properties[field], list(values), path)


def _enum_values(schema: dict[str, Any]) -> list[str] | None:
    """The values ``_set_enum`` gave a field (a string's, an optional string's, a map's keys'), or None."""
    if "enum" in schema:
        return schema["enum"]
    if "enum" in schema.get("propertyNames", {}):
        return schema["propertyNames"]["enum"]
    return next((member["enum"] for member in schema.get("anyOf", []) if "enum" in member), None)


def _carry_enums(components: dict[str, Any], command_refs: list[dict[str, Any]], roots: list[dict[str, Any]],
                 ref_prefix: str) -> None:
    """Every string field (or map, or optional string) of the events, at any depth, named as a command field whose
    values the manifest publishes, takes those values as its enum: an event records what the command named under
    the same name (``Mined.ore`` is ``mine.ore``). Where two commands publish one name with different values
    (``mine.ore``, ``smelt.ore``), the field takes them all, in the order they come. By construction: no list
    names an event's fields, a new rule-set's events are covered. Not the view nor the state: they keep what the
    rules fold, not what a command named, under names that need not match (realm's merchant ``want`` is the
    offer's ``pay``); their types name their words themselves, from the rule data (``events.schema.one_of``, or
    ``free`` on purpose). tests/gateway/test_typed_schemas.py holds real events to these enums,
    tests/gateway/test_typed_views.py real views and states to theirs."""
    by_name: dict[str, list[str]] = {}
    for ref in command_refs:
        for name, field in _component(components, ref, ref_prefix).get("properties", {}).items():
            values = _enum_values(field)
            if values is not None:
                by_name[name] = list(dict.fromkeys([*by_name.get(name, []), *values]))
    if not by_name:
        return
    seen: set[str] = set()

    def walk(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                walk(item)
            return
        if not isinstance(schema, dict):
            return
        target = schema.get("$ref", "")
        if target.startswith(ref_prefix) and target[len(ref_prefix):] in components:
            name = target[len(ref_prefix):]
            if name not in seen:  # a record several events share is given its enums once
                seen.add(name)
                walk(components[name])
            return
        for name, field in schema.get("properties", {}).items():
            if name in by_name and _enum_values(field) is None and _holds_strings(field):
                _set_enum(field, by_name[name], name)
        for key in ("properties", "anyOf", "oneOf", "items", "prefixItems", "additionalProperties", "$defs"):
            inner = schema.get(key)
            walk(list(inner.values()) if key in ("properties", "$defs") and isinstance(inner, dict) else inner)

    walk(roots)


def _holds_strings(schema: dict[str, Any]) -> bool:
    """A field ``_set_enum`` can give values: a string, an optional string, or a map (its keys)."""
    return (schema.get("type") == "string" or (schema.get("type") == "object" and "additionalProperties" in schema)
            or any(_holds_strings(member) for member in schema.get("anyOf", [])))


def _set_enum(schema: dict[str, Any], values: list[str], path: str) -> None:
    """The string (or the string member of an optional, or a map's keys) takes exactly ``values``."""
    if schema.get("type") == "string":
        schema["enum"] = values
    elif schema.get("type") == "object" and "additionalProperties" in schema:
        schema["propertyNames"] = {**schema.get("propertyNames", {}), "enum": values}
    elif "anyOf" in schema:
        strings = [member for member in schema["anyOf"] if member.get("type") == "string"
                   or (member.get("type") == "object" and "additionalProperties" in member)]
        if not strings:
            raise ValueError(f"allowed_values {path!r}: the field holds no string")
        for member in strings:
            _set_enum(member, values, path)
    else:
        raise ValueError(f"allowed_values {path!r}: the field is not a string or a map")


def _player_events(decider: Any, event_types: tuple[type, ...], event_refs: list[dict[str, Any]],
                   components: dict[str, Any], hidden_ref: dict[str, Any], ref_prefix: str) -> list[dict[str, Any]]:
    """Each event's schema as a player may receive it: where the rule-set hides fields, a copy of the event's
    schema with each such field (dotted paths go into nested records, copied inline) its value or Hidden."""
    shown: list[dict[str, Any]] = []
    for event_type, ref in zip(event_types, event_refs, strict=True):
        # A room's own generic events are declared secret by their bare class (``RoomCreated``, not its
        # ``RoomCreated[Setup]`` the schema is built from).
        declared = decider.secrets.get(event_type) or decider.secrets.get(get_origin(event_type), ())
        paths = [name for secret in declared for name in secret.fields]
        if not paths:
            shown.append(ref)
            continue
        name = ref["$ref"][len(ref_prefix):]
        seen_name = f"{name}AsSeen"
        seen = copy.deepcopy(components[name])
        for path in paths:
            _hideable(seen, path.split("."), components, hidden_ref, ref_prefix)
        seen["title"] = f"{seen.get('title', name)} (as a player sees it)"
        components[seen_name] = seen
        shown.append({"$ref": f"{ref_prefix}{seen_name}"})
    return shown


def _hideable(schema: dict[str, Any], path: list[str], components: dict[str, Any], hidden_ref: dict[str, Any],
              ref_prefix: str) -> None:
    head, *rest = path
    properties = schema.get("properties", {})
    if head not in properties:
        return
    if not rest:
        properties[head] = {"anyOf": [properties[head], hidden_ref]}
        return
    inner = properties[head]
    if "$ref" in inner:  # a nested record: copied inline so only this event's copy may hold Hidden
        inner = copy.deepcopy(_component(components, inner, ref_prefix))
        properties[head] = inner
    _hideable(inner, rest, components, hidden_ref, ref_prefix)
