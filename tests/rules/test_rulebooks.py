"""Every rulebook says what its rules do: its refusal tables name exactly the codes the rules raise, and every
example it gives plays as written.

The rulebooks are found as the rules are (each installed version's manifest names its ``rulebook`` and
its ``examples``), and what they promise is read from them:

- every markdown table with a ``code`` column is a refusal table; its backticked ``<name>.<code>`` cells
  are the codes (``<resource>`` stands for any word). The codes the rules raise are read from the
  rule-set's package source: the first argument of every ``RuleError(...)`` and every other
  ``"<name>.<word>"`` literal that is not an event tag (a code handed to a helper);
- every refusal row that names a code of the rule-set gives an ``example command``, or says in that cell
  why none can be given: ``(none: <why>)``, for a code the public commands never reach (the room or the
  input boundary refuses the command first);
- a row's example is played in the example room the rulebook describes ("played by `player` in a room
  created with options `{...}`"), and must be refused with the row's code, a field the row names (an
  empty field cell when the refusal names none) and exactly the example message;
- the manifest's example scenarios (``examples/*.jsonl``) are played, and the commands refused are
  exactly those announced by a ``# refused (<code>)`` comment, with that code.

An ``example command`` cell is one command, or, for a refusal that the example room does not give at once,
a small story:

    [at <n> s|h: ]`{command}`[ by `player`][ in a room created with options `{...}`][ after <step>, <step>, ...]

where a ``<step>`` is ``[at <n> s|h: ]`{command}`[ by `player`]``, or ``*name*`` for the steps of a situation
the rulebook names below its table ("the situation *name*: <step>, <step>, ...": a long story kept out of
the table). ``by`` names who plays (else the room's player); ``at`` the server time (the example room is
created at 1 s; without ``at`` a command is played at the time of the last accepted one); ``in a room
created with options`` other options than the rulebook's room; ``after`` the steps played first, in order,
each of which must be accepted (the room's player has joined; anyone else joins with a step
``{"kind": "join_room"}``). An example with neither ``after`` nor its own room is played in one shared
room (a refusal changes nothing, its clock included), one with either in a fresh room, and an example
``create_room`` on its own.
"""

from __future__ import annotations

import ast
import asyncio
import fnmatch
import json
import re
from importlib import import_module, resources
from pathlib import Path

import msgspec
import pytest

from almanac.events import registry
from almanac.events.decider import event_tag
from almanac.events.errors import RuleError
from almanac.events.testing import RoomDriver
from almanac.services.cli.sim_commands import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[2]
RULESETS = [manifest for manifest in registry.all_manifests() if manifest.rulebook]


def rulebook(manifest) -> str:
    """The rulebook as it holds for ``manifest``'s version: without the sections of later versions ("## Version 2
    (`board@2`)": what board@2 adds, which board@1's code does not raise)."""
    kept, later = [], False
    for line in (ROOT / manifest.rulebook).read_text().splitlines():
        if line.startswith("## "):
            version = re.match(r"## Version (\d+)\b", line)
            later = version is not None and int(version.group(1)) > manifest.version
        if not later:
            kept.append(line)
    return "\n".join(kept)


def tables(doc: str) -> list[list[dict[str, str]]]:
    """Every markdown table of ``doc`` as rows of {header: cell}."""
    found: list[list[dict[str, str]]] = []
    header: list[str] | None = None
    for line in doc.splitlines() + [""]:
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            found.append([])
        elif not all(set(cell) <= set("-: ") for cell in cells):
            found[-1].append(dict(zip(header, cells, strict=False)))
    return found


def refusal_rows(manifest) -> list[dict[str, str]]:
    return [row for table in tables(rulebook(manifest)) for row in table if "code" in row]


def codes_in(text: str, name: str) -> set[str]:
    """The backticked codes of rule-set ``name`` in ``text``; a ``<placeholder>`` becomes ``*``."""
    return {re.sub(r"<[a-z_]+>", "*", code) for code in re.findall(rf"`({name}\.[a-z_<>]+)`", text)}


