"""The golden corpus: many recorded games per published rule-set version, written once, replayed byte for byte.

    .venv/bin/python -m tests.golden.corpus          # write tests/golden/corpus/<name>@<version>.json.gz
    .venv/bin/python -m tests.golden.corpus realm@2  # one version

``make.py``'s one game per version plays only part of a version's rules; this corpus adds games chosen
to run every branch of a version's code (measured: ``python -m tests.golden.coverage``), so that a
changed table value or rule is caught by the golden test (measured: ``tests/mutation``). Each version
has a list of *recipes* (``RECIPES``): creation options, players, dice scheme, clock steps and a *mix*
of how commands are chosen at each turn:

- ``bot``: the manifest's bot policy (``policy.py``), a legal move;
- ``nudge``: the bot's move with one field changed to another value of its type: a near miss, which
  the rules mostly refuse (each refusal is recorded and re-checked: same code at the same version);
- ``random``: any command of the version, every field drawn (strings from the rule-set's own source);
- ``stranger``: the bot's move sent by somebody else (another seat, or nobody seated).

Everything is derived from the version's name and the recipe's index (seed, nonces, command ids,
clock, the chooser's dice), so running this twice writes the same bytes. Each game is stored in
``almanac export``'s compact form with its ``expected`` digests (``expectations``): the state hash
after every command, and digests of what the Decider's rules answer besides events (scores,
resources, each seat's view and redacted events); presentation (summaries, audit texts, console
pictures) is left out, as it is of the fingerprint (issue 29, item 6). The golden test verifies every game (``verify_room``: every command
decided again, byte for byte, every refusal re-checked) and recomputes the digests.

Rule-sets are found through the registry (``make.published``), never by folder: a rule-set's files
live where its manifest's package is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import json
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import msgspec

from almanac.events import codec, registry
from almanac.events.decider import event_tag
from almanac.events.dice import PLAYER_ENTROPY, Dice
from almanac.events.hashing import canonical_bytes, state_hash
from almanac.events.room import ROOM_EVENT_TAGS
from almanac.events.step import advance
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.export_store import ExportFileStore, compact_export
from almanac.storage.memory_store import MemoryEventStore

from .make import HERE, chosen

CORPUS = HERE / "corpus"
FORMAT = "almanac-golden-corpus"
# A player no seat belongs to (the ``stranger`` move sends some commands as them).
OUTSIDER = "mallory"
# Clock steps a recipe may draw between commands: a second, a minute, an hour, a day, a month.
STEPS_MS = (1_000, 60_000, 3_600_000, 86_400_000, 30 * 86_400_000)
PREFER_TRIES = 6
# Every seat's view is digested after every VIEW_EVERY-th command and the last (a claim's view values every
# stand: after every command it would make the golden test four times slower for little more).
VIEW_EVERY = 8


@dataclass(frozen=True)
class Recipe:
    """One golden game: how it is created, who plays, how its commands are chosen and how long it runs.

    ``mix`` weighs the four ways of choosing a command (bot, nudge, random, stranger); ``steps`` are
    indexes into STEPS_MS the clock advances by (drawn each command); ``commands`` bounds the game,
    after which the creator ends the room (a game that ends by itself ends the room earlier).
    """

    options: dict[str, Any] = field(default_factory=dict)
    players: tuple[str, ...] = ("alice",)
    mix: tuple[int, int, int, int] = (1, 0, 0, 0)
    commands: int = 200
    dice_scheme: int = 1
    steps: tuple[int, ...] = (0,)
    start_ms: int = 1_700_000_000_000
    challenge: str | None = None
    # Kinds of command the bot's move is replaced by a random one when it proposes them (say, the move that
    # ends the game, to play on past it).
    avoid: tuple[str, ...] = ()
    # Games played from this recipe, each with its own seed and dice (the game's index names them).
    repeat: int = 1
    # Kinds the bot is steered to: it is asked up to ``PREFER_TRIES`` times for one of them (its dice make each
    # answer differ) before its last answer is taken (say, armies and sieges, to reach a city's fall).
    prefer: tuple[str, ...] = ()
    # Players held to some kinds of command: player -> kinds (the bot is asked as for ``prefer``; when it
    # proposes none of them, the player sends nothing). A passive city whose walls are never mended falls.
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Fields pinned in the bot's moves: field name -> value, wherever a move has that field (a siege that takes
    # a city for tax, not to destroy it).
    pin: dict[str, Any] = field(default_factory=dict)
    # Start from the manifest's bench scenario: its options (``options`` override them), players and bot.
    bench: bool = False

    def describe(self) -> dict[str, Any]:
        return {"options": self.options, "players": list(self.players), "mix": list(self.mix),
                "commands": self.commands, "dice_scheme": self.dice_scheme, "steps": list(self.steps),
                "start_ms": self.start_ms, "challenge": self.challenge, "avoid": list(self.avoid),
                "bench": self.bench, "prefer": list(self.prefer),
                "only": {player: list(kinds) for player, kinds in self.only.items()}, "pin": self.pin}


BOT, NUDGE, RANDOM, STRANGER = range(4)
_DUO = ("alice", "bob")
_MANY = ("alice", "bob", "carol", "dave", "erin", "frank")
_WAR = ("raise_army", "equip_army", "besiege", "raid", "choose_tax_season", "buy_freedom", "sabotage", "revolt",
        "restart_city", "heal_army")
_HUNGRY_COLONY = {
    "rows": 5, "columns": 5, "season": "summer", "year": 1,
    "stock": {"food": 10, "wood": 300, "gold": 200, "lumber": 40, "coins": 5},
    "sectors": [
        {"row": 2, "column": 2, "type": "prairie", "population": 1500, "buildings": ["farm", "kitchen"]},
        {"row": 2, "column": 3, "type": "forest", "population": 200, "buildings": ["lumber_camp", "sawmill"],
         "starved_seasons_ago": 1},
        {"row": 1, "column": 2, "type": "mountain", "population": 100,
         "buildings": ["mine", "mint", "factory", "mine", "mint"]},
        {"row": 0, "column": 0, "explored": False},
        {"row": 3, "column": 2, "type": "prairie", "population": 50,
         "buildings": ["farm"] * 6 + ["kitchen"] * 3 + ["factory"] * 2},
    ],
}
_PASSIVE_CAROL = {"carol": ("end_turn", "buy_freedom", "sabotage", "revolt", "restart_city", "choose_tax_season")}
_RICH = {resource: 40_000 for resource in ("food", "wood", "herbs", "stone", "bronze", "iron", "steel", "gold",
                                            "smelted_stone", "smelted_bronze", "smelted_iron", "smelted_steel")}

# Per rule-set name (every version of it plays the same recipes), chosen by what the coverage report showed
# unplayed; the comment says what each adds.
RECIPES: dict[str, tuple[Recipe, ...]] = {
    "board": (
        Recipe(repeat=2),  # complete games of the bot
        Recipe(options={"mountain_bonus": True}, mix=(6, 1, 0, 0), repeat=3),
        # the extended pool deals every mission card over these games
        Recipe(options={"extended_pool": True}, mix=(6, 1, 1, 1), players=_DUO, dice_scheme=2, repeat=8),
        Recipe(options={"extended_pool": True}, repeat=16),  # more boards for every mission's scoring
        Recipe(options={"extended_pool": True}, mix=(1, 1, 2, 0), repeat=2),  # mostly refused: random commands
        Recipe(options={"mountain_bonus": True, "extended_pool": True}, mix=(4, 2, 2, 1), players=_DUO, repeat=3),
        Recipe(options={"player": "bob"}, mix=(3, 1, 1, 1), players=_DUO, challenge="golden-weekly"),
    ),
    "claim": (
        # a claim grows in hours: clocks of minutes and hours see every age of the volume curve and grade
        Recipe(steps=(2,), repeat=2),  # the bot to its prove-up
        Recipe(steps=(1, 2), commands=300, avoid=("prove_up",), repeat=3),
        Recipe(mix=(4, 2, 2, 1), players=_DUO, steps=(0, 1, 2), commands=300, avoid=("prove_up",), repeat=2),
        Recipe(options={"block": "valley-1/SE"}, mix=(3, 1, 2, 0), steps=(2, 3), dice_scheme=2, commands=200,
               avoid=("prove_up",)),
        Recipe(options={"owner": "bob"}, players=_DUO, mix=(5, 1, 1, 2), steps=(1, 2, 4)),
        # near misses on every command (a cut too young, a full deck, a road, an unripe crop, an early prove-up)
        Recipe(mix=(2, 4, 1, 0), steps=(0, 1, 2), commands=300, avoid=("prove_up",), repeat=2),
        Recipe(mix=(2, 1, 3, 0), steps=(1, 2), commands=150, repeat=2),
    ),
    "realm": (
        Recipe(options={"players": list(_DUO), "villages": 1, "years": 2}, players=_DUO, mix=(6, 1, 1, 1)),
        Recipe(options={"players": list(_MANY), "villages": 3, "years": 1}, players=_MANY, mix=(8, 1, 1, 1),
               commands=400, dice_scheme=2),
        # a season's clock runs out (the next command ends it), few actions a season
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 0, "years": 1, "actions_per_season": 2,
                        "season_timeout_ms": 60_000}, players=("alice", "bob", "carol"), mix=(4, 2, 2, 1),
               steps=(0, 1)),
        # rich cities: armies, sieges, vassals, taxes, freedom, sabotage, revolts, restarts, trades
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 2, "years": 4, "starting_stock": _RICH},
               players=("alice", "bob", "carol"), mix=(12, 1, 1, 0), commands=700, repeat=2),
        Recipe(options={"players": list(_DUO), "villages": 1, "years": 3, "actions_per_season": 6,
                        "starting_stock": _RICH}, players=_DUO, mix=(8, 1, 1, 1), commands=500, dice_scheme=2),
        Recipe(bench=True, mix=(10, 1, 1, 0), commands=500),
        # war: cities fall, pay tax, buy their freedom, revolt, are destroyed and restart
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 2, "years": 5, "actions_per_season": 8,
                        "starting_stock": _RICH}, players=("alice", "bob", "carol"), mix=(20, 1, 1, 0),
               commands=900, prefer=_WAR, repeat=3),
        # carol only ends her turn (and, once taken, buys her freedom, sabotages, revolts, restarts): her
        # city falls to the others' sieges, pays tax, and is destroyed
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 1, "years": 6, "actions_per_season": 8,
                        "starting_stock": _RICH, "season_timeout_ms": 3_600_000},
               players=("alice", "bob", "carol"), mix=(20, 1, 1, 0), steps=(0, 0, 0, 2), commands=900,
               prefer=_WAR, only=_PASSIVE_CAROL, repeat=2),
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 1, "years": 6, "actions_per_season": 8,
                        "starting_stock": _RICH, "season_timeout_ms": 3_600_000},
               players=("alice", "bob", "carol"), mix=(20, 1, 1, 0), steps=(0, 0, 0, 2), commands=900,
               prefer=_WAR, only=_PASSIVE_CAROL, pin={"if_taken": "tax"}),
        Recipe(options={"players": ["alice", "bob", "carol"], "villages": 0, "years": 6, "actions_per_season": 8,
                        "starting_stock": _RICH, "season_timeout_ms": 3_600_000},
               players=("alice", "bob", "carol"), mix=(20, 1, 1, 0), steps=(0, 0, 0, 2), commands=900,
               prefer=_WAR, only={"carol": ("end_turn", "sabotage", "revolt")},
               pin={"if_taken": "tax"}),
    ),
    "sectors": (
        Recipe(options={"years": 1, "rows": 4, "columns": 4}, mix=(6, 1, 1, 1)),
        Recipe(options={"years": 2, "rows": 6, "columns": 5}, mix=(4, 2, 2, 0), commands=300, dice_scheme=2),
        Recipe(options={"years": 1, "rows": 3, "columns": 3, "home_type": "mountain", "home_population": 40},
               mix=(5, 1, 1, 1)),
        Recipe(options={"years": 1, "rows": 3, "columns": 3, "home_type": "forest",
                        "stock": {"food": 50, "wood": 900, "gold": 300}}, mix=(5, 1, 1, 0)),
        # the bench's full colony (every sector explored and built), for one year
        Recipe(bench=True, options={"years": 1}, mix=(6, 2, 2, 0), commands=200, avoid=("end_season",)),
        Recipe(bench=True, options={"years": 1}, commands=10),
        # an explicit colony: unexplored places, a crowded, hungry prairie, a recent famine, buildings at their limit
        Recipe(options={"years": 2, "setup": _HUNGRY_COLONY}, mix=(5, 3, 1, 0), commands=250, repeat=2),
        # near misses on every command (a move onto itself, past a cap, a banned or unaffordable building)
        Recipe(options={"years": 3, "rows": 5, "columns": 5}, mix=(3, 4, 1, 0), commands=300, repeat=2),
    ),
}


# Per version, after its rule-set's recipes: what a later version adds to them.
VERSION_RECIPES: dict[str, tuple[Recipe, ...]] = {
    "board@2": (
        # a turn limit of a minute on clocks of seconds, minutes and hours: turns begin, time out (when a random
        # time_out names the current turn) and are refused early, late or for another turn
        Recipe(options={"turn_limit_s": 60}, mix=(6, 1, 3, 1), steps=(0, 1, 2), repeat=3),
        Recipe(options={"turn_limit_s": 10, "extended_pool": True}, mix=(4, 1, 4, 0), players=_DUO, steps=(0, 1),
               dice_scheme=2, repeat=2),
    ),
}


# A wide corpus (the mutation test's second opinion, never committed): every recipe's games this many
# times over with a salt of its own ("wide", "check"), so with other seeds, dice and clocks.
WIDE_REPEAT = 4
# Wide games kept in a version's corpus, as (salt, index in that wide corpus): each catches mutants the recipes'
# own games missed (``python -m tests.mutation.run --wide-salt wide`` names, for every missed mutant, the
# first wide game that catches it). They are adopted from the "wide" corpus; the mutation test's figures
# come from the independent "check" corpus. Indexes follow RECIPES: after changing a rule-set's recipes,
# adopt its games again.
ADOPTED: dict[str, tuple[tuple[str, int], ...]] = {
    "board@1": tuple(("wide", index) for index in (1, 5, 15, 16, 82, 84, 87)),
}
# Wide games adopted after a version's corpus file was written. A written golden corpus is never changed (a
# published version's recorded games replay for ever, byte for byte), so these are recorded in a file of their
# own, ``corpus/adopted/<ref>.json.gz``, read beside it (``games_for``).
ADOPTED_LATER: dict[str, tuple[tuple[str, int], ...]] = {
    "claim@1": (("wide", 9),),
    "realm@1": tuple(("wide", index) for index in (13, 28, 36, 41)),
    "realm@2": tuple(("wide", index) for index in (23, 47, 55)),
    "sectors@1": (("wide", 25), ("wide", 37)),
}


def recipes_for(manifest: Any) -> tuple[Recipe, ...]:
    return RECIPES.get(manifest.name, ()) + VERSION_RECIPES.get(manifest.ref, ())


def wide_recipes(manifest: Any) -> tuple[Recipe, ...]:
    return tuple(dataclasses.replace(recipe, repeat=recipe.repeat * WIDE_REPEAT) for recipe in recipes_for(manifest))


def path_for(manifest: Any) -> Path:
    return CORPUS / f"{manifest.ref}.json.gz"


def adopted_path_for(manifest: Any) -> Path:
    return CORPUS / "adopted" / f"{manifest.ref}.json.gz"


def games_for(manifest: Any) -> list[dict[str, Any]]:
    """Every recorded game of a version: its corpus file's, then those adopted later (each file as written)."""
    return [game for path in (path_for(manifest), adopted_path_for(manifest)) if path.exists()
            for game in read(path)["games"]]


