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

A batch holds games of two kinds:

- a golden ``Recipe`` (bot, near-miss, random and stranger moves), played with the salt ``grown`` so its
  seeds, dice and clocks differ from the golden corpus' games of the same recipe;
- a ``Script``: a creation with room options a recipe cannot set (``bot_after_missed``) and explicit moves
  (a body, or the bot's move), for states the recipes do not reach (a refusal only a precise command meets).
"""

from __future__ import annotations

import asyncio
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
        elif callable(body):
            body = body(state.game)
        if body is None:
            continue
        await send(player, body, step_ms)
    state, _ = await service.load(room)
    if not state.ended:
        await send(players[0], {"kind": "end_room", "reason": "the grown game is long enough"})
    last = (await store.read(room))[-1]
    return await compact_export(store, room, last.server_time_ms)


def record(manifest: Any, batch: str, games: tuple[Recipe | Script, ...]) -> dict[str, Any]:
    """A batch: every game of ``games`` (a recipe ``repeat`` times) played with the batch's own salt and
    recorded with its expectations (``golden.expectations``)."""
    recorded = []
    salt = f"{SALT}-{batch}-"
    for index, game in enumerate(game for game in games for _ in range(getattr(game, "repeat", 1))):
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
    # hay sold without a barn, then the claim logged bare: too little cover to prove up
    Script(moves=(
        ("alice", {"kind": "farm", "parcel": "A8"}, _HOUR), ("alice", {"kind": "harvest", "parcel": "A8"}, 7 * _HOUR),
        *(("alice", claim_logger, _HOUR) for _ in range(90)),
        ("alice", claim_cabin, _HOUR), ("alice", {"kind": "prove_up"}, 48 * _HOUR),
    )),
)
BATCHES: dict[str, dict[str, tuple[Recipe | Script, ...]]] = {
    "claim": {"1-scripts": CLAIM_SCRIPTS},
    "board": {
        "1-seeds": (
            # other seeds of the golden recipes' mixes, more random and stranger moves among the bot's
            Recipe(options={"extended_pool": True}, mix=(3, 2, 3, 2), players=_DUO, dice_scheme=2, repeat=3),
            Recipe(options={"mountain_bonus": True}, mix=(5, 1, 1, 0), repeat=2),
        ),
    },
}
VERSION_BATCHES: dict[str, dict[str, tuple[Recipe | Script, ...]]] = {
    "board@2": {
        "1-deadlines": (
            # a room that hands a seat to a bot after one missed deadline: the room asks the rules' deadlines
            # (seats.py) after every accepted command; turns of ten seconds on clocks of minutes time out
            Script(options={"turn_limit_s": 10}, create={"bot_after_missed": 1},
                   moves=rounds(("alice",), 6, 60_000) + (("alice", {"kind": "time_out", "turn": 7}, 60_000),)
                   + rounds(("alice",), 4, 1_000)),
            # bob owns the map and never joins: no deadline names a seat not taken
            Script(options={"turn_limit_s": 10, "player": "bob"}, create={"bot_after_missed": 2},
                   moves=rounds(("alice",), 3, 60_000)),
            # no turn limit: nothing times out
            Script(moves=(("alice", {"kind": "time_out", "turn": 1}, 1_000),) + rounds(("alice",), 3)),
        ),
    },
}


def batches_for(manifest: Any) -> dict[str, tuple[Recipe | Script, ...]]:
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
