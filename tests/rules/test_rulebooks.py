"""Every rulebook says what its rules do: its refusal tables name exactly the codes the rules raise, and every
example it gives plays as written.

The rulebooks are found as the rules are (each installed version's manifest names its ``rulebook`` and
its ``examples``), and what they promise is read from them:

- every markdown table with a ``code`` column is a refusal table; its backticked ``<name>.<code>`` cells
  are the codes (``<resource>`` stands for any word). The codes the rules raise are read from the
  rule-set's package source: the first argument of every ``RuleError(...)`` and every other
  ``"<name>.<word>"`` literal that is not an event tag (a code handed to a helper);
- a refusal row with an ``example command`` is played in the example room the rulebook describes
  ("played by `player` in a room created with options `{...}`"), and must be refused with the row's
  code, a field the row names and exactly the example message;
- the manifest's example scenarios (``examples/*.jsonl``) are played, and the commands refused are
  exactly those announced by a ``# refused (<code>)`` comment, with that code.
"""

from __future__ import annotations

import ast
import asyncio
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
from almanac.services.cli.sim import load_scenario, run_scenario

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


def refused(driver: RoomDriver, player: str, body: dict) -> RuleError:
    try:
        driver.play(player, body)
    except RuleError as error:
        return error
    raise AssertionError(f"{body} was accepted")


def example_rows(manifest) -> list[dict[str, str]]:
    return [row for row in refusal_rows(manifest) if row.get("example command", "").startswith("`{")]


@pytest.mark.parametrize("manifest", RULESETS, ids=[manifest.ref for manifest in RULESETS])
def test_every_refusal_example_is_refused_with_its_code_field_and_message(manifest) -> None:
    rows = example_rows(manifest)
    if not rows:
        pytest.skip(f"{manifest.rulebook} gives no example commands")
    room = EXAMPLE_ROOM.search(" ".join(rulebook(manifest).split()))
    assert room, f"{manifest.rulebook} gives examples but not the room they are played in"
    player, options = room.group(1), json.loads(room.group(2))

    def new_room(create: dict) -> RoomDriver:
        driver = RoomDriver(f"{manifest.name}-examples", b"rulebook examples seed 32 bytes!", 1_000)
        driver.play(player, {**create, "kind": "create_room", "ruleset": manifest.ref})
        return driver

    table = new_room({"options": options})
    table.play(player, {"kind": "join_room"})
    for row in rows:
        command = json.loads(row["example command"].strip("`"))
        (code,) = codes_in(row["code"], manifest.name)
        if command["kind"] == "create_room":
            with pytest.raises(RuleError) as creating:
                new_room(command)
            error = creating.value
        else:
            error = refused(table, player, command)
        assert (error.code, error.message) == (code, row["example message"]), command
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
