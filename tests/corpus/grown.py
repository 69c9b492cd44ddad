"""The grown corpus: more recorded games per published version, beside the frozen golden corpus, replayed alike.

    .venv/bin/python -m tests.corpus.grown            # write every batch not yet written
    .venv/bin/python -m tests.corpus.grown realm@2    # one version's

tests/golden is frozen (a house rule: nothing under it changes), so its corpus cannot take more games. This
one grows beside it (issue 29, point 7): games chosen by what ``python -m tests.corpus.coverage --missing``
showed no golden game runs, recorded by the same machinery (``tests/golden/corpus.py``'s ``play``,
``expectations`` and ``check``, imported, not copied) and replayed by ``test_grown_corpus.py`` exactly as
the golden corpus is. Each version's games are in batches, ``tests/corpus/games/<ref>/<batch>.json.gz``,
each written once: growing adds a batch, a written one is never rewritten (a change of a published
version's recorded games is what the replay test exists to refuse).

A batch holds games of three kinds:

- a golden ``Recipe`` (bot, near-miss, random and stranger moves), played with the salt ``grown`` so its
  seeds, dice and clocks differ from the golden corpus' games of the same recipe;
- a ``Script``: a creation with room options a recipe cannot set (``bot_after_missed``) and explicit moves
  (a body, or the bot's move), for states the recipes do not reach (a refusal only a precise command meets);
- an ``Adopted`` game: one of the mutation test's wide games (``--wide-salt wide`` names it), played with its own
  salt and index, not the batch's, so it is the very game that caught a mutant the other games missed (the
  golden corpus adopted games so, ``golden.ADOPTED`` and ``golden.ADOPTED_LATER``, until tests/golden was frozen).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from almanac.events import codec
from almanac.events.dice import PLAYER_ENTROPY, Dice
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.export_store import compact_export
from almanac.storage.memory_store import MemoryEventStore

try:  # run from the repository's root (python -m tests.corpus.grown, tests.mutation.run)
    from tests.golden import corpus as golden
    from tests.golden.make import chosen
except ModuleNotFoundError:  # under pytest, tests/ is the import root (as for tests/golden's own tests)
    from golden import corpus as golden  # type: ignore[no-redef]
    from golden.make import chosen  # type: ignore[no-redef]

Recipe = golden.Recipe
HERE = Path(__file__).resolve().parent
GAMES = HERE / "games"
FORMAT = "almanac-grown-corpus"
# The salt of every game here (with its batch's name): other rooms, seeds and dice than the golden corpus' games.
SALT = "grown"
BOT = None  # a Script's move whose body is the bot's choice (skipped when the bot has none)


@dataclass(frozen=True)
class Script:
    """A game of explicit moves: the creation (``create``: fields beside ``ruleset``, ``options`` and
    ``dice_scheme``), the players who join, then each move as (player, body, clock step in ms): the body is a
    dict, BOT (the bot's move) or a function of the game's state returning one (None: nothing is sent).
    The creator ends the room after the last move unless the game ended it."""

    options: dict[str, Any] = field(default_factory=dict)
    players: tuple[str, ...] = ("alice",)
    moves: tuple[tuple[str, Any, int], ...] = ()
    create: dict[str, Any] = field(default_factory=dict)
    dice_scheme: int = 1
    start_ms: int = 1_700_000_000_000
    bench: bool = False
    # Games played from this script, each with its own seed and dice (the dice decide battles, so outcomes differ).
    repeat: int = 1

    def describe(self) -> dict[str, Any]:
        return {"script": True, "options": self.options, "players": list(self.players), "create": self.create,
                "dice_scheme": self.dice_scheme, "bench": self.bench,
                "moves": [[player, getattr(body, "__name__", body), step] for player, body, step in self.moves]}


def bots(player: str, count: int, step_ms: int = 1_000) -> tuple[tuple[str, None, int], ...]:
    """``count`` moves of ``player``'s bot."""
    return tuple((player, BOT, step_ms) for _ in range(count))


def rounds(players: tuple[str, ...], count: int, step_ms: int = 1_000) -> tuple[tuple[str, None, int], ...]:
    """``count`` rounds of every player's bot in turn."""
    return tuple((player, BOT, step_ms) for _ in range(count) for player in players)


async def play_script(manifest: Any, index: int, script: Script, salt: str) -> dict[str, Any]:
    """Game ``index`` of ``script`` on the engine's write path (as ``golden.play``); its compact export."""
    label = f"{manifest.ref}#{salt}{index}"
    room = f"grown-corpus-{manifest.name}-v{manifest.version}-{salt}{index}"
    store = MemoryEventStore()
    await store.save_seed(room, hashlib.sha256(f"almanac grown corpus|{label}".encode()).digest())
    service = RoomService(store)
    dice = Dice(b"almanac grown corpus chooser dice", label, 0)
    now, sent = script.start_ms + index * 7_777_777, 0

    async def send(player: str, body: dict[str, Any], step_ms: int = 1_000) -> bool:
        nonlocal sent, now
        sent += 1
        now += step_ms
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{sent}", room=room, player=player,
                                                     server_time_ms=now, body=body))
        return outcome.accepted

    players, options, policy = script.players, script.options, manifest.policy
    if script.bench:
        players = manifest.bench.players
        options = {**manifest.bench.options, **script.options}
        policy = manifest.bench.policy or policy
    create = {"kind": "create_room", "ruleset": manifest.ref, "options": options,
              "dice_scheme": script.dice_scheme, **script.create}
    if not await send(players[0], create):
        raise RuntimeError(f"{label}: the room was not created")
    for player in players:
        join: dict[str, Any] = {"kind": "join_room"}
        state, _ = await service.load(room)
        if state.dice_scheme == PLAYER_ENTROPY:
            nonce = hashlib.sha256(f"almanac grown corpus nonce|{label}|{player}".encode()).digest()
            join["nonce_commitment"] = await store.save_nonce(room, nonce)
        await send(player, join)
    for player, body, step_ms in script.moves:
        state, _ = await service.load(room)
        if state.ended:
            break
        if body is BOT:
            command = policy(state.game, player, dice, now + step_ms)
            body = codec.encode_command(command) if command is not None else None
        elif callable(body):  # a move of the game's state (and of the command's time, when it asks for it)
            body = body(state.game, now + step_ms) if getattr(body, "wants_now", False) else body(state.game)
        if body is None:
            continue
        await send(player, body, step_ms)
    state, _ = await service.load(room)
    if not state.ended:
        await send(players[0], {"kind": "end_room", "reason": "the grown game is long enough"})
    last = (await store.read(room))[-1]
    return await compact_export(store, room, last.server_time_ms)


