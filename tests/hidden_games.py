"""Same game, different hidden values: play a game twice and collect what an outsider receives at each step.

Run A plays every rule-set version's bot policy (its manifest's ``policy``; the example plugins' too) for
three players through the pure kernel (`game_driver.PureRoom`), all dice from one secret seed. Run B replays A's commands, same players,
same times, same order, but its room has a secret seed of its own (a different seed commitment, what
its creation draws in secret differs: board's deck) and the dice of the commands whose rolls are hidden
from the outsider come from another seed: only hidden values differ, every public roll is the same (a
seed whose creation or card turns up a different public value is passed over). The seed commitment is
the one public trace of the secret seed, a hash that tells nothing of it: `alike` compares B's receipts
with A's once B's commitment reads as A's.

After each command the outsider's receipts are collected, exactly as the gateway builds them: the events
(`events.shown.shown_to`, which the HTTP /events route, the WebSocket feed, command answers, webhooks and
the v2 commitments all use), their view,
the public scores (/scores), the public room summary, and the projections' leaderboard and summary scores.

Once hidden values change what the rules make public, the runs may differ publicly; comparing stops at the
first such step (`divergence`): the events that happened differ (a command accepted in one run only, a
trade cancelled in one run only), a public roll differs (a draw turned up for everyone), or the outsider
is a party entitled to a value that differs (a raid on the city whose dice changed), or the game is over
(the final scores are public, and the room's end reveals the seed).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from game_driver import PureRoom

from almanac.events import codec, registry, room as room_rules
from almanac.events.decider import event_tag
from almanac.events.dice import Dice
from almanac.events.disclosure import hidden_fields
from almanac.events.envelope import Envelope
from almanac.events.errors import RuleError
from almanac.events.shown import shown_to
from almanac.projections import read_model_rows
from almanac.services.gateway.room_reader import room_summary

PLAYERS = ("alice", "bob", "carol")
OUTSIDER = "carol"
SEED_A = b"hidden-games seed A, 32 bytes..."
SEED_B = b"hidden-games seed B, 32 bytes..."
# The repository's example plugins (examples/<plugin>/pyproject.toml): rule-sets to compare like the installed ones.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

Step = tuple[str, dict[str, Any], int]  # player, command body, server time


class Variation(msgspec.Struct, frozen=True, kw_only=True):
    """How one rule-set plays, which commands roll hidden dice, and which events are public rolls."""

    ruleset: str
    options: dict[str, Any]
    owner: str  # whose hidden values vary (the outsider is carol unless the owner is the only player)
    outsider: str = OUTSIDER
    hidden_kinds: frozenset[str] = frozenset()  # command kinds whose dice may differ between the runs
    public_rolls: frozenset[str] = frozenset()  # event tags whose stored content is a public roll
    step_ms: int = 1_000
    # What a step turns up for everyone, from the game after it and the step's events (board: the next card,
    # which the view shows; the duel: a decided round's totals): a varied step is retried with other seeds until
    # it turns up what run A's did, and a differing one ends the comparison.
    turned_up: Callable[[Any, list[Envelope]], Any] | None = None
    # The room's own secret seed differs between the runs (board: no, its deck would turn up other cards at
    # the other players' steps; the owner's reshuffles vary it instead).
    seed_varies: bool = True
    # A second game of a rule-set is named apart (its rooms too): ``realm-bots`` is realm with a bot policy.
    name: str = ""
    # More of the create command than the rule-set and options (``bot_after_missed``...).
    create: dict[str, Any] = {}
    # Who does what instead of the policy (``script(state, player, now)``): a command body, IDLE (nothing), or
    # None (the policy plays). And whether a deadline once due is sent by its player, as the server's clock would.
    script: Callable[[Any, str, int], Any] | None = None
    clock: bool = False
    # Event types the compared part of run A must hold (else the variation covers less than it is for).
    covers: frozenset[str] = frozenset()
    # The game (number) the routes test stores behind its twin gateways: one whose compared part holds ``covers``.
    route_game: int = 0

    @property
    def key(self) -> str:
        return self.name or self.ruleset


IDLE = "idle"  # a script's answer: the seat does nothing this time (it misses the season's deadline)


def board_turned_up(game: Any, envelopes: list[Envelope]) -> Any:
    return game.deck[0] if game.deck and not game.over else None


VARIATIONS = {
    "realm": Variation(
        ruleset="realm",
        options={"players": list(PLAYERS), "villages": 1, "years": 2},
        owner="alice",
        hidden_kinds=frozenset({"mine", "smelt", "get_food", "find_herbs", "cut_wood", "agree_trade"}),
        public_rolls=frozenset({"realm.merchant_intercepted"}),
    ),
    # The deck order is hidden from everyone, the owner included: she is the outsider of her own deck.
    "board": Variation(
        ruleset="board", options={}, owner="alice", outsider="alice",
        hidden_kinds=frozenset({"place_element", "skip_element"}), turned_up=board_turned_up, seed_varies=False,
    ),
    # Nothing is hidden but the future: every draw is public when drawn; the whole seed varies.
    "sectors": Variation(
        ruleset="sectors", options={}, owner="alice", hidden_kinds=frozenset({"*"}),
        public_rolls=frozenset({"sectors.sector_explored"}),
    ),
    "claim": Variation(ruleset="claim", options={}, owner="alice", hidden_kinds=frozenset({"*"}),
                       step_ms=3 * 3_600_000),
}


def idle_bob(state: Any, player: str, now: int) -> Any:
    """Realm with seat bots: carol leaves her seat to a bot at her first move; bob misses the first season's
    deadline, plays the second (his count starts again), then misses two in a row and is handed to a bot. A bot
    seat plays on as the policy."""
    if player == "carol" and "carol" not in state.bot_seats:
        return {"kind": "hand_to_bot"}
    if player == "bob" and "bob" not in state.bot_seats and state.game.season_index != 1:
        return IDLE
    return None


VARIATIONS["realm-bots"] = Variation(
    ruleset="realm", name="realm-bots",
    options={"players": list(PLAYERS), "villages": 1, "years": 2, "season_timeout_ms": 20_000},
    create={"bot_after_missed": 2}, script=idle_bob, clock=True,
    owner="alice",
    hidden_kinds=VARIATIONS["realm"].hidden_kinds,
    public_rolls=VARIATIONS["realm"].public_rolls,
    covers=frozenset({"room.bot_policy", "room.deadline_missed", "room.seat_active", "room.seat_to_bot"}),
    # its compared part: carol left, bob missed, played again, then missed two in a row and went to a bot
    route_game=3,
)


# Every other installed version plays its own twins: realm@2 resolves mining its own way (a skull cancels a star).
VARIATIONS["realm-v2"] = msgspec.structs.replace(VARIATIONS["realm"], ruleset="realm@2", name="realm-v2")


def board_idles(state: Any, player: str, now: int) -> Any:
    """board@2 with a turn limit: the owner lets every fourth turn run out (the clock times it out), plays the rest."""
    game = state.game
    return IDLE if player == "alice" and (game.placed + game.skipped + game.timed_out) % 4 == 2 else None


# board@2's own option: a turn limit, a turn the owner leaves idle timed out by the clock (three seats a round, 4 s
# each: a round outlasts the 10 s limit). A timeout skips the element, so its card turns up as a placement's.
VARIATIONS["board-v2"] = msgspec.structs.replace(
    VARIATIONS["board"], ruleset="board@2", name="board-v2", options={"turn_limit_s": 10}, step_ms=4_000,
    hidden_kinds=VARIATIONS["board"].hidden_kinds | {"time_out"}, script=board_idles, clock=True,
    covers=frozenset({"board.turn_began", "board.turn_timed_out"}))


def duel_turned_up(game: Any, envelopes: list[Envelope]) -> Any:
    """A decided round's totals (and winner): public once both have rolled."""
    return [e.payload for e in envelopes if e.type == "dice_duel.round_won"] or None