@cache
def _string_pool(package: str) -> tuple[str, ...]:
    """Short lowercase names the rule-set's source mentions (its resources, buildings, kinds): what a random
    command's text fields are drawn from, so they hit the rules' checks rather than the schema's."""
    import ast  # noqa: PLC0415 - only the generator reads source

    found: set[str] = set()
    for path in package_files(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isascii():
                text = node.value
                if 0 < len(text) <= 24 and text.replace("_", "").replace("-", "").isalnum() and text.islower():
                    found.add(text)
    return tuple(sorted(found))


def rules_package(manifest: Any) -> str:
    """The package a version's code lives in: the one its fingerprint covers (``events.fingerprint``)."""
    module_name = manifest.source or type(manifest.decider).__module__
    module = import_module(module_name)
    return module_name if hasattr(module, "__path__") else module.__package__


def package_files(package: str) -> list[Path]:
    """Every Python source file of ``package`` and its subpackages, sorted."""
    root = Path(import_module(package).__file__).parent
    return sorted(path for path in root.rglob("*.py") if "__pycache__" not in path.parts)


# Modules of a rule-set's package that hold no decision and no fold, by file name: the bot that chose the
# recorded commands (policy.py), auditors' stories (audit.py), wiring, read models and bench figures
# (manifest.py, published.py), and helpers no replay imports (sandbox.py: sectors' test room). With the
# Decider's ``summary`` and the ``summarize`` it calls (a sentence per event; realm's summaries.py once
# the games have their own folder: presentation, like the console's pictures), they are left out of the
# coverage figures and of the mutants: the golden logs pin the rules, not their wording.
NOT_RULES = ("policy.py", "audit.py", "manifest.py", "published.py", "sandbox.py", "summaries.py")
PRESENTATION_FUNCTIONS = ("summary", "summarize")


def rule_modules(package: str) -> list[tuple[str, Path]]:
    """(module name, file) of every module of ``package`` that holds rules (not ``NOT_RULES``)."""
    files = package_files(package)
    root = Path(import_module(package).__file__).parent
    found = []
    for path in files:
        if path.name in NOT_RULES:
            continue
        parts = (package, *path.relative_to(root).with_suffix("").parts)
        found.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return found


class _Draw:
    """Random command bodies and values for one game, from the chooser's dice."""

    def __init__(self, dice: Dice, strings: tuple[str, ...], players: tuple[str, ...]) -> None:
        self.dice = dice
        self.strings = strings + players + (OUTSIDER, "")
        # field name -> values the bot has sent in it: a drawn field takes one of them half the time, so
        # that random commands name real things (a parcel, a trade, a city) and reach the rules' deeper checks.
        self.seen: dict[str, list[Any]] = {}

    def saw(self, body: dict[str, Any]) -> None:
        for name, value in body.items():
            known = self.seen.setdefault(name, [])
            if name != "kind" and value not in known:
                known.append(value)

    def field(self, name: str, node: Any) -> Any:
        known = self.seen.get(name)
        return self.pick(known) if known and self.dice.randbelow(2) else self.value(node)

    def pick(self, items: Any) -> Any:
        items = list(items)
        return items[self.dice.randbelow(len(items))]

    def value(self, node: Any) -> Any:  # noqa: PLR0911 - one case per msgspec type
        inspect = msgspec.inspect
        if isinstance(node, inspect.Metadata):
            return self.value(node.type)
        if isinstance(node, inspect.NoneType):
            return None
        if isinstance(node, inspect.BoolType):
            return bool(self.dice.randbelow(2))
        if isinstance(node, inspect.IntType):
            low = node.ge if node.ge is not None else (node.gt + 1 if node.gt is not None else -5)
            high = node.le if node.le is not None else (node.lt - 1 if node.lt is not None else 10**6)
            choices = [v for v in (low, high, low + 1, high - 1, *range(13), 20, 50, 100, 250, 1_000, 10**4, 10**6)
                       if low <= v <= high]
            return self.pick(choices)
        if isinstance(node, inspect.StrType):
            return self.pick(self.strings)
        if isinstance(node, inspect.LiteralType):
            return self.pick(node.values)
        if isinstance(node, inspect.UnionType):
            return self.value(self.pick(node.types))
        if isinstance(node, inspect.ListType | inspect.VarTupleType | inspect.SetType | inspect.FrozenSetType):
            return [self.value(node.item_type) for _ in range(self.dice.randbelow(4))]
        if isinstance(node, inspect.TupleType):
            return [self.value(item) for item in node.item_types]
        if isinstance(node, inspect.DictType):
            return {str(self.value(node.key_type)): self.value(node.value_type) for _ in range(self.dice.randbelow(4))}
        if isinstance(node, inspect.StructType):
            return self.fields(node)
        return self.pick(self.strings)

    def fields(self, node: Any) -> dict[str, Any]:
        return {f.encode_name: self.field(f.encode_name, f.type) for f in node.fields
                if f.required or self.dice.randbelow(2)}

    def command(self, command_types: tuple[type, ...]) -> dict[str, Any]:
        kind = self.pick(command_types)
        return {"kind": kind.__struct_config__.tag, **self.fields(msgspec.inspect.type_info(kind))}

    def nudge(self, body: dict[str, Any], command_types: tuple[type, ...]) -> dict[str, Any]:
        kind = next(t for t in command_types if t.__struct_config__.tag == body["kind"])
        fields = msgspec.inspect.type_info(kind).fields
        if not fields:
            return self.command(command_types)
        chosen = self.pick(fields)
        return {**body, chosen.encode_name: self.field(chosen.encode_name, chosen.type)}


async def play(manifest: Any, index: int, recipe: Recipe, salt: str = "") -> dict[str, Any]:
    """Game ``index`` of ``manifest`` played from ``recipe`` on the engine's write path; its compact export
    document. ``salt`` makes other games of the same recipes (the mutation test's wide corpus)."""
    ref = manifest.ref
    label = f"{ref}#{salt}{index}"
    room = f"golden-corpus-{manifest.name}-v{manifest.version}-{salt}{index}"
    store = MemoryEventStore()
    await store.save_seed(room, hashlib.sha256(f"almanac golden corpus|{label}".encode()).digest())
    service = RoomService(store)
    chooser = Dice(b"almanac golden corpus chooser dice", label, 0)
    draw = _Draw(chooser, _string_pool(rules_package(manifest)), recipe.players)
    command_types = tuple(t for t in manifest.decider.command_types if t.__struct_config__.tag not in recipe.avoid)
    # Each game starts at its own time (a claim's map is drawn from its creation time).
    now, sent = recipe.start_ms + index * 7_777_777, 0

    async def send(player: str, body: dict[str, Any]) -> bool:
        nonlocal sent, now
        sent += 1
        now += STEPS_MS[draw.pick(recipe.steps)]
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{sent}", room=room, player=player,
                                                     server_time_ms=now, body=body))
        return outcome.accepted

    players, options, policy = recipe.players, recipe.options, manifest.policy
    if recipe.bench:
        players = manifest.bench.players
        options = {**manifest.bench.options, **recipe.options}
        policy = manifest.bench.policy or policy
    draw.strings += players
    create: dict[str, Any] = {"kind": "create_room", "ruleset": ref, "options": options,
                              "dice_scheme": recipe.dice_scheme}
    if recipe.challenge is not None:
        create = {**create, "challenge": recipe.challenge, "dice_scheme": 1}
    if not await send(players[0], create):
        raise RuntimeError(f"{label}: the golden room was not created")
    for player in players:
        nonce = hashlib.sha256(f"almanac golden corpus nonce|{label}|{player}".encode()).digest()
        join: dict[str, Any] = {"kind": "join_room"}
        state, _ = await service.load(room)
        if state.dice_scheme == PLAYER_ENTROPY:
            join["nonce_commitment"] = await store.save_nonce(room, nonce)
        await send(player, join)
    weights = [way for way, weight in enumerate(recipe.mix) for _ in range(weight)]
    idle = 0
    while sent < recipe.commands:
        state, _ = await service.load(room)
        if state.ended:
            break
        player = draw.pick(players)
        way = draw.pick(weights)
        if way == RANDOM:
            await send(player, draw.command(command_types))
            continue
        command = policy(state.game, player, chooser, now + STEPS_MS[recipe.steps[0]])
        preferred = recipe.only.get(player, recipe.prefer)
        for _ in range(PREFER_TRIES if preferred else 0):
            if command is None or codec.encode_command(command)["kind"] in preferred:
                break
            command = policy(state.game, player, chooser, now + STEPS_MS[recipe.steps[0]])
        if command is not None and player in recipe.only and codec.encode_command(command)["kind"] not in preferred:
            command = None
        if command is None:
            idle += 1
            if idle > 200:
                break  # nobody has anything to do: the creator ends the room
            continue
        idle = 0
        body = codec.encode_command(command)
        body.update({name: value for name, value in recipe.pin.items() if name in body})
        draw.saw(body)
        if body["kind"] in recipe.avoid:
            body = draw.command(command_types)
        elif way == NUDGE:
            body = draw.nudge(body, command_types)
        elif way == STRANGER:
            player = draw.pick([p for p in (*players, OUTSIDER) if p != player])
        await send(player, body)
    state, _ = await service.load(room)
    if not state.ended:
        await send(players[0], {"kind": "end_room", "reason": "the golden game is long enough"})
    last = (await store.read(room))[-1]
    return await compact_export(store, room, last.server_time_ms)