@dataclass(frozen=True)
class Adopted:
    """Wide game ``index`` of the mutation test's wide corpus played with ``salt``, as ``tests.mutation.run``
    plays it (``golden.play`` with that salt and index: the same room, seed, dice, clocks and commands), so a
    game the run names (``caught_by_wide_game``, with ``--wide-salt wide``) is recorded exactly. The wide corpus
    is the golden recipes' games ``golden.WIDE_REPEAT`` times over (``golden.wide_recipes``: its indexes are
    those of ``golden.ADOPTED`` and ``golden.ADOPTED_LATER``), then the grown recipes' (``wide_recipes`` below)."""

    index: int
    salt: str = "wide"

    def recipe(self, manifest: Any) -> Recipe:
        return golden.games_of(golden.wide_recipes(manifest) + wide_recipes(manifest))[self.index]

    def describe(self, manifest: Any) -> dict[str, Any]:
        return {"adopted": {"salt": self.salt, "index": self.index}, **self.recipe(manifest).describe()}


def record(manifest: Any, batch: str, games: tuple[Recipe | Script | Adopted, ...]) -> dict[str, Any]:
    """A batch: every game of ``games`` (a recipe ``repeat`` times) played with the batch's own salt (an adopted
    game with its own) and recorded with its expectations (``golden.expectations``)."""
    recorded = []
    salt = f"{SALT}-{batch}-"
    every = [game for game in games for _ in range(getattr(game, "repeat", 1))]
    for index, game in enumerate(every):
        if isinstance(game, Adopted):
            document = asyncio.run(golden.play(manifest, game.index, game.recipe(manifest), game.salt))
            recorded.append({"recipe": game.describe(manifest), "expected": golden.expectations(document),
                             "export": document})
            continue
        if isinstance(game, Script):
            document = asyncio.run(play_script(manifest, index, game, salt))
        else:
            document = asyncio.run(golden.play(manifest, index, game, salt))
        recorded.append({"recipe": game.describe(), "expected": golden.expectations(document), "export": document})
    return {"format": FORMAT, "ruleset": manifest.ref, "games": recorded}


