"""The strict decoding boundary, as properties over every command and options schema of every rule-set.

Given any value built from a command's (or options') own type, when it is encoded and decoded, then
it comes back equal. Given the same value mutated the way a hostile client would (an unknown field,
an integer out of range or beyond 64 bits, a wrong type, deep nesting), when it is decoded, then
the only thing that can happen is an InvalidCommand naming a field: never another exception, never
a Struct.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from schema_strategies import builtins_for

from almanac.events import codec, registry
from almanac.events.errors import InvalidCommand
from almanac.events.room import ROOM_COMMANDS, convert_options

RULESETS = sorted(registry.installed())
# The room's own commands once (join_room, end_room; create_room is checked with the options), then
# every rule-set's commands.
ROOM_KINDS = {t.__struct_config__.tag for t in ROOM_COMMANDS}
COMMANDS = [("board", kind) for kind in sorted(ROOM_KINDS - {"create_room"})] + [
    (ruleset, kind) for ruleset in RULESETS for kind in codec.command_kinds(ruleset) if kind not in ROOM_KINDS
]
BOUNDARY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def command_type(ruleset: str, kind: str) -> type:
    return next(t for t in (*ROOM_COMMANDS, *registry.get(ruleset).command_types)
                if t.__struct_config__.tag == kind)


def valid_commands(ruleset: str, kind: str) -> st.SearchStrategy[dict]:
    """Commands of one kind as JSON builtins, drawn from the Struct's own constraints."""
    return builtins_for(command_type(ruleset, kind))


def valid_options(ruleset: str) -> st.SearchStrategy[dict]:
    return builtins_for(registry.get(ruleset).options_type)


HOSTILE_VALUES = st.one_of(
    st.integers(min_value=2**63 - 2, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-(2**63) + 2),
    st.just(10**30),
    st.lists(st.none(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.none(), max_size=2),
    st.text(min_size=65, max_size=300),
    st.floats(allow_nan=True),
    st.booleans(),
)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[dict], *, keep_kind: bool) -> tuple[dict, str, bool]:
    """A valid body with one hostile change: the body, the top-level field it touched, and whether that
    field is unknown (always refused) rather than a known one given a hostile value."""
    body = dict(draw(valid))
    fields = [name for name in body if not (keep_kind and name == "kind")]
    how = draw(st.sampled_from(["unknown", "replace"] if fields else ["unknown"]))
    if how == "unknown":
        name = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=80)
                    .filter(lambda n: n not in body and n != "kind"))
        body[name] = draw(st.one_of(HOSTILE_VALUES, st.integers()))
        return body, name, True
    name = draw(st.sampled_from(sorted(fields)))
    value = draw(HOSTILE_VALUES)
    if isinstance(body[name], list | tuple) and value in ([], ()):
        value = 10**30  # an empty list where a list belongs is no mutation
    body[name] = value
    return body, name, False


def decode_or_invalid(ruleset: str | None, body: dict) -> object:
    """What the boundary answers: a Struct, or an InvalidCommand (any other exception fails the test)."""
    try:
        return codec.decode_command(ruleset, body)
    except InvalidCommand as error:
        return error


@pytest.mark.parametrize(("ruleset", "kind"), COMMANDS)
def test_every_valid_command_round_trips_through_json_and_msgpack(ruleset: str, kind: str) -> None:
    @BOUNDARY
    @given(valid_commands(ruleset, kind))
    def round_trip(body: dict) -> None:
        command = codec.decode_command(ruleset, body)
        assert codec.decode_command(ruleset, codec.encode(command)) == command
        assert codec.decode_command(ruleset, msgspec.json.decode(msgspec.json.encode(body))) == command
        assert codec.decode_command(ruleset, codec.encode_command(command)) == command

    round_trip()