# The dice duel (examples/dice-duel, a plugin): bob, the second to roll, owns the varied rolls; alice, the seat
# that rolled before him, is the outsider. His faces differ, their total (public once the round is decided) does
# not: every round is compared, not only up to the first.
VARIATIONS["dice_duel"] = Variation(
    ruleset="dice_duel", options={}, owner="bob", outsider="alice", hidden_kinds=frozenset({"roll"}),
    turned_up=duel_turned_up,
)


def play_a(variation: Variation, game_number: int, moves: int) -> list[Step]:
    """Run A: the rule-set's policy for every seated player until the game ends or ``moves`` commands."""
    room = PureRoom(room=f"{variation.key}-{game_number}", seed=SEED_A)
    now = 1_000_000_000_000
    steps: list[Step] = [(variation.owner, {"kind": "create_room", "ruleset": variation.ruleset,
                                            "options": variation.options, **variation.create}, now)]
    steps += [(player, {"kind": "join_room"}, now) for player in PLAYERS]
    for player, body, at in steps:
        _send(room, player, body, at)
    manifest = room_rules.manifest_of(room.state)  # the room's own version's bot and rules
    decider = manifest.decider
    for turn in range(moves):
        if room.state.ended:
            break
        for seat, player in enumerate(room.state.players):
            now += variation.step_ms
            scripted = variation.script(room.state, player, now) if variation.script else None
            if scripted == IDLE:
                continue
            command = scripted or manifest.policy(room.state.game, player, Dice(b"policy", room.room, turn * 8 + seat),
                                                  now)
            if command is None or decider.is_over(room.state.game):
                continue
            body = command if isinstance(command, dict) else codec.encode_command(command)
            if _send(room, player, body, now) is not None:
                steps.append((player, body, now))
        if variation.clock and manifest.deadlines is not None and not room.state.ended:
            # as the server's clock: a deadline once due is sent by its player (services/clock.py)
            for deadline in manifest.deadlines(room.state.game, room.state.players):
                if deadline.due_ms <= now and _send(room, deadline.player, dict(deadline.command), now) is not None:
                    steps.append((deadline.player, dict(deadline.command), now))
    return steps


