"""A simple random-legal-play policy for benchmarks, demos and property tests: dice-chosen, probed for legality."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Context, Dice, RuleError
from almanac.games.realm.v1 import commands as realm_commands, data
from almanac.games.realm.v1.rules import DECIDE
from almanac.games.realm.v1.state import City, RealmState

PROBE_SEED = b"realm policy probe"


def is_legal(state: RealmState, command: Any, player: str) -> bool:
    """Whether the rules accept ``command`` now (decided against throwaway dice, nothing kept)."""
    ctx = Context(
        room="policy",
        player=player,
        now_ms=state.season_started_ms,
        version=0,
        dice=Dice(PROBE_SEED, "probe", 0),
    )
    try:
        DECIDE[type(command)](state, command, ctx)
    except RuleError:
        return False
    return True


def pick(dice: Dice, items: list[Any] | tuple[Any, ...]) -> Any:
    return items[dice.randbelow(len(items))]


def trade_reply(state: RealmState, player: str, dice: Dice) -> Any | None:
    """Answer any trade the player is party to: offer, counter, agree, or now and then decline."""
    for merchant in state.merchants.values():
        carried = [name for name, amount in merchant.load.items() if amount > 0]
        if merchant.home == player and not merchant.buy:
            return realm_commands.OfferTrade(
                trade_id=merchant.trade_id,
                buy=pick(dice, data.RESOURCES[:4] + ("gold",)),
                pay=pick(dice, carried) if carried and dice.randbelow(2) else "",
                dice=1 + dice.randbelow(data.TRADE_MAX_DICE),
            )
        party = player in (merchant.home, merchant.host)
        if merchant.host == player and merchant.buy and not merchant.want and carried:
            return realm_commands.CounterOffer(trade_id=merchant.trade_id, want=pick(dice, carried))
        if party and merchant.buy and merchant.want and player not in merchant.agreed:
            if dice.randbelow(8) == 0:
                return realm_commands.DeclineTrade(trade_id=merchant.trade_id)
            return realm_commands.AgreeTrade(trade_id=merchant.trade_id)
    return None


def candidates(state: RealmState, city: City, dice: Dice) -> list[Any]:
    """A handful of dice-chosen actions; some may be refused, which the probe filters out."""
    others = [name for name, other in state.cities.items() if name != city.name and not other.destroyed]
    held = [name for name, amount in city.stock.items() if amount > 0]
    options: list[Any] = [
        realm_commands.Mine(
            ore=pick(dice, data.ORES),
            moons=pick(dice, ("count", "save")),
            use_saved=dice.randbelow(city.saved_stars + 1),
        ),
        realm_commands.GetFood(method=pick(dice, data.FOOD_METHODS), moon=pick(dice, ("double", "save"))),
        realm_commands.FindHerbs(),
        realm_commands.CutWood(),
        realm_commands.Fortify(
            wood=data.WOOD_PER_HIT_POINT * dice.randbelow(2),
            stone=data.STONE_PER_HIT_POINTS * dice.randbelow(2),
        ),
        realm_commands.RaiseArmy(soldiers=data.SOLDIER_UNIT * (1 + dice.randbelow(10))),
        realm_commands.EquipArmy(tier=pick(dice, tuple(data.EQUIPMENT_METAL))),
        realm_commands.HealArmy(points=1),
    ]
    ores = [ore for ore in data.SMELTED if city.stock[ore] > 0]
    if ores:
        ore = pick(dice, ores)
        options.append(realm_commands.Smelt(ore=ore, amount=city.stock[ore]))
    if others:
        options.append(
            realm_commands.Raid(
                target=pick(dice, others), resource=pick(dice, data.RESOURCES[:4] + ("gold",))
            )
        )
        options.append(
            realm_commands.Besiege(target=pick(dice, others), if_taken=pick(dice, ("destroy", "tax")))
        )
        if held:
            resource = pick(dice, held)
            amount = max(1, city.stock[resource] // 2)
            options.append(realm_commands.SendMerchant(to=pick(dice, others), load={resource: amount}))
    if city.controller:
        options += [realm_commands.BuyFreedom(), realm_commands.Sabotage(), realm_commands.Revolt()]
    if dice.randbelow(20) == 0:
        options.append(realm_commands.DismissArmy())
    return options


def choose_command(state: RealmState, player: str, dice: Dice) -> Any | None:
    """The command ``player`` plays next, or None when the player has nothing to do this season."""
    if state.over or player not in state.players or player in state.turn_ended:
        return None
    reply = trade_reply(state, player, dice)
    if reply is not None and is_legal(state, reply, player):
        return reply
    city = state.cities[player]
    for vassal in state.cities.values():
        if vassal.controller == player and vassal.tax_year != state.season_index // len(data.SEASONS) + 1:
            command = realm_commands.ChooseTaxSeason(city=vassal.name, season=pick(dice, data.SEASONS))
            if is_legal(state, command, player):
                return command
    if city.destroyed:
        restart = realm_commands.RestartCity()
        return restart if is_legal(state, restart, player) else realm_commands.EndTurn()
    left = state.actions_per_season - state.actions_used.get(player, 0)
    if left > 0 and dice.randbelow(8) != 0:
        options = candidates(state, city, dice)
        for _ in range(len(options)):
            command = options.pop(dice.randbelow(len(options)))
            if is_legal(state, command, player):
                return command
    return realm_commands.EndTurn()
