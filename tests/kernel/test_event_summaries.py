"""Every event type of every installed rule-set, and the room's own events, reads as one human line.

`almanac log`, the console's timeline and the gateway's auditor events all show ``room.summarize_event``;
a summary that falls back to the event's raw data (``{'city': ...}``, ``Struct(...)``) is a bug.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from almanac.events import registry, room as room_rules
from almanac.events.decider import event_tag

# Plausible values a real game could store, by field name (a table key where a summary looks one up).
WORDS = {
    "city": "Avalon", "home": "Avalon", "host": "Brega", "at": "Brega", "attacker": "Corvo",
    "defender": "Brega", "by": "Brega", "to": "Corvo", "controller": "Corvo", "player": "alice",
    "ore": "iron", "found": "iron", "resource": "gold", "buy": "iron", "pay": "gold", "want": "gold",
    "season": "summer", "next_season": "autumn", "method": "hunt", "tier": "bronze", "metal": "bronze",
    "trade_id": "trade-4", "reason": "the merchant was intercepted", "source": "Avalon", "target": "Brega",
    "species": "df", "grade": "sawlog", "building": "farm", "sector_type": "plains", "name": "spring",
    "terrain": "forest", "card": "A", "outcome": "found", "ruleset": "board", "created_by": "nina",
    "moons": "", "multiplier": "3/2", "rate": "1", "moon": "", "if_taken": "vassal", "forced_by": "",
    "revealed_seed": "c0ffee", "seed_commitment": "ab12", "mission": "edge_of_the_forest", "challenge": "weekly-1",
}
STOCK = {"gold": 2000, "iron": 1000}


def _value(name: str, info: msgspec.inspect.Type, owner: str) -> Any:
    t = msgspec.inspect
    if isinstance(info, t.Metadata):  # a schema mark (events/schema.py one_of, free): a value it allows
        allowed = (info.extra_json_schema or {}).get("enum")
        return allowed[0] if allowed else _value(name, info.type, owner)
    if isinstance(info, t.UnionType):
        choices = [member for member in info.types if not isinstance(member, t.NoneType)]
        return _value(name, choices[0], owner)
    if isinstance(info, t.LiteralType):
        return info.values[0]
    if isinstance(info, t.BoolType):
        return True
    if isinstance(info, t.IntType):
        return 3
    if isinstance(info, t.FloatType):
        return 1.5
    if isinstance(info, t.StrType):
        return WORDS.get(name, f"{name}-1")
    if isinstance(info, t.DictType):
        return dict(STOCK)
    if isinstance(info, t.TupleType | t.ListType | t.VarTupleType):
        if isinstance(info, t.TupleType):
            return tuple(_value(name, item, owner) for item in info.item_types)
        if name in ("dice", "attack_dice", "defence_dice", "army_dice", "merchant_dice", "faces"):
            return ("star", "moon", "skull")
        return (_value(name, info.item_type, owner),)
    if isinstance(info, t.StructType):
        return _instance(info.cls)
    if isinstance(info, t.AnyType):
        return {}
    raise AssertionError(f"{owner}.{name}: no plausible value for {info}")


def _instance(cls: type) -> Any:
    info = msgspec.inspect.type_info(cls)
    values = {field.name: _value(field.name, field.type, cls.__name__) for field in info.fields}
    return cls(**values)


def _room_events(ruleset: str) -> list[Any]:
    decider = registry.get(ruleset)
    setup = decider.setup(decider.options_type(), _context())
    return [
        room_rules.RoomCreated(ruleset=ruleset, setup=setup, seed_commitment="ab12", challenge=None,
                               created_by="nina", created_at_ms=0),
        room_rules.PlayerJoined(player="alice"),
        room_rules.RoomEnded(reason="ended by a player", revealed_seed="c0ffee"),
    ]


def _context() -> Any:
    from almanac.events.decider import Context
    from almanac.events.dice import Dice

    return Context(room="r1", player="nina", now_ms=1_700_000_000_000, version=1, dice=Dice(b"seed", "salt", 1))


RAW = re.compile(r"[{}]|Struct\(|\w+\(\w+=|<.*object at|'[a-z_]+':|\[\(|\(\)|\b[a-z_]+=")


def _cases() -> list[tuple[str, Any]]:
    cases = []
    for name in registry.installed():
        decider = registry.get(name)
        cases += [(name, _instance(event_type)) for event_type in decider.event_types]
        cases += [(name, event) for event in _room_events(name)]
    return cases


CASES = _cases()


@pytest.mark.parametrize(("ruleset", "event"), CASES, ids=[f"{n}:{event_tag(e)}" for n, e in CASES])
def test_every_event_reads_as_one_human_line(ruleset: str, event: Any) -> None:
    line = room_rules.summarize_event(ruleset, event)
    assert isinstance(line, str) and line.strip() == line and line
    assert "\n" not in line, line
    assert not RAW.search(line), f"raw data in the summary of {event_tag(event)}: {line}"
    assert line != event_tag(event) and type(event).__name__ not in line, f"only the event's name: {line}"
    assert len(line) <= 200, line
    # It says something specific: a value the event carries (a name, a number), not just what kind it is.
    carried = {str(v) for v in msgspec.to_builtins(event).values() if isinstance(v, str | int) and v != ""}
    carried |= {str(v) for v in WORDS.values()} | {"3", "2000", "1000", "2", "6", "9", "1"}
    assert any(value in line for value in carried if len(value) > 0), line


def test_every_installed_ruleset_is_covered() -> None:
    assert {"board", "claim", "realm", "sectors"} <= set(registry.installed())
    covered = {(ruleset, event_tag(event)) for ruleset, event in CASES}
    for name in registry.installed():
        for event_type in registry.get(name).event_types:
            assert (name, event_tag(event_type)) in covered


def test_an_event_the_server_clock_caused_says_so_and_a_players_does_not() -> None:
    # Given a season that ended because its deadline passed: the clock sent the timeout as the first seat (alice)
    ruleset, event = next((r, e) for r, e in CASES if event_tag(e) == "realm.season_ended")
    by_clock = room_rules.deadline_command_id("r1", "season", "alice")
    # When its line is written for the log, Then it says the clock sent it; for a player's own command it does not
    assert room_rules.summarize_recorded(ruleset, event, by_clock).endswith(
        "[sent by the server clock: a deadline passed]")
    assert room_rules.summarize_recorded(ruleset, event, "r1:alice:1") == room_rules.summarize_event(ruleset, event)