# Batches per rule-set name (every version of it plays them), then per version: batch name -> games. A batch is
# recorded once per version; its file then never changes (add a batch to grow).
_DUO = ("alice", "bob")
_HOUR = 3_600_000


# --- claim: moves read from the claim's state (a parcel's name is A1..H8; the meadow is A8, B8 the landing, C8)

def _claim_name(index: int) -> str:
    return f"{'ABCDEFGH'[index % 8]}{index // 8 + 1}"


def claim_logger(game: Any) -> dict[str, Any] | None:
    """Cut the oldest timber off the meadow; haul the deck when cash runs low or it fills: the cover falls."""
    logs = sum(lot.logs for lot in game.deck)
    if game.deck and (game.cash_cents < 1_600 or logs > 150) and game.clock_ms >= game.wagon_back_ms:
        return {"kind": "haul"}
    standing = [(parcel.planted_ms, index) for index, parcel in enumerate(game.parcels)
                if parcel.species is not None and index < 56]
    return {"kind": "cut", "parcel": _claim_name(min(standing)[1])} if standing else None


def claim_cabin(game: Any) -> dict[str, Any] | None:
    """A cabin on the first cut parcel off the meadow and the ridge (bench or bottom ground)."""
    for index, parcel in enumerate(game.parcels[:56]):
        row, column = divmod(index, 8)
        ridge = (row + column >= 9 and row <= 4) or (row <= 1 and column >= 4)
        if parcel.species is None and parcel.building is None and not ridge:
            return {"kind": "build", "parcel": _claim_name(index), "building": "cabin"}
    return None


def claim_young_cut(hours: int) -> Any:
    """Cut the youngest timber at least ``hours`` old (off the meadow): a lot worth little."""
    def move(game: Any) -> dict[str, Any] | None:
        old_enough = [(parcel.planted_ms, index) for index, parcel in enumerate(game.parcels[:56])
                      if parcel.species is not None and game.clock_ms - parcel.planted_ms >= hours * _HOUR]
        return {"kind": "cut", "parcel": _claim_name(max(old_enough)[1])} if old_enough else None
    move.__name__ = f"claim_cut_youngest_over_{hours}_hours"
    return move


def claim_fill_deck(extra: int) -> Any:
    """Cuts that fill the landing deck (300 logs) so that the last one gives exactly its room plus ``extra`` logs:
    0 fits exactly (a full deck takes no more than its room), 1 is one log too many (refused)."""
    def move(game: Any, now_ms: int) -> dict[str, Any] | None:
        from almanac.games.claim.growth import stand  # noqa: PLC0415 - only recording reads the growth tables

        room = 300 - sum(lot.logs for lot in game.deck)
        if room == 0:
            return None  # full to the last log
        logs = {index: stand(parcel.species, parcel.planted_ms, now_ms).logs
                for index, parcel in enumerate(game.parcels[:56]) if parcel.species is not None}
        last = next((index for index, count in logs.items() if count == room + extra), None)
        if last is not None and room < 300:
            return {"kind": "cut", "parcel": _claim_name(last)}
        for first, count in sorted(logs.items(), key=lambda item: -item[1]):
            rest = room - count
            if count <= room and any(other != first and left == rest + extra for other, left in logs.items()):
                return {"kind": "cut", "parcel": _claim_name(first)}
        for first, count in sorted(logs.items(), key=lambda item: -item[1]):
            rest = room - count
            if count <= room and any(a != first and b != first and a != b and logs[a] + logs[b] == rest + extra
                                     for a in logs for b in logs):
                return {"kind": "cut", "parcel": _claim_name(first)}
        return None
    move.wants_now = True  # type: ignore[attr-defined]
    move.__name__ = f"claim_fill_deck_to_room_plus_{extra}"
    return move


def _claim_broke(hours: int) -> Script:
    """Two young cuts, a cabin and two hay fields leave $4 and a deck worth little: the teamster's $10 fee is more
    than the cash and the sale together (or, where the lots are worth more, the wagon leaves)."""
    return Script(moves=(
        ("alice", claim_young_cut(hours), 1_000), ("alice", claim_cabin, 1_000),
        ("alice", {"kind": "farm", "parcel": "A8"}, 1_000), ("alice", {"kind": "farm", "parcel": "C8"}, 1_000),
        ("alice", claim_young_cut(hours), 1_000), ("alice", {"kind": "haul"}, 1_000)))