def _send(room: PureRoom, player: str, body: dict[str, Any], at: int) -> list[Envelope] | None:
    try:
        return room.send(player, body, now_ms=at)
    except RuleError:
        return None


class Receipt(msgspec.Struct, kw_only=True):
    """One step of one run: the stored events and what the outsider received."""

    envelopes: list[Envelope]
    refused: bool
    seen: dict[str, Any]
    turned_up: Any = None
    over: bool = False
    commitment: str = ""  # the room's seed commitment


def replay(variation: Variation, steps: list[Step], game_number: int, hidden_seed: bytes,
           like: list[Receipt] | None = None) -> list[Receipt]:
    """Play ``steps``; the room is created with ``hidden_seed`` as its secret seed (if the variation's
    ``seed_varies``), and the commands of the owner whose kind rolls hidden dice use it (every other
    command draws as in run A, from ``SEED_A``).

    With ``like`` (run A) the creation, and in a rule-set that turns cards up a varied command, try further
    seeds until the outsider receives the same as in A (the same card turned up): the hidden rest differs,
    the public draws do not.
    """
    room = PureRoom(room=f"{variation.key}-{game_number}", seed=SEED_A)
    receipts: list[Receipt] = []
    for index, (player, body, at) in enumerate(steps):
        creates = body["kind"] == "create_room" and variation.seed_varies
        varies = player == variation.owner and ({"*", body["kind"]} & variation.hidden_kinds)
        varies = creates or (varies and body["kind"] != "join_room")
        seeds = [SEED_A]
        if varies:
            tries = 256 if like is not None and (creates or variation.turned_up is not None) else 1
            seeds = [hidden_seed + bytes([n]) if n else hidden_seed for n in range(tries)]
        before, stored = room.state, len(room.envelopes)
        for seed in seeds:
            room.state, room.envelopes[stored:] = before, []
            room.seed = seed
            receipt = _step(variation, room, player, body, at)
            if like is None or (receipt.turned_up == like[index].turned_up
                                and (not creates or alike(like[index], receipt))):
                break
        room.seed = SEED_A
        receipts.append(receipt)
    return receipts


def alike(a: Receipt, b: Receipt) -> bool:
    """Whether the outsider receives the same in both runs, B's seed commitment read as A's."""
    return as_in(a.seen, a.commitment, a.commitment) == as_in(b.seen, b.commitment, a.commitment)


def as_in(value: Any, commitment: str, instead: str) -> Any:
    """``value`` as JSON reads it back, every occurrence of the seed commitment ``commitment`` written ``instead``."""
    return msgspec.json.decode(msgspec.json.encode(value).replace(commitment.encode(), instead.encode()))


def differing(a: Receipt, b: Receipt) -> int:
    """How many of the step's stored events differ between the runs (hidden fields, the seed commitment)."""
    return sum(ea.payload != eb.payload for ea, eb in zip(a.envelopes, b.envelopes, strict=True))