def documented_codes(manifest) -> set[str]:
    return {code for row in refusal_rows(manifest) for code in codes_in(row["code"], manifest.name)}


def source_trees(manifest) -> list[ast.Module]:
    """The parsed modules of the package the manifest's rules live in (the package its fingerprint hashes)."""
    module_name = manifest.source or type(manifest.decider).__module__
    module = import_module(module_name)
    package = module_name if hasattr(module, "__path__") else module.__package__

    def walk(folder) -> list:
        found = []
        for entry in folder.iterdir():
            if entry.is_dir():
                found += walk(entry)
            elif entry.name.endswith(".py"):
                found.append(ast.parse(entry.read_text()))
        return found

    return walk(resources.files(package))


def raised_codes(manifest) -> set[str]:
    name = manifest.name
    # Event tags of every version of the rule-set: a later version's package holds an earlier's (board@2's, board@1's).
    tags = {event_tag(kind) for version in registry.versions(name)
            for kind in registry.at(name, version).decider.event_types}
    codes: set[str] = set()
    for tree in source_trees(manifest):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RuleError" and node.args:
                first = node.args[0]
                if isinstance(first, ast.JoinedStr):  # f"realm.not_enough_{resource}"
                    codes.add("".join(p.value if isinstance(p, ast.Constant) else "*" for p in first.values))
                elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                    codes.add(first.value)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value not in tags:
                codes.add(node.value)
    return {code for code in codes if re.fullmatch(rf"{name}\.[a-z_*]*[a-z*]", code)}  # not an f-string's head


@pytest.mark.parametrize("manifest", RULESETS, ids=[manifest.ref for manifest in RULESETS])
def test_a_rulebooks_refusal_tables_name_exactly_the_codes_its_rules_raise(manifest) -> None:
    documented, raised = documented_codes(manifest), raised_codes(manifest)

    assert documented, f"{manifest.rulebook} has no refusal table (a table with a 'code' column)"
    assert sorted(documented - raised) == [], f"{manifest.rulebook} names codes {manifest.ref} never raises"
    assert sorted(raised - documented) == [], f"{manifest.ref} raises codes {manifest.rulebook} does not name"


EXAMPLE_ROOM = re.compile(r"played by `([^`]+)` in a room created with options `(\{[^`]*\})`")
STEP = re.compile(r"(?:at (\d+) (s|h): )?`(\{[^`]*\})`(?: by `([^`]+)`)?")
UNIT_MS = {"s": 1_000, "h": 3_600_000}
CREATED_AT_MS = 1_000
SITUATION = re.compile(r"the situation \*([^*]+)\*: ((?:(?:at \d+ [sh]: )?`\{[^`]*\}`(?: by `[^`]+`)?(?:, )?)+)")


def refused(driver: RoomDriver, player: str, body: dict, now_ms: int | None) -> RuleError:
    clock = driver.now_ms
    try:
        driver.play(player, body, now_ms=now_ms)
    except RuleError as error:
        driver.now_ms = clock  # a refused command changes nothing, the room's clock included
        return error
    raise AssertionError(f"{body} was accepted")


def example_rows(manifest) -> list[dict[str, str]]:
    return [row for row in refusal_rows(manifest) if STEP.match(row.get("example command", ""))]


def steps_of(text: str, player: str) -> list[tuple[str, dict, int | None]]:
    """(player, command, server time or None) of every step in ``text``, a comma-separated list of steps."""
    return [(by or player, json.loads(body), int(at) * UNIT_MS[unit] if at else None)
            for at, unit, body, by in STEP.findall(text)]


def situations(doc: str) -> dict[str, str]:
    """The rulebook's named situations ("the situation *name*: `{...}`, `{...}`"): name -> its steps."""
    return dict(SITUATION.findall(" ".join(doc.split())))