CLAIM_SCRIPTS = (
    # cash runs out: a cut, a barn and hay leave too little for a cabin; the landing is neither farmed nor built on,
    # a cabin is not built on growing hay; hay is sold with a barn
    Script(moves=(
        ("alice", claim_logger, _HOUR), ("alice", {"kind": "build", "parcel": "A8", "building": "barn"}, _HOUR),
        ("alice", {"kind": "farm", "parcel": "C8"}, _HOUR),
        ("alice", {"kind": "build", "parcel": "C8", "building": "cabin"}, _HOUR),
        ("alice", {"kind": "farm", "parcel": "B8"}, _HOUR),
        ("alice", {"kind": "build", "parcel": "B8", "building": "cabin"}, _HOUR),
        ("alice", claim_cabin, _HOUR),
        ("alice", {"kind": "harvest", "parcel": "C8"}, 6 * _HOUR),
        ("alice", claim_cabin, _HOUR),
    )),
    # hay sold without a barn (two commands in the same millisecond: the claim's clock stays), then the claim
    # logged bare: too little cover to prove up
    Script(moves=(
        ("alice", {"kind": "farm", "parcel": "A8"}, _HOUR), ("alice", {"kind": "farm", "parcel": "C8"}, 0),
        ("alice", {"kind": "harvest", "parcel": "A8"}, 7 * _HOUR),
        *(("alice", claim_logger, _HOUR) for _ in range(90)),
        ("alice", claim_cabin, _HOUR), ("alice", {"kind": "prove_up"}, 48 * _HOUR),
    )),
)
# --- realm: near misses only a precise command meets (a trade not yet offered, a merchant already away, ...)

_TRIO = ("alice", "bob", "carol")
_RICH = golden._RICH


def realm_trade(kind: str, **fields: Any) -> Any:
    """``kind`` about alice's merchant's trade (whichever id it has), or None while she has none out."""
    def move(game: Any) -> dict[str, Any] | None:
        trade = game.cities["alice"].merchant
        return {"kind": kind, "trade_id": trade, **fields} if trade else None
    move.__name__ = f"realm_trade_{kind}"
    return move