def _step(variation: Variation, room: PureRoom, player: str, body: dict[str, Any], at: int) -> Receipt:
    decider = registry.get(variation.ruleset)
    envelopes = _send(room, player, body, at)
    state = room.state
    game = state.game
    seen = {
        "events": [shown_to(e, variation.outsider) for e in envelopes or []],
        "view": codec.to_builtins(decider.view(game, variation.outsider)),
        "scores": codec.to_builtins(decider.public_scores(game)),
        "room": room_summary(state),
        "leaderboard": read_model_rows.leaderboard_scores(state),
        "summary_scores": read_model_rows.room_summary(state, 0)["scores"],
    }
    return Receipt(envelopes=envelopes or [], refused=envelopes is None, seen=seen,
                   turned_up=variation.turned_up(game, envelopes or []) if variation.turned_up else None,
                   over=bool(decider.is_over(game)), commitment=state.seed_commitment)


def rivals(variation: Variation) -> tuple[str, ...]:
    """The seats that hold none of the varied hidden values (everyone when the owner is an outsider too)."""
    return tuple(p for p in PLAYERS if p != variation.owner or p == variation.outsider)


def divergence(variation: Variation, a: Receipt, b: Receipt,
               outsiders: tuple[str, ...] | None = None) -> str | None:
    """Why the runs may differ publicly from this step on, for ``outsiders`` (default: the variation's
    outsider); None: they must receive the same."""
    outsiders = outsiders or (variation.outsider,)
    if a.refused != b.refused or [e.type for e in a.envelopes] != [e.type for e in b.envelopes]:
        return "what happened differs"
    if a.over:
        return "the game is over: the final scores are public"
    if a.turned_up != b.turned_up:
        return "a different card turned up"
    decider = registry.get(variation.ruleset)
    for ea, eb in zip(a.envelopes, b.envelopes, strict=True):
        if ea.payload == eb.payload:
            continue
        if ea.type in variation.public_rolls:
            return f"public roll {ea.type} differs"
        event_a, event_b = codec.decode_event(ea), codec.decode_event(eb)
        everyone = set(hidden_fields(decider.secrets, event_a, "\0nobody"))
        for outsider in outsiders:
            entitled = everyone - set(hidden_fields(decider.secrets, event_a, outsider))
            if any(_field(event_a, name) != _field(event_b, name) for name in entitled):
                return f"{outsider} is a party to {event_tag(event_a)}"
    return None


def _field(event: Any, name: str) -> Any:
    for part in name.split("."):
        event = getattr(event, part)
    return event


def example_plugins() -> dict[str, tuple[Path, str]]:
    """The rule-sets the repository's example plugins publish: entry-point name -> (the plugin's folder, its
    ``module:attribute``), read from each plugin's own pyproject.toml as pip would."""
    found: dict[str, tuple[Path, str]] = {}
    for project in sorted(EXAMPLES.glob("*/pyproject.toml")):
        points = tomllib.loads(project.read_text()).get("project", {}).get("entry-points", {})
        found |= {name: (project.parent, value) for name, value in points.get(registry.ENTRY_POINT_GROUP, {}).items()}
    return found


@contextlib.contextmanager
def plugins_known() -> Iterator[list[str]]:
    """Every example plugin's rule-set known to the registry for the block (the names yielded): one this
    environment has not installed is imported from its source folder and registered, then forgotten after
    (registry, modules, path), so the rest of the session sees the rule-sets as installed."""
    added: list[tuple[str, str, str]] = []
    try:
        for entry, (folder, value) in example_plugins().items():
            name = registry.parse(entry)[0]
            if registry.versions(name):
                continue  # installed (tests/gateway/test_plugin_game.py installs the dice duel for its module)
            sys.path.insert(0, str(folder))
            module, _, attribute = value.partition(":")
            added.append((name, str(folder), module.split(".")[0]))
            registry.register(getattr(importlib.import_module(module), attribute))
        codec.forget_rule_sets()  # decoders cached from another copy of a plugin (an install before) build its classes
        yield sorted({registry.parse(entry)[0] for entry in example_plugins()})
    finally:
        for name, folder, package in added:
            registry.unregister(name)
            sys.path.remove(folder)
            for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
                del sys.modules[module]
        codec.forget_rule_sets()