@pytest.mark.parametrize(("ruleset", "kind"), COMMANDS)
def test_every_mutated_command_is_refused_naming_a_field(ruleset: str, kind: str) -> None:
    @BOUNDARY
    @given(mutated(valid_commands(ruleset, kind), keep_kind=True))
    def refused(case: tuple[dict, str, bool]) -> None:
        body, field, unknown = case
        answer = decode_or_invalid(ruleset, body)
        assert isinstance(answer, InvalidCommand) or not unknown, f"unknown field {field!r} was accepted"
        if not isinstance(answer, InvalidCommand):
            # Only a replacement the type allows (a bool for a bool, a long text where any text goes)
            # may pass; it must then still encode, i.e. fit 64 bits.
            codec.encode(answer)
            return
        assert answer.code == "invalid_command" and answer.field, answer.to_dict()
        assert answer.field.split(".")[0].split("[")[0] == field[:64] or answer.field.startswith(field[:64])
        assert len(answer.message) < 600

    refused()


@pytest.mark.parametrize("ruleset", RULESETS)
def test_every_valid_options_value_decodes_and_every_mutated_one_is_refused(ruleset: str) -> None:
    @BOUNDARY
    @given(valid_options(ruleset), mutated(valid_options(ruleset), keep_kind=False))
    def check(options: dict, case: tuple[dict, str, bool]) -> None:
        create = {"kind": "create_room", "ruleset": ruleset, "options": options}
        assert codec.decode_command(None, create).options == options
        bad, field, unknown = case
        answer = decode_or_invalid(None, {**create, "options": bad})
        assert isinstance(answer, InvalidCommand) or not unknown, f"unknown option {field!r} was accepted"
        if isinstance(answer, InvalidCommand):
            assert answer.code == "invalid_options" and answer.field.startswith("options."), answer.to_dict()
        else:  # only a replacement the type allows passes; it must still fit 64 bits
            codec.encode(convert_options(registry.get(ruleset), bad))

    check()


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=30),
       st.sampled_from([None, *RULESETS]))
@BOUNDARY
def test_any_json_value_as_a_command_is_a_struct_or_invalid(value: object, ruleset: str | None) -> None:
    for body in (value, {"kind": value}, {"kind": "create_room", "ruleset": "realm", "options": value}):
        decode_or_invalid(ruleset, body)  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [33, 1_000, 100_000])
def test_deep_nesting_is_found_without_parsing(depth: int) -> None:
    assert codec.json_depth_exceeds(b'{"command": ' + b"[" * depth + b"]" * depth + b"}")
    assert not codec.json_depth_exceeds(b'{"a": "' + b"[" * depth + b'"}')
    assert not codec.json_depth_exceeds(b"[" * 32 + b"]" * 32)


def test_every_integer_field_declares_a_range_in_the_json_schema() -> None:
    """No integer without bounds: each appears with minimum and maximum in the published schema."""
    unbounded = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "integer" and ("minimum" not in node or "maximum" not in node):
                unbounded.append(where)
            for key, value in node.items():
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}[{index}]")

    for ruleset in RULESETS:
        walk(codec.command_schema(ruleset), ruleset)
        walk(msgspec.json.schema(registry.get(ruleset).options_type), f"{ruleset}.options")
    assert unbounded == []


@pytest.mark.parametrize("ruleset", RULESETS)
def test_a_game_command_for_a_room_with_no_events_is_refused_as_a_missing_room_unrecorded(ruleset: str) -> None:
    """Given no room, when any rule-set's game command arrives for it, then the refusal names the room (not the
    command kind, which no rules read yet), and it is an InvalidCommand: nothing is recorded for it."""
    from almanac.events.envelope import GENESIS_HASH  # noqa: PLC0415
    from almanac.events.step import CommandRecord, step  # noqa: PLC0415

    kind = next(kind for kind in codec.command_kinds(ruleset) if kind not in ROOM_KINDS)
    record = CommandRecord(command_id="c1", room="nowhere", player="p", server_time_ms=0, body={"kind": kind})
    with pytest.raises(InvalidCommand) as refused:
        step(None, GENESIS_HASH, record, None)
    assert (refused.value.code, refused.value.field) == ("room_not_found", "room")