def parse_example(cell: str, player: str, named: dict[str, str] | None = None) -> tuple[tuple, dict | None, list]:
    """An example command cell as (the command's step, the room's options if other, the steps played first)."""
    head, _, after = cell.partition(" after ")
    after = re.sub(r"\*([^*]+)\*", lambda name: (named or {})[name.group(1)], after)
    head, _, room = head.partition(" in a room created with options ")
    (step,) = steps_of(head, player)
    options = json.loads(room.strip("` ")) if room else None
    return step, options, steps_of(after, player)


@pytest.mark.parametrize("manifest", RULESETS, ids=[manifest.ref for manifest in RULESETS])
def test_every_refusal_code_has_an_example_or_says_why_none_can_be_given(manifest) -> None:
    missing = [row["code"] for row in refusal_rows(manifest)
               if codes_in(row["code"], manifest.name)
               and not STEP.match(row.get("example command", ""))
               and not row.get("example command", "").startswith("(none: ")]
    assert missing == [], f"{manifest.rulebook}: refusals with neither an example nor a reason for none"


@pytest.mark.parametrize("manifest", RULESETS, ids=[manifest.ref for manifest in RULESETS])
def test_every_refusal_example_is_refused_with_its_code_field_and_message(manifest) -> None:
    rows = example_rows(manifest)
    assert rows, f"{manifest.rulebook} gives no example commands"
    room = EXAMPLE_ROOM.search(" ".join(rulebook(manifest).split()))
    assert room, f"{manifest.rulebook} gives examples but not the room they are played in"
    player, options = room.group(1), json.loads(room.group(2))
    named = situations(rulebook(manifest))

    def new_room(create: dict) -> RoomDriver:
        driver = RoomDriver(f"{manifest.name}-examples", b"rulebook examples seed 32 bytes!", CREATED_AT_MS)
        driver.play(player, {**create, "kind": "create_room", "ruleset": manifest.ref})
        return driver

    def joined(room_options: dict) -> RoomDriver:
        driver = new_room({"options": room_options})
        driver.play(player, {"kind": "join_room"})
        return driver

    table = joined(options)
    for row in rows:
        (by, command, at_ms), room_options, before = parse_example(row["example command"], player, named)
        (code,) = codes_in(row["code"], manifest.name)
        if command["kind"] == "create_room":
            with pytest.raises(RuleError) as creating:
                new_room(command)
            error = creating.value
        elif room_options is None and not before:
            error = refused(table, by, command, at_ms)
        else:
            situation = joined(options if room_options is None else room_options)
            for step_by, step, step_at_ms in before:
                situation.play(step_by, step, now_ms=step_at_ms)
            error = refused(situation, by, command, at_ms)
        assert fnmatch.fnmatchcase(error.code, code), (command, error.code, error.message)
        assert error.message == row["example message"], (command, error.code)
        if error.field is None:
            assert not row["field"].strip(), (command, "names no field")
        else:
            assert f"`{error.field}`" in row["field"], (command, error.field)


ANNOUNCED = re.compile(r"^#\s*refused \(([a-z_.]+)\)", re.IGNORECASE)


@pytest.mark.parametrize("manifest", RULESETS, ids=[manifest.ref for manifest in RULESETS])
def test_every_example_scenario_is_refused_exactly_where_it_says_and_with_that_code(manifest) -> None:
    assert manifest.examples, f"{manifest.ref} names no example scenario"
    for example in manifest.examples:
        path = ROOT / example
        announced: dict[int, str] = {}
        pending = None
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            said = ANNOUNCED.match(line)
            if said:
                pending = said.group(1)
            elif line.strip() and not line.startswith("#"):
                if pending is not None:
                    announced[number] = pending
                pending = None
        header, moves = load_scenario(path)
        # Every version that names the example plays it (the file's own header names the bare rule-set)
        played, _ = asyncio.run(run_scenario(msgspec.structs.replace(header, ruleset=manifest.ref), moves))

        refusals = {line: outcome.error["code"] for line, _, _, outcome in played if not outcome.accepted}

        assert refusals == announced, f"{example}: refused (line: code) vs announced"