def realm_too_many_soldiers(game: Any) -> dict[str, Any]:
    return {"kind": "raise_army", "soldiers": (game.cities["bob"].population // 100 + 1) * 100}


def _season_end(step_ms: int = 1_000) -> tuple[tuple[str, dict[str, Any], int], ...]:
    return tuple((player, {"kind": "end_turn"}, step_ms) for player in _TRIO)


def realm_attack(player: str, target: str, if_taken: str, disarm: bool = False) -> Any:
    """``player`` raises an army (the whole city but a hundred), arms it in steel and besieges ``target``; with
    ``disarm``, dismisses it once ``target`` pays tax (so that a revolt can win)."""
    def move(game: Any) -> dict[str, Any] | None:
        city = game.cities[player]
        if city.destroyed:
            return {"kind": "restart_city"}
        if disarm and game.cities[target].controller == player:  # besieged once more (refused), then disarmed
            if city.army is None:
                return {"kind": "cut_wood"}
            if game.season_index % 2:  # (a refused move spends no action: the season decides)
                return {"kind": "dismiss_army"}
        if city.army is None:  # all but a hundred of the city's people (none while the city is too small)
            soldiers = (city.population - 100) // 100 * 100
            return {"kind": "raise_army", "soldiers": soldiers} if soldiers >= 1_000 else None
        if city.army.equipment != "steel":
            return {"kind": "equip_army", "tier": "steel"}
        return {"kind": "besiege", "target": target, "if_taken": if_taken}
    move.__name__ = f"realm_{player}_besieges_{target}_for_{if_taken}"
    return move


def realm_vassal(player: str) -> Any:
    """A city under control works against its controller: sabotage, an army in steel, a revolt, its freedom bought."""
    def move(game: Any) -> dict[str, Any]:
        city = game.cities[player]
        if city.destroyed:
            return {"kind": "restart_city"}
        if not city.controller:
            return {"kind": "sabotage"}  # refused: nobody controls it
        if city.army is None and city.population >= 1_400:
            return {"kind": "raise_army", "soldiers": city.population * 3 // 4 // 100 * 100}
        if city.army is not None and city.army.equipment != "steel":
            return {"kind": "equip_army", "tier": "steel"}
        turn = (game.season_index + game.actions_used.get(player, 0)) % 4
        return ({"kind": "sabotage"}, {"kind": "revolt"}, {"kind": "revolt"}, {"kind": "buy_freedom"})[turn]
    move.__name__ = f"realm_{player}_resists"
    return move


def realm_tax(player: str, vassal: str, season: str) -> Any:
    def move(game: Any) -> dict[str, Any]:
        return {"kind": "choose_tax_season", "city": vassal, "season": season}
    move.__name__ = f"realm_{player}_taxes_{vassal}_in_{season}"
    return move


def _war_season(attacker: str, target: str, if_taken: str, victim_moves: Any,
                disarm: bool = False) -> tuple[tuple[str, Any, int], ...]:
    """A season of war: the attacker chooses tax seasons and besieges; the target acts once in between (in ruins, if
    the siege destroyed it), then three times; every city ends its turn."""
    return (
        (attacker, realm_tax(attacker, target, "fall"), 1_000),
        (attacker, realm_tax(attacker, target, "winter"), 1_000),
        *((attacker, realm_attack(attacker, target, if_taken, disarm), 1_000) for _ in range(4)),
        (target, {"kind": "cut_wood"}, 1_000),
        (attacker, realm_attack(attacker, target, if_taken, disarm), 1_000),
        (attacker, realm_tax(attacker, target, "spring"), 1_000),
        (attacker, realm_tax(attacker, target, "winter"), 1_000),
        *((target, victim_moves, 1_000) for _ in range(3)),
        *_season_end(),
    )


REALM_WAR = {"players": list(_TRIO), "villages": 1, "years": 5, "actions_per_season": 8, "starting_stock": _RICH}

REALM_SCRIPTS = (
    # alice takes carol for tax and disarms; carol sabotages, revolts, buys her freedom; alice chooses tax seasons
    Script(options=REALM_WAR, players=_TRIO, moves=tuple(
        move for _ in range(16) for move in _war_season("alice", "carol", "tax", realm_vassal("carol"), True)),
        repeat=4),
    # carol's merchant visits bob; alice destroys bob (the merchant comes home), who acts in ruins and restarts; his
    # new city is immune for a year
    Script(options=REALM_WAR, players=_TRIO, moves=(
        ("alice", {"kind": "send_merchant", "to": "carol", "load": {"wood": 100}}, 1_000),
        ("carol", {"kind": "send_merchant", "to": "bob", "load": {"wood": 100}}, 1_000),
        *(move for _ in range(10) for move in _war_season("alice", "bob", "destroy", realm_attack("bob", "alice", "tax")))),
        repeat=3),
    # carol takes bob, then alice destroys carol: carol's vassal bob goes free
    Script(options=REALM_WAR, players=_TRIO, moves=tuple(
        move for _ in range(4) for move in _war_season("carol", "bob", "tax", {"kind": "cut_wood"}, True))
        + tuple(move for _ in range(12) for move in _war_season("alice", "carol", "destroy", {"kind": "cut_wood"})),
        repeat=3),
    # the creator is not among the listed players (a seat is made for her); dave joins with no city; a room that
    # hands seats to bots asks the season's deadlines after every command
    Script(options={"players": ["bob", "carol"], "villages": 0, "years": 1, "season_timeout_ms": 60_000},
           players=(*_TRIO, "dave"), create={"bot_after_missed": 1}, moves=(
               ("dave", {"kind": "find_herbs"}, 1_000), *rounds(_TRIO, 3, 1_000),
               ("alice", {"kind": "end_season"}, 120_000), *rounds(_TRIO, 3, 1_000))),
    # no season timeout (no deadline); mining with no lesser ore to fall back on (a blank finds no stone)
    Script(options={"players": list(_TRIO), "villages": 0, "years": 1, "season_timeout_ms": 0}, players=_TRIO,
           create={"bot_after_missed": 2}, moves=tuple(
               move for ore in ("stone", "stone", "bronze", "stone")
               for move in ((("bob", {"kind": "mine", "ore": ore, "lesser_ore": "none"}, 1_000),) * 3
                            + (("alice", BOT, 1_000),) + _season_end()))),

    Script(options={"players": list(_TRIO), "villages": 1, "years": 1, "actions_per_season": 8,
                    "starting_stock": _RICH}, players=_TRIO, moves=(
        ("alice", {"kind": "send_merchant", "to": "bob", "load": {}}, 1_000),
        ("alice", {"kind": "send_merchant", "to": "bob", "load": {"wood": 100}}, 1_000),
        ("bob", realm_trade("counter_offer", want="food"), 1_000),
        ("bob", realm_trade("agree_trade"), 1_000),
        ("carol", realm_trade("agree_trade"), 1_000),
        ("carol", realm_trade("decline_trade"), 1_000),
        ("carol", realm_trade("counter_offer", want="food"), 1_000),
        ("carol", realm_trade("offer_trade", buy="food", pay="wood", dice=1), 1_000),
        ("bob", {"kind": "smelt", "ore": "iron", "amount": 0}, 1_000),
        ("bob", {"kind": "fortify", "wood": 1}, 1_000),
        ("bob", {"kind": "fortify", "stone": 1}, 1_000),
        ("bob", realm_too_many_soldiers, 1_000),
        ("bob", {"kind": "raise_army", "soldiers": 1_000}, 1_000),
        ("bob", {"kind": "equip_army", "tier": "bronze"}, 1_000),
        ("bob", {"kind": "equip_army", "tier": "bronze"}, 1_000),
        ("bob", {"kind": "heal_army", "points": 1}, 1_000),
        ("carol", {"kind": "choose_tax_season", "city": "bob", "season": "fall"}, 1_000),
        ("carol", {"kind": "buy_freedom"}, 1_000), ("carol", {"kind": "sabotage"}, 1_000),
        ("carol", {"kind": "revolt"}, 1_000), ("carol", {"kind": "restart_city"}, 1_000),
        ("carol", {"kind": "besiege", "target": "carol"}, 1_000),
        *_season_end(),
        ("alice", {"kind": "send_merchant", "to": "carol", "load": {"wood": 100}}, 1_000),
        ("alice", realm_trade("offer_trade", buy="food", pay="wood", dice=2), 1_000),
        ("bob", realm_trade("agree_trade"), 1_000),
        ("bob", realm_trade("counter_offer", want="stone"), 1_000),
        ("alice", realm_trade("agree_trade"), 1_000), ("alice", realm_trade("agree_trade"), 1_000),
        *_season_end(),
        ("bob", {"kind": "get_food", "method": "farm"}, 1_000),
        *_season_end(),
        ("bob", {"kind": "get_food", "method": "farm"}, 1_000), ("bob", {"kind": "find_herbs"}, 1_000),
        *_season_end(),
    )),
)


# --- sectors: the hungry colony's mountain (1,2) holds its cap of 100 people and its limit of 5 buildings, the
# forest (2,3) its cap of 200

SECTORS_SCRIPTS = (
    Script(options={"years": 1, "setup": golden._HUNGRY_COLONY}, moves=(
        ("alice", {"kind": "move_people", "from_row": 2, "from_column": 2, "to_row": 1, "to_column": 2, "count": 1},
         1_000),
        ("alice", {"kind": "move_people", "from_row": 2, "from_column": 2, "to_row": 2, "to_column": 3, "count": 5},
         1_000),
        ("alice", {"kind": "build", "row": 1, "column": 2, "building": "mine"}, 1_000),
        ("alice", {"kind": "build", "row": 2, "column": 3, "building": "mine"}, 1_000),
        *bots("alice", 12),
    )),
)


# carol takes bob and disarms; alice then besieges carol seven times a season until she is destroyed: bob goes free
REALM_FALL = Script(
    options={**REALM_WAR, "years": 6}, players=_TRIO, repeat=4,
    moves=tuple(move for _ in range(4) for move in _war_season("carol", "bob", "tax", {"kind": "cut_wood"}, True))
    + tuple(move for _ in range(20) for move in (
        *(("alice", realm_attack("alice", "carol", "destroy"), 1_000) for _ in range(8)), *_season_end())))


def _move(from_row: int, from_column: int, to_row: int, to_column: int, count: int) -> tuple[str, dict[str, Any], int]:
    return ("alice", {"kind": "move_people", "from_row": from_row, "from_column": from_column, "to_row": to_row,
                      "to_column": to_column, "count": count}, 1_000)


# people leave the full mountain and the full forest and come back to exactly their caps (allowed), then one more
SECTORS_TO_THE_CAP = (
    Script(options={"years": 1, "setup": golden._HUNGRY_COLONY}, moves=(
        _move(1, 2, 2, 2, 10), _move(2, 2, 1, 2, 10), _move(2, 2, 1, 2, 1),
        _move(2, 3, 2, 2, 30), _move(2, 2, 2, 3, 30), _move(2, 2, 2, 3, 1),
        *bots("alice", 8),
    )),
)


# A 3x3 colony of one sector at the west edge (1,0): exploring (0,2) is refused, as no neighbour of it is explored
# (the sector after (0,2) in row-major order is (1,0), but it is not a neighbour: the grid does not wrap)
SECTORS_EDGE = (
    Script(options={"years": 1, "setup": {
        "rows": 3, "columns": 3, "season": "summer", "year": 1, "stock": {"food": 500, "wood": 300, "gold": 200},
        "sectors": [{"row": 1, "column": 0, "type": "prairie", "population": 300, "buildings": ["farm"]}]}},
        moves=(("alice", {"kind": "explore", "row": 0, "column": 2}, 1_000),
               ("alice", {"kind": "explore", "row": 2, "column": 2}, 1_000),
               ("alice", {"kind": "explore", "row": 1, "column": 1}, 1_000), *bots("alice", 6))),
)


BATCHES: dict[str, dict[str, tuple[Recipe | Script | Adopted, ...]]] = {
    "sectors": {"1-scripts": SECTORS_SCRIPTS, "2-to-the-cap": SECTORS_TO_THE_CAP, "3-edge": SECTORS_EDGE},
    # the wars again on other dice (battles and sabotage go either way)
    "realm": {"1-scripts": REALM_SCRIPTS, "2-wars": tuple(dataclasses.replace(script, repeat=2)
                                                          for script in REALM_SCRIPTS[:3]),
              "3-fall": (REALM_FALL,)},
    "claim": {"1-scripts": CLAIM_SCRIPTS, "2-broke": (_claim_broke(5), _claim_broke(6)),
              # two days on, a deck filled to its last log, and one filled but for a cut one log too big
              "3-full-deck": tuple(Script(moves=(("alice", {"kind": "cruise"}, 2 * 24 * _HOUR),
                                                 *(("alice", claim_fill_deck(extra), 1_000) for _ in range(4))))
                                   for extra in (0, 1))},
    "board": {
        "1-seeds": (
            # other seeds of the golden recipes' mixes, more random and stranger moves among the bot's
            Recipe(options={"extended_pool": True}, mix=(3, 2, 3, 2), players=_DUO, dice_scheme=2, repeat=3),
            Recipe(options={"mountain_bonus": True}, mix=(5, 1, 1, 0), repeat=2),
        ),
    },
}
def board_time_out(game: Any) -> dict[str, Any]:
    """The current turn's time out (the clock's command, sent by the map's owner once the turn is due)."""
    return {"kind": "time_out", "turn": game.placed + game.skipped + game.timed_out}


def board_squeeze(game: Any) -> dict[str, Any]:
    """The current element placed where the next one keeps the fewest fits off the last row (and the most on it):
    the map fills from the top until the next element fits only on its last row (a skip is then refused only
    because ``any_placement`` scans that row). An element that fits nowhere is skipped."""
    from almanac.games.board.v1.data import ELEMENTS  # noqa: PLC0415 - only recording reads the elements
    from almanac.games.board.v1.rules import current_element, in_map_placements, is_free  # noqa: PLC0415

    free = [(command, cells) for command, cells in in_map_placements(current_element(game))
            if is_free(game.board, cells)]
    if not free:
        return {"kind": "skip_element"}
    following = in_map_placements(ELEMENTS[game.deck[1]]) if len(game.deck) > 1 else ()
    last_row = len(game.board) - 1

    def fits_left(cells: tuple[tuple[int, int], ...]) -> tuple[int, int]:
        taken = set(cells)
        on_last_row = [max(row for row, _ in other) == last_row for _, other in following
                       if not taken.intersection(other) and is_free(game.board, other)]
        return on_last_row.count(False), -on_last_row.count(True)

    return codec.encode_command(min(free, key=lambda placement: fits_left(placement[1]))[0])


VERSION_BATCHES: dict[str, dict[str, tuple[Recipe | Script | Adopted, ...]]] = {
    # the wide game that first caught a mutant every golden log misses: an intercepted merchant who rolls only as
    # well as the army escapes (``rules.py:447`` ``>`` -> ``>=``; a tie seizes his load): ``run realm@1 --wide-salt
    # wide --match rules.py:447:18``, 2026-12-05
    "realm@1": {"4-adopted": (Adopted(16),)},
    "board@2": {
        # the wide games that first caught the mission scorings' mutants board@2's golden logs miss (``run board@2
        # --wide-salt wide``, 2026-12-05): a cell's west neighbour in ``neighbours`` on the first columns (8, 33)
        # and its east neighbour on the last (74), a west neighbour in ``_next_to`` (82), borderlands' full rows
        # and columns (112)
        "3-adopted": tuple(Adopted(index) for index in (8, 33, 74, 82, 112)),
        # a skip asked before every placement, the placements squeezing the next element to the map's bottom rows:
        # each skip is refused while the element fits somewhere, the last row too (``any_placement`` scans every
        # in-map placement; games 1 to 3 reach an element that fits only on the last row)
        "4-skips": (Script(repeat=4, moves=tuple(move for _ in range(40) for move in (
            ("alice", {"kind": "skip_element"}, 1_000), ("alice", board_squeeze, 1_000)))),),
        # the owner misses turns (their time outs come when due): deadline_missed, then the seat goes to a bot
        # after two; a room with a bot policy and no turn limit names no deadline
        "2-missed": (
            Script(options={"turn_limit_s": 10}, create={"bot_after_missed": 2}, moves=(
                ("alice", BOT, 1_000), ("alice", board_time_out, 20_000), ("alice", BOT, 1_000),
                ("alice", board_time_out, 20_000), ("alice", board_time_out, 20_000), *bots("alice", 4))),
            Script(create={"bot_after_missed": 1}, moves=bots("alice", 4)),
        ),
        "1-deadlines": (
            # a room that hands a seat to a bot after one missed deadline: the room asks the rules' deadlines
            # (seats.py) after every accepted command; turns of ten seconds on clocks of minutes time out
            Script(options={"turn_limit_s": 10}, create={"bot_after_missed": 1},
                   moves=rounds(("alice",), 6, 60_000) + (("alice", {"kind": "time_out", "turn": 7}, 60_000),)
                   + rounds(("alice",), 4, 1_000)),
            # a turn's time out sent before the turn is over
            Script(options={"turn_limit_s": 60}, create={"bot_after_missed": 2},
                   moves=(("alice", {"kind": "time_out", "turn": 0}, 1_000),) + rounds(("alice",), 3, 70_000)),
            # no turn limit: nothing times out
            Script(moves=(("alice", {"kind": "time_out", "turn": 1}, 1_000),) + rounds(("alice",), 3)),
        ),
    },
}


def batches_for(manifest: Any) -> dict[str, tuple[Recipe | Script | Adopted, ...]]:
    return {**BATCHES.get(manifest.name, {}), **VERSION_BATCHES.get(manifest.ref, {})}


def folder_for(ref: str) -> Path:
    return GAMES / ref


def files_for(ref: str) -> list[Path]:
    return sorted(folder_for(ref).glob("*.json.gz"))


def games_for(manifest: Any) -> list[dict[str, Any]]:
    """Every recorded game of a version's grown corpus (its batches in name order); only ``manifest.ref`` is read."""
    return [game for path in files_for(manifest.ref) for game in golden.read(path)["games"]]


def recipes_for(manifest: Any) -> tuple[Recipe, ...]:
    """The recipes of a version's batches (the mutation test plays more games of them: its wide corpus)."""
    return tuple(game for games in batches_for(manifest).values() for game in games if isinstance(game, Recipe))


def wide_recipes(manifest: Any) -> tuple[Recipe, ...]:
    """The mutation test's wide games of the grown corpus: its recipes, ``golden.WIDE_REPEAT`` times as many games
    (after the golden recipes', so the golden wide games keep their indexes). Scripts have no other seeds to
    play: a script's moves are its game."""
    return tuple(dataclasses.replace(recipe, repeat=recipe.repeat * golden.WIDE_REPEAT)
                 for recipe in recipes_for(manifest))


def write(manifest: Any) -> list[Path]:
    """Every batch of ``manifest`` not yet written; a written batch is never rewritten."""
    written = []
    for name, games in batches_for(manifest).items():
        path = folder_for(manifest.ref) / f"{name}.json.gz"
        if path.exists():
            continue
        batch = record(manifest, name, games)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(batch, sort_keys=True, separators=(",", ":")).encode()
        path.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
        written.append(path)
    return written


def main(argv: list[str]) -> None:
    for path in (path for manifest in chosen(argv) for path in write(manifest)):
        games = golden.read(path)["games"]
        events = sum(len(g["export"]["envelopes"]) for g in games)
        refused = sum(len(g["export"]["rejections"]) for g in games)
        print(f"{path.relative_to(HERE.parent.parent)}: {len(games)} games, {events} events, {refused} refusals, "
              f"{path.stat().st_size} bytes", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