def expectations(document: dict[str, Any]) -> dict[str, Any]:
    """What a replay of ``document`` must give besides its events: per command the state hash (16 hex
    digits), and digests of the Decider's other rule answers after every command: scores (public and all,
    whether the game is over, its seats), resources, every seat's view (every VIEW_EVERY-th command), and
    every game event as each seat receives it."""
    exported = ExportFileStore.of_document(document)
    room = document["room"]
    envelopes = asyncio.run(exported.read(room))
    starts = {first for first, _ in document["commands"]}
    states: list[str] = []
    answers = {name: hashlib.sha256() for name in ("scores", "resources", "views", "redactions")}
    state = None
    for envelope in envelopes:
        event = codec.decode_event(envelope)
        state = advance(state, envelope, event)
        decider = registry.decider_at(state.ruleset, state.ruleset_version)
        seats = sorted({*state.players, OUTSIDER})
        if event_tag(event) not in ROOM_EVENT_TAGS:  # the game's events, not the room's
            answers["redactions"].update(canonical_bytes([decider.redact(event, player) for player in seats]))
        if envelope.version + 1 not in starts and envelope.version != len(envelopes):
            continue  # the rest is asked after each command's last event
        states.append(state_hash(state)[:16])
        if state.game is None:
            continue
        game = state.game
        answers["scores"].update(canonical_bytes([decider.scores(game), decider.public_scores(game),
                                                  decider.is_over(game), decider.seats(game)]))
        answers["resources"].update(canonical_bytes(decider.resources(game)))
        if len(states) % VIEW_EVERY == 0 or envelope.version == len(envelopes):
            answers["views"].update(canonical_bytes({player: decider.view(game, player) for player in seats}))
    return {"states": states, **{name: digest.hexdigest()[:16] for name, digest in answers.items()}}


