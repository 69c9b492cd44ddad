"""Scripted games for projection tests: a tiny trading rule-set, game drivers per rule-set, read-model dumps."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events import codec, registry
from almanac.events.decider import Context
from almanac.events.dice import Dice
from almanac.events.envelope import Envelope
from almanac.events.errors import RuleError
from almanac.events.manifest import ReadModel, RuleSet
from almanac.services.room_service import CommandRecord, RoomService

# --- "bazaar": a tiny rule-set whose events carry trade ids, like realm's trades ------------------


class BazaarOptions(msgspec.Struct, frozen=True, kw_only=True):
    purse: int = 100


class BazaarSetup(msgspec.Struct, frozen=True, kw_only=True):
    purse: int


class Offer(msgspec.Struct, frozen=True, kw_only=True, tag="offer", tag_field="kind"):
    trade_id: str
    to: str
    gold: int


class Settle(msgspec.Struct, frozen=True, kw_only=True, tag="settle", tag_field="kind"):
    trade_id: str


class Transfer(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    target: str
    gold: int


class TradeOffered(msgspec.Struct, frozen=True, kw_only=True, tag="bazaar.trade_offered"):
    trade_id: str
    seller: str
    buyer: str
    gold: int


class TradeSettled(msgspec.Struct, frozen=True, kw_only=True, tag="bazaar.trade_settled"):
    trade_id: str
    dice: tuple[int, ...]
    stars: int
    transfers: tuple[Transfer, ...]
    holdings_after: dict[str, int]


class BazaarState(msgspec.Struct, frozen=True, kw_only=True):
    purse: int
    holdings: dict[str, int] = {}
    open_trades: dict[str, TradeOffered] = {}


class BazaarDecider:
    name = "bazaar"
    options_type = BazaarOptions
    setup_type = BazaarSetup
    state_type = BazaarState
    command_types = (Offer, Settle)
    event_types = (TradeOffered, TradeSettled)
    secrets: dict[type, tuple] = {}  # nothing is hidden

    def setup(self, options: BazaarOptions, ctx: Context) -> BazaarSetup:
        return BazaarSetup(purse=options.purse)

    def initial_state(self, setup: BazaarSetup) -> BazaarState:
        return BazaarState(purse=setup.purse)

    def decide(self, state: BazaarState, command: Any, ctx: Context) -> list[Any]:
        if isinstance(command, Offer):
            return [TradeOffered(trade_id=command.trade_id, seller=ctx.player, buyer=command.to, gold=command.gold)]
        offer = state.open_trades.get(command.trade_id)
        if offer is None:
            raise RuleError("bazaar.no_trade", f"no open trade {command.trade_id!r}")
        dice = ctx.dice.d6(2)
        stars = sum(1 for face in dice if face >= 4)
        holdings = self._holdings(state, offer)
        amount = offer.gold * stars // 2
        holdings[offer.buyer] -= amount
        holdings[offer.seller] += amount
        transfer = Transfer(source=offer.buyer, target=offer.seller, gold=amount)
        return [TradeSettled(trade_id=offer.trade_id, dice=dice, stars=stars, transfers=(transfer,),
                             holdings_after=holdings)]

    def _holdings(self, state: BazaarState, offer: TradeOffered) -> dict[str, int]:
        holdings = dict(state.holdings)
        for player in (offer.seller, offer.buyer):
            holdings.setdefault(player, state.purse)
        return holdings

    def evolve(self, state: BazaarState, event: Any) -> BazaarState:
        trades = dict(state.open_trades)
        if isinstance(event, TradeOffered):
            trades[event.trade_id] = event
            return msgspec.structs.replace(state, open_trades=trades)
        trades.pop(event.trade_id, None)
        return msgspec.structs.replace(state, open_trades=trades, holdings=dict(event.holdings_after))

    def is_over(self, state: BazaarState) -> bool:
        return False

    def seats(self, state: BazaarState) -> tuple[str, ...]:
        return ()

    def view(self, state: BazaarState, player: str) -> Any:
        return msgspec.to_builtins(state)

    def redact(self, event: Any, player: str) -> Any:
        return event

    def scores(self, state: BazaarState) -> dict[str, int]:
        return dict(state.holdings)

    def public_scores(self, state: Any) -> dict[str, int]:
        return self.scores(state)  # nothing is hidden

    def resources(self, state: BazaarState) -> dict[str, Any]:
        return {"gold": dict(state.holdings), "open_trades": sorted(state.open_trades)}

    def summary(self, event: Any) -> str:
        return trade_step(event)


def trade_step(event: Any) -> str:
    """A trade step in a few words: the ledger's rows say it (read-model code is rules, so it may not call the
    decider's ``summary``, presentation the fingerprint leaves out: events/fingerprint.py)."""
    return f"{event.__struct_config__.tag} {event.trade_id}"


def bazaar_ledger(envelope: Envelope, event: Any) -> list[dict[str, Any]]:
    """The bazaar's own read model: one ledger row per trade step, with everything the step records."""
    if not isinstance(event, TradeOffered | TradeSettled):
        return []
    detail = {k: v for k, v in codec.to_builtins(event).items() if k != event.__struct_config__.tag_field}
    return [{"room": envelope.room, "version": envelope.version, "trade": event.trade_id, "type": envelope.type,
             "player": envelope.player, "time_ms": envelope.server_time_ms,
             "summary": trade_step(event), "detail": detail}]


BAZAAR = registry.register(RuleSet(
    decider=BazaarDecider(),
    read_models=(ReadModel(name="bazaar_trades", description="every trade step", event_rows=bazaar_ledger,
                           order_by=("room", "version"), filters=("trade",),
                           columns=("room", "version", "trade", "type", "player", "summary"), auditors_only=True),),
))


# --- driving games through the RoomService ---------------------------------------------------


def record(command_id: str, room: str, player: str, body: dict, now_ms: int) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def send(service: RoomService, room: str, player: str, body: dict, now_ms: int, tag: str) -> int:
    outcome = await service.handle(record(f"{room}:{tag}", room, player, body, now_ms))
    assert outcome.accepted, outcome.error
    return outcome.last_version


def available_rulesets() -> list[str]:
    """The four real rule-sets plus the test ones."""
    return ["counter", "bazaar", "board", "claim", "sectors", "realm"]


async def open_room(service: RoomService, room: str, ruleset: str, players: list[str], now_ms: int = 1_000,
                    options: dict | None = None) -> None:
    body = {"kind": "create_room", "ruleset": ruleset, "options": options or {}}
    await send(service, room, players[0], body, now_ms, "create")
    for player in players:
        await send(service, room, player, {"kind": "join_room"}, now_ms, f"join-{player}")


async def play(service: RoomService, room: str, ruleset: str, moves: int, players: list[str],
               start_ms: int = 2_000, first_move: int = 0) -> int:
    """Play ``moves`` commands of a rule-set's simple policy (or a scripted counter/bazaar line); the last version."""
    version = 0
    for index in range(first_move, first_move + moves):
        state, _ = await service.load(room)
        if state.ended:
            break
        now_ms = start_ms + index * 3_600_000
        body = None
        # Whoever has something to do plays (realm: a player who ended their turn waits for the season).
        for offset in range(len(players)):
            player = players[(index + offset) % len(players)]
            body = _next_command(ruleset, state, player, index, now_ms)
            if body is not None:
                break
        if body is None:
            break
        version = await send(service, room, player, body, now_ms, f"m{index}")
    return version


def _next_command(ruleset: str, state: Any, player: str, index: int, now_ms: int) -> dict | None:
    dice = Dice(b"policy" * 6, state.room, index)
    if ruleset == "counter":
        return {"kind": "add", "amount": 1 + index % 3} if index % 4 else {"kind": "roll", "dice": 2}
    if ruleset == "bazaar":
        trade = f"t{index // 2}"
        if index % 2 == 0:
            buyer = [p for p in state.players if p != player][0]
            return {"kind": "offer", "trade_id": trade, "to": buyer, "gold": 10 + index}
        return {"kind": "settle", "trade_id": trade}
    game = state.game
    owner = player if ruleset == "realm" else getattr(game, "owner", None) or getattr(game, "player", None)
    command = registry.manifest(ruleset).policy(game, owner, dice, now_ms)
    return None if command is None else codec.encode_command(command)


def players_for(ruleset: str) -> list[str]:
    # board, claim and sectors have a single seat: the creator's; realm seats alice and bob by default.
    return ["alice", "bob"] if ruleset in ("counter", "bazaar", "realm") else ["alice"]


def options_for(ruleset: str) -> dict:
    return {"seats": ["alice", "bob"]} if ruleset == "counter" else {}


# --- comparing read models -------------------------------------------------------------------


async def dump_models(client: Any, prefix: str = "alm") -> dict[str, Any]:
    """Every read-model key and its full value (checkpoints included), for equality checks."""
    dump: dict[str, Any] = {}
    async for raw_key in client.scan_iter(match=f"{prefix}:*:rm:*", count=1000):
        key = raw_key.decode()
        kind = (await client.type(key)).decode()
        if kind == "string":
            dump[key] = await client.get(key)
        elif kind == "hash":
            dump[key] = await client.hgetall(key)
        elif kind == "set":
            dump[key] = sorted(await client.smembers(key))
        elif kind == "zset":
            dump[key] = await client.zrange(key, 0, -1, withscores=True)
        else:
            raise AssertionError(f"unexpected {kind} at {key}")
    return dump