def check(game: dict[str, Any]) -> str | None:
    """None when a recorded game replays exactly: verify_room passes and every digest is recomputed equal."""
    document = game["export"]
    report = asyncio.run(verify_room(ExportFileStore.of_document(document), document["room"]))
    if not report.ok:
        divergence = report.divergence
        return f"{divergence.check} check at version {divergence.version}: {divergence.message}"
    if report.commands_redecided != len(document["commands"]):
        return f"{report.commands_redecided} of {len(document['commands'])} commands decided again"
    found = expectations(document)
    for name, expected in game["expected"].items():
        if found.get(name) != expected:
            if name == "states":
                at = next(i for i, (a, b) in enumerate(zip(found[name], expected, strict=False)) if a != b)
                return f"the state after command {at + 1} differs (same events, another fold)"
            return f"the Decider's {name} differ (same events and states)"
    return None


def read(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def games_of(recipes: tuple[Recipe, ...]) -> list[Recipe]:
    """Every game the recipes make, in order (a recipe repeated ``repeat`` times)."""
    return [recipe for recipe in recipes for _ in range(recipe.repeat)]


def build(manifest: Any, recipes: tuple[Recipe, ...] | None = None, salt: str = "",
          adopted: tuple[tuple[str, int], ...] = ()) -> dict[str, Any]:
    """The corpus of ``recipes`` (the version's own by default) and of the ``adopted`` wide games."""
    played = [(index, recipe, salt) for index, recipe in
              enumerate(games_of(recipes if recipes is not None else recipes_for(manifest)))]
    wide = games_of(wide_recipes(manifest))
    played += [(index, wide[index], wide_salt) for wide_salt, index in adopted]
    games = []
    for index, recipe, game_salt in played:
        document = asyncio.run(play(manifest, index, recipe, game_salt))
        games.append({"recipe": recipe.describe(), "expected": expectations(document), "export": document})
    return {"format": FORMAT, "ruleset": manifest.ref, "games": games}


def write(manifest: Any) -> list[Path]:
    """A version's corpus file and its later adoptions' file, each written once: an existing one is never
    rewritten (a change of a published version's recorded games is what the golden test exists to refuse)."""
    written = []
    for path, recipes, adopted in ((path_for(manifest), None, ADOPTED.get(manifest.ref, ())),
                                   (adopted_path_for(manifest), (), ADOPTED_LATER.get(manifest.ref, ()))):
        if path.exists() or (recipes == () and not adopted):
            continue
        corpus = build(manifest, recipes, adopted=adopted)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(corpus, sort_keys=True, separators=(",", ":")).encode()
        path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
        written.append(path)
    return written


def main(argv: list[str]) -> None:
    for path in (path for manifest in chosen(argv) for path in write(manifest)):
        games = read(path)["games"]
        events = sum(len(g["export"]["envelopes"]) for g in games)
        refused = sum(len(g["export"]["rejections"]) for g in games)
        print(f"{path.relative_to(HERE.parent.parent)}: {len(games)} games, {events} events, {refused} refusals, "
              f"{path.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
