"""The realm's rules: one pure decide function per command, one evolve function per event, and their tables."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from math import floor
from typing import Any

import msgspec

from almanac.events.manifest import Context, Dice, RuleError
from almanac.games.realm.v1 import commands as realm_commands, data, events as realm_events, trades
from almanac.games.realm.v1.state import Army, City, Merchant, RealmState, full_stock, season_name, year_of

replace = msgspec.structs.replace


# --- dice -----------------------------------------------------------------------------------------


def roll(dice: Dice, count: int) -> tuple[str, ...]:
    """``count`` realm dice: each ``randbelow(6)`` indexes the faces (three stars, moon, skull, blank)."""
    return tuple(data.FACES[dice.randbelow(len(data.FACES))] for _ in range(count))


def count(faces: tuple[str, ...], face: str) -> int:
    return sum(1 for shown in faces if shown == face)


def fraction_text(value: Fraction) -> str:
    return str(value)


def nonzero(stock: dict[str, int]) -> dict[str, int]:
    """Only the resources with a positive amount."""
    return {name: amount for name, amount in stock.items() if amount}


def round_down_hundreds(value: Fraction | int) -> int:
    """Round down to the nearest hundred (docs/design-rulings.md, realm)."""
    whole = floor(value)
    return whole - whole % data.PENALTY_ROUNDING


# --- mining -----------------------------------------------------------------------------------------


def mining_yield(ore: str, stars: int) -> int:
    """The full find for ``stars`` at or past the ore's minimum: 1,000, plus 1,000 per star past it.

    Gold pays 1,000 for every three stars (the seed: "For every three stars you gain 1,000 gold pieces"),
    plus 1,000 per star past the minimum: six stars 2,000, seven 3,000, nine 3,000 + 3,000 = 6,000.
    """
    minimum = data.MINING_MINIMUM_STARS[ore]
    base = data.MINING_UNIT * (stars // data.GOLD_STARS_PER_UNIT) if ore == "gold" else data.MINING_UNIT
    return base + data.MINING_UNIT * (stars - minimum)


class MiningResult(msgspec.Struct, frozen=True, kw_only=True):
    stars: int
    saved_gained: int
    outcome: str
    found: str
    amount: int


def resolve_mining(
    ore: str, faces: tuple[str, ...], moons: str, use_saved: int, lesser_ore: str
) -> MiningResult:
    """What a mining try finds, from the declared ore and choices and the faces rolled."""
    moon_count = count(faces, data.MOON)
    per_moon = data.MOON_STARS_COUNTED if moons == "count" else 1
    stars = count(faces, data.STAR) + moon_count * per_moon + use_saved
    saved_gained = moon_count if moons == "save" else 0

    def result(outcome: str, found: str, amount: int) -> MiningResult:
        return MiningResult(
            stars=stars, saved_gained=saved_gained, outcome=outcome, found=found, amount=amount
        )

    if count(faces, data.SKULL):
        # Only stone, at -50%: the stone those stars find, halved; with no star there is none to halve
        # (and no lesser ore either), so only a blank's stone is left.
        if stars >= data.MINING_MINIMUM_STARS["stone"]:
            stone = mining_yield("stone", stars)
            return result("skull_stone", "stone", round_down_hundreds(stone * data.SKULL_STONE_KEEP))
    elif stars >= data.MINING_MINIMUM_STARS[ore]:
        return result("found", ore, mining_yield(ore, stars))
    if lesser_ore != "none":
        reachable = [
            lesser
            for lesser in data.ORES[: data.ORES.index(ore)]
            if stars >= data.MINING_MINIMUM_STARS[lesser] and lesser_ore in ("best", lesser)
        ]
        if reachable:
            lesser = reachable[-1]
            amount = round_down_hundreds(mining_yield(lesser, stars) * data.LESSER_ORE_KEEP)
            return result("lesser_ore", lesser, amount)
    if count(faces, data.BLANK):
        return result("blank_stone", "stone", round_down_hundreds(data.MINING_UNIT * data.BLANK_STONE_KEEP))
    return result("nothing", "", 0)


# --- food, herbs, wood --------------------------------------------------------------------------------


class FoodResult(msgspec.Struct, frozen=True, kw_only=True):
    stars: int
    doubled: bool
    skulls: int
    wards_used: int
    wards_gained: int
    spoiled: bool
    amount: int


def resolve_food(method: str, season: int, faces: tuple[str, ...], moon: str, saved_wards: int) -> FoodResult:
    """Stars and blanks count one each; a moon doubles or becomes a ward; an unwarded skull spoils the roll."""
    stars = count(faces, data.STAR) + count(faces, data.BLANK)
    moons = count(faces, data.MOON)
    skulls = count(faces, data.SKULL)
    doubled = moon == "double" and moons > 0
    wards_gained = moons if moon == "save" else 0
    wards_used = 0
    spoiled = False
    if skulls:
        if saved_wards + wards_gained >= skulls:
            wards_used = skulls
        else:
            spoiled = True
    amount = 0
    if not spoiled:
        value = stars * data.FOOD_PER_STAR * data.FOOD_MULTIPLIERS[method][season]
        amount = floor(value * (data.FOOD_MOON_DOUBLES if doubled else 1))
    return FoodResult(
        stars=stars,
        doubled=doubled,
        skulls=skulls,
        wards_used=wards_used,
        wards_gained=wards_gained,
        spoiled=spoiled,
        amount=amount,
    )


def herbs_found(stars: int, season: int) -> int:
    """1,000 herbs per whole three stars, at the season's rate (three finds 1,000; two find none)."""
    return floor((stars // data.HERB_STARS_PER_UNIT) * data.HERB_UNIT * data.HERB_RATES[season])


def wood_cut(stars: int, season: int) -> int:
    """1,000 wood per star, at the season's rate (x3/2 in fall)."""
    return floor(stars * data.WOOD_PER_STAR * data.WOOD_RATES[season])


def hit_points_for(wood: int, stone: int) -> int:
    """2,000 wood buy 1 hit point; 1,500 stone buy 2."""
    return wood // data.WOOD_PER_HIT_POINT + data.HIT_POINTS_PER_STONE_LOT * (
        stone // data.STONE_PER_HIT_POINTS
    )


def raid_loss(soldiers: int) -> int:
    """A failed attacker loses a quarter of its troops, rounded down to the hundred."""
    return round_down_hundreds(soldiers * data.RAID_LOSS)


def trade_side(city: str, resource: str, faces: tuple[str, ...]) -> realm_events.TradeSide:
    """Stars x 1,000; each skull halves the stars (rounded down); no star counts as one; moons are phantom."""
    stars = count(faces, data.STAR)
    skulls = count(faces, data.SKULL)
    moons = count(faces, data.MOON)
    counted = max(1, stars >> skulls)
    return realm_events.TradeSide(
        city=city,
        resource=resource,
        dice=faces,
        stars=stars,
        skulls=skulls,
        moons=moons,
        counted=counted,
        demanded=counted * data.TRADE_UNIT,
        phantom=moons * data.TRADE_UNIT,
    )


def score_of(faces: tuple[str, ...]) -> int:
    """A fight's score: stars and moons count one each."""
    return count(faces, data.STAR) + count(faces, data.MOON)


# --- state helpers ------------------------------------------------------------------------------------


def season_in_year(state: RealmState) -> int:
    return state.season_index % len(data.SEASONS)


def with_city(state: RealmState, city: City) -> RealmState:
    cities = dict(state.cities)
    cities[city.name] = city
    return replace(state, cities=cities)


def add_stock(stock: dict[str, int], changes: dict[str, int], sign: int = 1) -> dict[str, int]:
    return {name: stock[name] + sign * changes.get(name, 0) for name in stock}


def spend_action(state: RealmState, city_name: str, actions: int = 1) -> RealmState:
    owner = state.cities[city_name].owner
    if not owner:
        return state
    used = dict(state.actions_used)
    used[owner] = used.get(owner, 0) + actions
    return replace(state, actions_used=used)


def apply(state: RealmState, events: list[Any]) -> RealmState:
    for event in events:
        state = EVOLVE[type(event)](state, event)
    return state


def player_city(state: RealmState, player: str) -> City:
    if player not in state.players:
        raise RuleError(
            "realm.not_a_player",
            f"{player!r} has no city in this realm; players: {', '.join(state.players)}",
            field="player",
            allowed=list(state.players),
        )
    return state.cities[player]


def open_turn(state: RealmState, player: str) -> City:
    """The player's city, if the game runs and the player has not ended this season's turn."""
    city = player_city(state, player)
    if state.over:
        raise RuleError("realm.game_over", "the realm's last winter has ended; no more moves are accepted")
    if player in state.turn_ended:
        raise RuleError(
            "realm.turn_ended",
            f"{player!r} has ended the turn for {season_name(state.season_index)} of year "
            f"{year_of(state.season_index)}; wait for the next season",
        )
    return city


def acting_city(state: RealmState, player: str, allow_destroyed: bool = False) -> City:
    """The player's city, for an action that spends one of the season's actions."""
    city = open_turn(state, player)
    used = state.actions_used.get(player, 0)
    if used >= state.actions_per_season:
        raise RuleError(
            "realm.no_actions_left",
            f"{player!r} has used all {state.actions_per_season} actions of this season; trade replies and "
            "end_turn are still allowed",
        )
    if city.destroyed and not allow_destroyed:
        raise RuleError(
            "realm.city_destroyed",
            f"{player!r}'s city is destroyed; restart_city or end_turn are the only moves",
        )
    return city


def need_choice(value: str, allowed: tuple[str, ...], field: str, code: str = "realm.invalid_choice") -> None:
    if value not in allowed:
        raise RuleError(
            code,
            f"{field} must be one of {', '.join(allowed)}, got {value!r}",
            field=field,
            allowed=list(allowed),
        )


def need_stock(city: City, resource: str, amount: int, field: str) -> None:
    if city.stock[resource] < amount:
        raise RuleError(
            f"realm.not_enough_{resource}",
            f"{city.name} holds {city.stock[resource]} {resource}, {amount} needed",
            field=field,
            allowed=city.stock[resource],
        )


def need_army(city: City) -> Army:
    if city.army is None:
        raise RuleError(
            "realm.no_army", f"{city.name} has no army; raise_army first (at least {data.MINIMUM_ARMY})"
        )
    return city.army


def target_city(state: RealmState, attacker: City, name: str) -> City:
    target = state.cities.get(name)
    if target is None:
        raise RuleError(
            "realm.unknown_city", f"there is no city {name!r}", field="target", allowed=list(state.cities)
        )
    if target.name == attacker.name:
        raise RuleError("realm.own_city", "a city cannot attack itself", field="target")
    if target.destroyed:
        raise RuleError("realm.city_destroyed", f"{name} lies in ruins", field="target")
    if state.season_index < target.immune_until:
        raise RuleError(
            "realm.immune",
            f"{name} restarted and is immune until {season_name(target.immune_until)} of year "
            f"{year_of(target.immune_until)}",
            field="target",
        )
    return target


# --- fights -------------------------------------------------------------------------------------------


def army_dice(army: Army | None) -> int:
    if army is None:
        return 0
    return max(0, army.soldiers // data.SOLDIERS_PER_DIE - army.damage)


def tier_of(army: Army | None) -> int:
    return data.TIERS.index(army.equipment) if army is not None else 0


def fight(attacker: City, defender: City, dice: Dice, walls: bool) -> realm_events.Battle:
    """Attack dice: one per 1,000 soldiers less damage, plus the equipment bonus when the defender has an
    army whose armour is not as good; at least one. Defence: the townsfolk's die, one per 5 hit points when ``walls``,
    the garrison's dice and its armour bonus. Attack is rolled first; the attacker wins only if higher."""
    army = attacker.army
    assert army is not None
    attack_tier, defence_tier = tier_of(army), tier_of(defender.army)
    # The seed: weapons add to "attack rolls against armies"; a city with no army meets no weapons bonus.
    attack_bonus = attack_tier if defender.army is not None and defence_tier < attack_tier else 0
    defence_bonus = defence_tier if attack_tier < defence_tier else 0
    attack_count = max(1, army_dice(army) + attack_bonus)
    defence_count = data.CITY_BASE_DEFENCE_DICE + army_dice(defender.army) + defence_bonus
    if walls:
        defence_count += defender.hit_points // data.HIT_POINTS_PER_WALL_DIE
    attack_faces = roll(dice, attack_count)
    defence_faces = roll(dice, defence_count)
    attack_score, defence_score = score_of(attack_faces), score_of(defence_faces)
    won = attack_score > defence_score
    lost = 0 if won else raid_loss(army.soldiers)
    after = army.soldiers - lost
    disbanded = after < data.MINIMUM_ARMY
    return realm_events.Battle(
        attacker=attacker.name,
        defender=defender.name,
        attack_dice=attack_faces,
        defence_dice=defence_faces,
        attack_bonus=attack_bonus,
        defence_bonus=defence_bonus,
        attack_score=attack_score,
        defence_score=defence_score,
        attacker_won=won,
        troops_lost=lost,
        army_after=0 if disbanded else after,
        disbanded=disbanded,
        defender_damage=1 if won and defender.army is not None else 0,
    )


def after_battle(state: RealmState, battle: realm_events.Battle, mark_attacked: bool = True) -> RealmState:
    attacker = state.cities[battle.attacker]
    army = attacker.army
    assert army is not None
    if battle.disbanded:
        survivors = army.soldiers - battle.troops_lost
        attacker = replace(attacker, army=None, population=attacker.population + survivors)
    elif battle.troops_lost:
        attacker = replace(attacker, army=replace(army, soldiers=battle.army_after))
    state = with_city(state, attacker)
    defender = state.cities[battle.defender]
    if battle.defender_damage and defender.army is not None:
        defender = replace(
            defender, army=replace(defender.army, damage=defender.army.damage + battle.defender_damage)
        )
    if mark_attacked:
        defender = replace(defender, attacked_season=state.season_index, attacked_by=battle.attacker)
    return spend_action(with_city(state, defender), battle.attacker)


# --- merchants on the road ---------------------------------------------------------------------------


def cart(trade_id: str) -> str:
    """The name a merchant goes by in transfers: ``merchant:<trade id>``."""
    return f"merchant:{trade_id}"


def moved(source: str, target: str, goods: dict[str, int]) -> tuple[realm_events.Transfer, ...]:
    """Transfers of every positive amount in ``goods`` from ``source`` to ``target``."""
    return tuple(
        realm_events.Transfer(source=source, target=target, resource=name, amount=amount)
        for name, amount in nonzero(goods).items()
    )


class Steps:
    """Trade steps decided one after another: each is applied before the next is decided, and recorded with
    the trade's parties, both sides' holdings and the merchant's load right after it (the audit trail)."""

    def __init__(self, state: RealmState) -> None:
        self.state = state
        self.events: list[Any] = []

    def add(self, event: Any) -> None:
        if isinstance(event, realm_events.MerchantSent):
            home, host = event.home, event.host
        else:
            merchant = self.state.merchants[event.trade_id]
            home, host = merchant.home, merchant.host
        after = EVOLVE[type(event)](self.state, event)
        merchant = after.merchants.get(event.trade_id)
        facts = {
            "home": home,
            "host": host,
            "home_after": after.cities[home].stock,
            "host_after": after.cities[host].stock,
            "load_after": merchant.load if merchant is not None else full_stock({}),
        }
        fields = type(event).__struct_fields__
        self.events.append(replace(event, **{name: value for name, value in facts.items() if name in fields}))
        self.state = after


def travel(steps: Steps, trade_id: str, through: tuple[str, ...], dice: Dice) -> bool:
    """A merchant leaving or entering cities under attack this season: the attacker's army rolls to seize
    the load (its dice as in a raid, with its full equipment bonus), the merchant rolls a flat five dice
    and escapes only with a higher score. Records the interceptions; False when he was caught."""
    for name in through:
        state = steps.state
        merchant = state.merchants[trade_id]
        city = state.cities[name]
        if city.attacked_season != state.season_index or not city.attacked_by:
            continue
        attacker = state.cities[city.attacked_by]
        if attacker.army is None or attacker.destroyed or attacker.name == merchant.home:
            continue
        army_faces = roll(dice, max(1, army_dice(attacker.army) + tier_of(attacker.army)))
        merchant_faces = roll(dice, data.MERCHANT_ESCAPE_DICE)
        army_score, merchant_score = score_of(army_faces), score_of(merchant_faces)
        escaped = merchant_score > army_score
        seized = {} if escaped else nonzero(merchant.load)
        steps.add(
            realm_events.MerchantIntercepted(
                trade_id=trade_id,
                home=merchant.home,
                at=name,
                attacker=attacker.name,
                army_dice=army_faces,
                merchant_dice=merchant_faces,
                army_score=army_score,
                merchant_score=merchant_score,
                escaped=escaped,
                seized=seized,
                attacker_after=add_stock(attacker.stock, seized),
                transfers=moved(cart(trade_id), attacker.name, seized),
            )
        )
        if not escaped:
            return False
    return True


def unload(steps: Steps, trade_id: str) -> None:
    """The merchant is home: what he carries goes into his city's storage."""
    merchant = steps.state.merchants[trade_id]
    home = steps.state.cities[merchant.home]
    delivered = nonzero(merchant.load)
    steps.add(
        realm_events.MerchantReturned(
            trade_id=trade_id,
            home=home.name,
            delivered=delivered,
            home_after=add_stock(home.stock, delivered),
            transfers=moved(cart(trade_id), home.name, delivered),
        )
    )


def send_home(steps: Steps, trade_id: str, dice: Dice) -> None:
    """The merchant leaves the host and enters his home city, through any attackers, and unloads."""
    merchant = steps.state.merchants[trade_id]
    if travel(steps, trade_id, (merchant.host, merchant.home), dice):
        unload(steps, trade_id)


def merchant_of(state: RealmState, trade_id: str) -> Merchant:
    merchant = state.merchants.get(trade_id)
    if merchant is None:
        raise RuleError(
            "realm.unknown_trade",
            f"there is no merchant on the road for trade {trade_id!r}",
            field="trade_id",
            allowed=list(state.merchants),
        )
    return merchant


def npc_want(merchant: Merchant, pay: str) -> str:
    """An NPC village accepts the offered payment if the merchant carries it, else asks for what he carries most of."""
    if pay and merchant.load.get(pay, 0) > 0:
        return pay
    best = ""
    for name, amount in merchant.load.items():
        if amount > merchant.load.get(best, 0):
            best = name
    return best or next(iter(merchant.load))


# --- decide: production -------------------------------------------------------------------------------


def decide_mine(state: RealmState, command: realm_commands.Mine, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    need_choice(command.ore, data.ORES, "ore")
    need_choice(command.moons, ("count", "save"), "moons")
    lesser = ("best", "none", *data.ORES[: data.ORES.index(command.ore)])
    need_choice(command.lesser_ore, lesser, "lesser_ore")
    if not 0 <= command.use_saved <= city.saved_stars:
        raise RuleError(
            "realm.not_enough_saved_stars",
            f"{city.name} has {city.saved_stars} saved stars; use_saved must be 0..{city.saved_stars}",
            field="use_saved",
            allowed=city.saved_stars,
        )
    faces = roll(ctx.dice, data.MINING_DICE[command.ore])
    result = resolve_mining(command.ore, faces, command.moons, command.use_saved, command.lesser_ore)
    return [
        realm_events.Mined(
            city=city.name,
            ore=command.ore,
            dice=faces,
            moons=command.moons,
            stars=result.stars,
            saved_used=command.use_saved,
            saved_gained=result.saved_gained,
            outcome=result.outcome,
            found=result.found,
            amount=result.amount,
        )
    ]


def decide_smelt(state: RealmState, command: realm_commands.Smelt, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    need_choice(command.ore, tuple(data.SMELTED), "ore")
    if command.amount <= 0:
        raise RuleError("realm.amount_not_positive", "amount must be at least 1", field="amount")
    need_stock(city, command.ore, command.amount, "amount")
    faces = roll(ctx.dice, data.SMELTING_DICE)
    stars = score_of(faces)
    needed = data.SMELTING_MINIMUM_STARS[command.ore]
    return [
        realm_events.Smelted(
            city=city.name,
            ore=command.ore,
            amount=command.amount,
            dice=faces,
            stars=stars,
            needed=needed,
            success=stars >= needed,
        )
    ]


def decide_get_food(state: RealmState, command: realm_commands.GetFood, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    need_choice(command.method, data.FOOD_METHODS, "method")
    need_choice(command.moon, ("double", "save"), "moon")
    season = season_in_year(state)
    multiplier = data.FOOD_MULTIPLIERS[command.method][season]
    if multiplier == 0:
        raise RuleError(
            "realm.out_of_season",
            f"{command.method} yields nothing in {data.SEASONS[season]}; hunt, gather or fish instead",
            field="method",
        )
    faces = roll(ctx.dice, data.FOOD_DICE)
    result = resolve_food(command.method, season, faces, command.moon, city.saved_wards)
    return [
        realm_events.FoodGot(
            city=city.name,
            method=command.method,
            season=data.SEASONS[season],
            dice=faces,
            stars=result.stars,
            multiplier=fraction_text(multiplier),
            moon=command.moon,
            doubled=result.doubled,
            skulls=result.skulls,
            wards_used=result.wards_used,
            wards_gained=result.wards_gained,
            spoiled=result.spoiled,
            amount=result.amount,
        )
    ]


def gathered(city: City, state: RealmState, ctx: Context, kind: type, dice: int, rates: Any) -> list[Any]:
    """Roll for herbs or wood: stars (moons count one) give the find at the season's rate."""
    season = season_in_year(state)
    faces = roll(ctx.dice, dice)
    stars = score_of(faces)
    amount = herbs_found(stars, season) if kind is realm_events.HerbsFound else wood_cut(stars, season)
    return [
        kind(
            city=city.name,
            season=data.SEASONS[season],
            dice=faces,
            stars=stars,
            rate=fraction_text(rates[season]),
            amount=amount,
        )
    ]


def decide_find_herbs(state: RealmState, command: realm_commands.FindHerbs, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    if data.HERB_RATES[season_in_year(state)] == 0:
        raise RuleError(
            "realm.out_of_season", "no herbs grow in winter; look for them in spring, summer or fall"
        )
    return gathered(city, state, ctx, realm_events.HerbsFound, data.HERB_DICE, data.HERB_RATES)


def decide_heal_army(state: RealmState, command: realm_commands.HealArmy, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    army = need_army(city)
    if not 1 <= command.points <= army.damage:
        raise RuleError(
            "realm.nothing_to_heal",
            f"the army has {army.damage} points of damage; points must be 1..{army.damage}",
            field="points",
            allowed=army.damage,
        )
    herbs = command.points * data.HERBS_PER_DAMAGE_POINT
    need_stock(city, "herbs", herbs, "points")
    return [
        realm_events.ArmyHealed(
            city=city.name, points=command.points, herbs=herbs, damage_after=army.damage - command.points
        )
    ]


def decide_cut_wood(state: RealmState, command: realm_commands.CutWood, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    return gathered(city, state, ctx, realm_events.WoodCut, data.WOOD_DICE, data.WOOD_RATES)


def decide_fortify(state: RealmState, command: realm_commands.Fortify, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    if command.wood < 0 or command.wood % data.WOOD_PER_HIT_POINT:
        raise RuleError(
            "realm.invalid_amount", f"wood must be a multiple of {data.WOOD_PER_HIT_POINT}", field="wood"
        )
    if command.stone < 0 or command.stone % data.STONE_PER_HIT_POINTS:
        raise RuleError(
            "realm.invalid_amount", f"stone must be a multiple of {data.STONE_PER_HIT_POINTS}", field="stone"
        )
    if command.wood == 0 and command.stone == 0:
        raise RuleError("realm.invalid_amount", "fortify needs some wood or stone", field="wood")
    need_stock(city, "wood", command.wood, "wood")
    need_stock(city, "stone", command.stone, "stone")
    gained = hit_points_for(command.wood, command.stone)
    return [
        realm_events.Fortified(
            city=city.name,
            wood=command.wood,
            stone=command.stone,
            hit_points_gained=gained,
            hit_points_after=city.hit_points + gained,
        )
    ]


def decide_raise_army(state: RealmState, command: realm_commands.RaiseArmy, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    if command.soldiers <= 0 or command.soldiers % data.SOLDIER_UNIT:
        raise RuleError(
            "realm.invalid_amount", f"soldiers come in hundreds; got {command.soldiers}", field="soldiers"
        )
    if command.soldiers > city.population:
        raise RuleError(
            "realm.not_enough_population",
            f"{city.name} has {city.population} people, {command.soldiers} asked",
            field="soldiers",
            allowed=city.population,
        )
    current = city.army.soldiers if city.army else 0
    if current + command.soldiers < data.MINIMUM_ARMY:
        raise RuleError(
            "realm.army_too_small",
            f"an army needs at least {data.MINIMUM_ARMY} soldiers; raise at least {data.MINIMUM_ARMY - current}",
            field="soldiers",
        )
    if city.army is not None and city.army.equipment != "none":
        metal = data.EQUIPMENT_METAL[city.army.equipment]
        need_stock(city, metal, command.soldiers * data.METAL_PER_SOLDIER, "soldiers")
    return [
        realm_events.ArmyRaised(
            city=city.name, soldiers=command.soldiers, army_after=current + command.soldiers
        )
    ]


def decide_equip_army(state: RealmState, command: realm_commands.EquipArmy, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    army = need_army(city)
    need_choice(command.tier, tuple(data.EQUIPMENT_METAL), "tier")
    if army.equipment == command.tier:
        raise RuleError("realm.already_equipped", f"the army already wears {command.tier}", field="tier")
    metal = data.EQUIPMENT_METAL[command.tier]
    cost = army.soldiers * data.METAL_PER_SOLDIER
    need_stock(city, metal, cost, "tier")
    return [realm_events.ArmyEquipped(city=city.name, tier=command.tier, metal=metal, cost=cost)]


def decide_dismiss_army(state: RealmState, command: realm_commands.DismissArmy, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    army = need_army(city)
    return [realm_events.ArmyDismissed(city=city.name, soldiers=army.soldiers)]


# --- decide: war --------------------------------------------------------------------------------------


def decide_raid(state: RealmState, command: realm_commands.Raid, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    need_army(city)
    target = target_city(state, city, command.target)
    need_choice(command.resource, data.RESOURCES, "resource")
    battle = fight(city, target, ctx.dice, walls=True)
    taken = floor(target.stock[command.resource] * data.RAID_PLUNDER) if battle.attacker_won else 0
    return [realm_events.Raided(battle=battle, resource=command.resource, taken=taken)]


def decide_besiege(state: RealmState, command: realm_commands.Besiege, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    need_army(city)
    target = target_city(state, city, command.target)
    need_choice(command.if_taken, ("destroy", "tax"), "if_taken")
    if target.controller == city.name:
        raise RuleError(
            "realm.already_controlled", f"{target.name} already pays tax to {city.name}", field="target"
        )
    battle = fight(city, target, ctx.dice, walls=True)
    lost = battle.attack_score - battle.defence_score if battle.attacker_won else 0
    after = max(0, target.hit_points - lost)
    events: list[Any] = [
        realm_events.Besieged(
            battle=battle,
            hit_points_lost=target.hit_points - after,
            hit_points_after=after,
            if_taken=command.if_taken,
        )
    ]
    if after > 0:
        return events
    state = apply(state, events)
    target = state.cities[target.name]
    if command.if_taken == "tax":
        events.append(
            realm_events.CitySurrendered(
                city=target.name, to=city.name, hit_points_after=data.SURRENDER_HIT_POINTS
            )
        )
        return events
    plunder = {name: floor(amount * data.PILLAGE_KEEP) for name, amount in nonzero(target.stock).items()}
    lost_goods = {name: amount - plunder[name] for name, amount in nonzero(target.stock).items()}
    freed = tuple(other.name for other in state.cities.values() if other.controller == target.name)
    events.append(
        realm_events.CityDestroyed(
            city=target.name, by=city.name, plunder=plunder, lost=lost_goods, freed=freed
        )
    )
    steps = Steps(apply(state, events[-1:]))
    for merchant in list(steps.state.merchants.values()):
        if merchant.host == target.name:
            unload(steps, merchant.trade_id)
    return events + steps.events


def controlled_city(state: RealmState, player: str) -> City:
    city = acting_city(state, player)
    if not city.controller:
        raise RuleError("realm.not_controlled", f"{city.name} is free; only a city under control can do this")
    return city


def decide_choose_tax_season(
    state: RealmState, command: realm_commands.ChooseTaxSeason, ctx: Context
) -> list[Any]:
    controller = open_turn(state, ctx.player)
    vassal = state.cities.get(command.city)
    if vassal is None or vassal.controller != controller.name:
        raise RuleError(
            "realm.not_your_vassal", f"{command.city!r} does not pay tax to {controller.name}", field="city"
        )
    need_choice(command.season, data.SEASONS, "season")
    year = year_of(state.season_index)
    if season_in_year(state) != 0 or state.actions_used.get(ctx.player, 0):
        raise RuleError(
            "realm.tax_season_at_year_start",
            "the tax season is stated at the start of the controller's turn in the new year (spring, before "
            f"any action); until then {vassal.name} pays in {data.SEASONS[data.DEFAULT_TAX_SEASON]}",
            field="season",
        )
    if vassal.tax_year == year:
        raise RuleError(
            "realm.tax_season_already_chosen",
            f"{vassal.name} pays in {data.SEASONS[vassal.tax_season]} this year; choose again next spring",
            field="season",
        )
    chosen = data.SEASONS.index(command.season)
    if chosen < season_in_year(state):
        allowed = list(data.SEASONS[season_in_year(state) :])
        raise RuleError(
            "realm.out_of_season",
            f"{command.season} of year {year} has passed; choose one of {', '.join(allowed)}",
            field="season",
            allowed=allowed,
        )
    return [
        realm_events.TaxSeasonChosen(
            controller=controller.name, city=vassal.name, year=year, season=command.season
        )
    ]


def decide_buy_freedom(state: RealmState, command: realm_commands.BuyFreedom, ctx: Context) -> list[Any]:
    city = controlled_city(state, ctx.player)
    need_stock(city, "gold", data.FREEDOM_PRICE_GOLD, "kind")
    return [
        realm_events.FreedomBought(city=city.name, controller=city.controller, gold=data.FREEDOM_PRICE_GOLD)
    ]


def decide_sabotage(state: RealmState, command: realm_commands.Sabotage, ctx: Context) -> list[Any]:
    city = controlled_city(state, ctx.player)
    faces = roll(ctx.dice, data.SABOTAGE_DICE)
    stars = score_of(faces)
    return [
        realm_events.SabotageAttempted(
            city=city.name,
            controller=city.controller,
            dice=faces,
            stars=stars,
            needed=data.SABOTAGE_MINIMUM_STARS,
            freed=stars >= data.SABOTAGE_MINIMUM_STARS,
        )
    ]


def decide_revolt(state: RealmState, command: realm_commands.Revolt, ctx: Context) -> list[Any]:
    city = controlled_city(state, ctx.player)
    need_army(city)
    return [
        realm_events.RevoltFought(battle=fight(city, state.cities[city.controller], ctx.dice, walls=False))
    ]


def decide_restart_city(state: RealmState, command: realm_commands.RestartCity, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player, allow_destroyed=True)
    if not city.destroyed:
        raise RuleError("realm.not_destroyed", f"{city.name} still stands; only a destroyed city restarts")
    others = [state.cities[p] for p in state.players if p != city.name and not state.cities[p].destroyed]
    stock = {
        name: round_down_hundreds(sum(other.stock[name] for other in others) * data.RESTART_SHARE)
        for name in data.RESOURCES
    }
    return [
        realm_events.CityRestarted(
            city=city.name,
            stock=stock,
            population=state.starting_population,
            hit_points=state.starting_hit_points,
            immune_until_season=state.season_index + data.RESTART_IMMUNITY_SEASONS,
        )
    ]


# --- decide: trade ------------------------------------------------------------------------------------


def decide_send_merchant(state: RealmState, command: realm_commands.SendMerchant, ctx: Context) -> list[Any]:
    city = acting_city(state, ctx.player)
    if state.actions_used.get(ctx.player, 0):
        raise RuleError(
            "realm.merchant_needs_the_turn",
            f"sending a merchant takes {ctx.player!r}'s whole turn (the seed: 'spend a turn sending a "
            "merchant'); this season's turn is already used; send him next season",
            field="to",
        )
    if city.merchant:
        raise RuleError(
            "realm.merchant_away",
            f"{city.name}'s merchant is still away on trade {city.merchant}; decline it to bring him home",
            field="to",
        )
    host = state.cities.get(command.to)
    if host is None or host.name == city.name or host.destroyed:
        allowed = [name for name, other in state.cities.items() if name != city.name and not other.destroyed]
        raise RuleError(
            "realm.unknown_city", f"cannot send a merchant to {command.to!r}", field="to", allowed=allowed
        )
    if not command.load or any(amount <= 0 for amount in command.load.values()):
        raise RuleError("realm.empty_load", "the merchant needs a load of positive amounts", field="load")
    for name, amount in command.load.items():
        need_choice(name, data.RESOURCES, "load")
        need_stock(city, name, amount, f"load.{name}")
    load = full_stock(command.load)
    trade_id = f"trade-{ctx.version}"
    steps = Steps(state)
    steps.add(
        realm_events.MerchantSent(
            trade_id=trade_id,
            home=city.name,
            host=host.name,
            load=load,
            home_after=add_stock(city.stock, load, -1),
            actions_spent=state.actions_per_season,
            transfers=moved(city.name, cart(trade_id), load),
        )
    )
    travel(steps, trade_id, (city.name, host.name), ctx.dice)
    return steps.events


def trade_side_of(state: RealmState, merchant: Merchant, player: str) -> str:
    """The city through which ``player`` takes part in the trade (its home or its host)."""
    side = next((name for name in (merchant.home, merchant.host) if state.cities[name].owner == player), None)
    if side is None:
        raise RuleError(
            "realm.not_a_party", f"{player!r} is not a party to {merchant.trade_id}", field="trade_id"
        )
    return side


def decide_offer_trade(state: RealmState, command: realm_commands.OfferTrade, ctx: Context) -> list[Any]:
    merchant = merchant_of(state, command.trade_id)
    open_turn(state, ctx.player)
    if state.cities[merchant.home].owner != ctx.player:
        raise RuleError(
            "realm.not_your_merchant",
            "only the merchant's owner makes offers; the host counters",
            field="trade_id",
        )
    need_choice(command.buy, data.RESOURCES, "buy")
    if command.pay:
        need_choice(command.pay, data.RESOURCES, "pay")
    if not 1 <= command.dice <= data.TRADE_MAX_DICE:
        raise RuleError("realm.invalid_dice", f"each side rolls 1..{data.TRADE_MAX_DICE} dice", field="dice")
    steps = Steps(state)
    steps.add(
        realm_events.TradeOffered(
            trade_id=merchant.trade_id, by=merchant.home, buy=command.buy, pay=command.pay, dice=command.dice
        )
    )
    host = state.cities[merchant.host]
    if not host.owner:
        # An NPC village names its price and agrees at once.
        want = npc_want(merchant, command.pay)
        steps.add(realm_events.TradeCountered(trade_id=merchant.trade_id, by=host.name, want=want))
        steps.add(realm_events.TradeAgreed(trade_id=merchant.trade_id, by=host.name))
    return steps.events


def decide_counter_offer(state: RealmState, command: realm_commands.CounterOffer, ctx: Context) -> list[Any]:
    merchant = merchant_of(state, command.trade_id)
    open_turn(state, ctx.player)
    if state.cities[merchant.host].owner != ctx.player:
        raise RuleError("realm.not_the_host", "only the host city counters an offer", field="trade_id")
    if not merchant.buy:
        raise RuleError("realm.no_offer", "there is no offer on the table yet", field="trade_id")
    need_choice(command.want, data.RESOURCES, "want")
    steps = Steps(state)
    steps.add(realm_events.TradeCountered(trade_id=merchant.trade_id, by=merchant.host, want=command.want))
    return steps.events


def decide_agree_trade(state: RealmState, command: realm_commands.AgreeTrade, ctx: Context) -> list[Any]:
    merchant = merchant_of(state, command.trade_id)
    open_turn(state, ctx.player)
    side = trade_side_of(state, merchant, ctx.player)
    if not merchant.buy or not merchant.want:
        raise RuleError(
            "realm.terms_incomplete",
            "both sides must name their goods first: the owner offers what to buy, the host what it wants",
            field="trade_id",
        )
    if side in merchant.agreed:
        raise RuleError(
            "realm.already_agreed", f"{side} has already agreed; waiting for the other side", field="trade_id"
        )
    steps = Steps(state)
    steps.add(realm_events.TradeAgreed(trade_id=merchant.trade_id, by=side))
    if len(merchant.agreed) + 1 == 2:
        trade_round(steps, merchant.trade_id, ctx.dice)
    return steps.events


def trade_round(steps: Steps, trade_id: str, dice: Dice) -> None:
    """Both sides agreed: the owner rolls, then the host; each takes its stars x 1,000 from the other."""
    merchant = steps.state.merchants[trade_id]
    home, host = steps.state.cities[merchant.home], steps.state.cities[merchant.host]
    buyer = trade_side(home.name, merchant.buy, roll(dice, merchant.dice))
    seller = trade_side(host.name, merchant.want, roll(dice, merchant.dice))
    round_number = merchant.rounds + 1
    if merchant.load[merchant.want] < seller.demanded:
        steps.add(
            realm_events.TradeRolled(
                trade_id=trade_id,
                round=round_number,
                buyer=buyer,
                seller=seller,
                cancelled=True,
                transfers=(),
                shortfall=0,
                home_after=home.stock,
                host_after=host.stock,
                load_after=merchant.load,
            )
        )
        lost = {name: floor(amount * data.MERCHANT_LOSS) for name, amount in merchant.load.items()}
        steps.add(
            realm_events.TradeCancelled(
                trade_id=trade_id,
                home=home.name,
                host=host.name,
                reason=(
                    f"{host.name}'s dice demand {seller.demanded} {merchant.want}; the merchant carries "
                    f"{merchant.load[merchant.want]}"
                ),
                load_before=merchant.load,
                lost=nonzero(lost),
                load_after=add_stock(merchant.load, lost, -1),
                transfers=moved(cart(trade_id), "lost", lost),
            )
        )
        send_home(steps, trade_id, dice)
        return
    paid = min(buyer.demanded, host.stock[merchant.buy])
    transfers = [
        realm_events.Transfer(source=host.name, target=home.name, resource=merchant.buy, amount=paid),
        realm_events.Transfer(
            source=cart(trade_id), target=host.name, resource=merchant.want, amount=seller.demanded
        ),
    ]
    for side in (buyer, seller):
        if side.phantom:
            transfers.append(
                realm_events.Transfer(
                    source="", target=side.city, resource=side.resource, amount=side.phantom, phantom=True
                )
            )
    home_stock, host_stock, load = dict(home.stock), dict(host.stock), dict(merchant.load)
    books = {home.name: home_stock, host.name: host_stock, cart(trade_id): load}
    for transfer in transfers:
        if transfer.source:
            books[transfer.source][transfer.resource] -= transfer.amount
        books[transfer.target][transfer.resource] += transfer.amount
    steps.add(
        realm_events.TradeRolled(
            trade_id=trade_id,
            round=round_number,
            buyer=buyer,
            seller=seller,
            cancelled=False,
            transfers=tuple(transfers),
            shortfall=buyer.demanded - paid,
            home_after=home_stock,
            host_after=host_stock,
            load_after=load,
        )
    )
    if not any(load.values()):
        send_home(steps, trade_id, dice)


def decide_decline_trade(state: RealmState, command: realm_commands.DeclineTrade, ctx: Context) -> list[Any]:
    merchant = merchant_of(state, command.trade_id)
    open_turn(state, ctx.player)
    side = trade_side_of(state, merchant, ctx.player)
    steps = Steps(state)
    steps.add(realm_events.TradeDeclined(trade_id=merchant.trade_id, by=side))
    send_home(steps, merchant.trade_id, ctx.dice)
    return steps.events


# --- decide: the calendar -----------------------------------------------------------------------------


def season_end(state: RealmState, forced_by: str, now_ms: int) -> list[Any]:
    """Villages produce, taxes due this season are paid, then the season ends."""
    events: list[Any] = []
    season = season_in_year(state)
    year = year_of(state.season_index)
    for city in state.cities.values():
        if not city.owner and not city.destroyed:
            events.append(realm_events.VillageProduced(city=city.name, amounts=dict(data.VILLAGE_PRODUCTION)))
    state = apply(state, events)
    for city in state.cities.values():
        if not city.controller or city.destroyed:
            continue
        due = city.tax_season if city.tax_year == year else data.DEFAULT_TAX_SEASON
        if due != season:
            continue
        amounts = {name: floor(amount * data.TAX_SHARE) for name, amount in city.stock.items()}
        tax = realm_events.TaxCollected(
            city=city.name,
            to=city.controller,
            season=data.SEASONS[season],
            amounts=nonzero(amounts),
        )
        events.append(tax)
        state = apply(state, [tax])
    events.append(
        realm_events.SeasonEnded(
            season_index=state.season_index,
            season=data.SEASONS[season],
            year=year,
            forced_by=forced_by,
            at_ms=now_ms,
        )
    )
    return events


def decide_end_turn(state: RealmState, command: realm_commands.EndTurn, ctx: Context) -> list[Any]:
    open_turn(state, ctx.player)
    events: list[Any] = [realm_events.TurnEnded(player=ctx.player)]
    if len(state.turn_ended) + 1 == len(state.players):
        events += season_end(apply(state, events), "", ctx.now_ms)
    return events


def decide_end_season(state: RealmState, command: realm_commands.EndSeason, ctx: Context) -> list[Any]:
    player_city(state, ctx.player)
    if state.over:
        raise RuleError("realm.game_over", "the realm's last winter has ended; no more moves are accepted")
    waited = ctx.now_ms - state.season_started_ms
    if waited < state.season_timeout_ms:
        raise RuleError(
            "realm.season_not_timed_out",
            f"the season may be forced to end {state.season_timeout_ms - waited} ms from now "
            f"(timeout {state.season_timeout_ms} ms of server time); until then every player ends the turn",
        )
    return season_end(state, ctx.player, ctx.now_ms)


DECIDE: dict[type, Callable[[RealmState, Any, Context], list[Any]]] = {
    realm_commands.Mine: decide_mine,
    realm_commands.Smelt: decide_smelt,
    realm_commands.GetFood: decide_get_food,
    realm_commands.FindHerbs: decide_find_herbs,
    realm_commands.HealArmy: decide_heal_army,
    realm_commands.CutWood: decide_cut_wood,
    realm_commands.Fortify: decide_fortify,
    realm_commands.RaiseArmy: decide_raise_army,
    realm_commands.EquipArmy: decide_equip_army,
    realm_commands.DismissArmy: decide_dismiss_army,
    realm_commands.Raid: decide_raid,
    realm_commands.Besiege: decide_besiege,
    realm_commands.ChooseTaxSeason: decide_choose_tax_season,
    realm_commands.BuyFreedom: decide_buy_freedom,
    realm_commands.Sabotage: decide_sabotage,
    realm_commands.Revolt: decide_revolt,
    realm_commands.RestartCity: decide_restart_city,
    realm_commands.SendMerchant: decide_send_merchant,
    realm_commands.OfferTrade: decide_offer_trade,
    realm_commands.CounterOffer: decide_counter_offer,
    realm_commands.AgreeTrade: decide_agree_trade,
    realm_commands.DeclineTrade: decide_decline_trade,
    realm_commands.EndTurn: decide_end_turn,
    realm_commands.EndSeason: decide_end_season,
}


# --- evolve -------------------------------------------------------------------------------------------


def gain(state: RealmState, city_name: str, changes: dict[str, int], sign: int = 1) -> RealmState:
    city = state.cities[city_name]
    return with_city(state, replace(city, stock=add_stock(city.stock, changes, sign)))


def evolve_mined(state: RealmState, event: realm_events.Mined) -> RealmState:
    city = state.cities[event.city]
    stock = add_stock(city.stock, {event.found: event.amount}) if event.found else city.stock
    saved = city.saved_stars - event.saved_used + event.saved_gained
    return spend_action(with_city(state, replace(city, stock=stock, saved_stars=saved)), event.city)


def evolve_smelted(state: RealmState, event: realm_events.Smelted) -> RealmState:
    if event.success:
        state = gain(state, event.city, {event.ore: -event.amount, data.SMELTED[event.ore]: event.amount})
    return spend_action(state, event.city)


def evolve_food_got(state: RealmState, event: realm_events.FoodGot) -> RealmState:
    city = state.cities[event.city]
    wards = city.saved_wards + event.wards_gained - event.wards_used
    city = replace(city, stock=add_stock(city.stock, {"food": event.amount}), saved_wards=wards)
    return spend_action(with_city(state, city), event.city)


GATHERED: dict[type, str] = {realm_events.HerbsFound: "herbs", realm_events.WoodCut: "wood"}


def evolve_gathered(state: RealmState, event: realm_events.HerbsFound | realm_events.WoodCut) -> RealmState:
    return spend_action(gain(state, event.city, {GATHERED[type(event)]: event.amount}), event.city)


def evolve_army_healed(state: RealmState, event: realm_events.ArmyHealed) -> RealmState:
    city = state.cities[event.city]
    assert city.army is not None
    city = replace(
        city,
        stock=add_stock(city.stock, {"herbs": -event.herbs}),
        army=replace(city.army, damage=event.damage_after),
    )
    return spend_action(with_city(state, city), event.city)


def evolve_fortified(state: RealmState, event: realm_events.Fortified) -> RealmState:
    city = state.cities[event.city]
    city = replace(
        city,
        stock=add_stock(city.stock, {"wood": -event.wood, "stone": -event.stone}),
        hit_points=event.hit_points_after,
    )
    return spend_action(with_city(state, city), event.city)


def evolve_army_raised(state: RealmState, event: realm_events.ArmyRaised) -> RealmState:
    city = state.cities[event.city]
    stock = city.stock
    if city.army is None:
        army = Army(soldiers=event.army_after)
    else:
        army = replace(city.army, soldiers=event.army_after)
        if army.equipment != "none":
            stock = add_stock(
                stock, {data.EQUIPMENT_METAL[army.equipment]: -event.soldiers * data.METAL_PER_SOLDIER}
            )
    city = replace(city, population=city.population - event.soldiers, army=army, stock=stock)
    return spend_action(with_city(state, city), event.city)


def evolve_army_equipped(state: RealmState, event: realm_events.ArmyEquipped) -> RealmState:
    city = state.cities[event.city]
    assert city.army is not None
    city = replace(
        city,
        stock=add_stock(city.stock, {event.metal: -event.cost}),
        army=replace(city.army, equipment=event.tier),
    )
    return spend_action(with_city(state, city), event.city)


def evolve_army_dismissed(state: RealmState, event: realm_events.ArmyDismissed) -> RealmState:
    city = state.cities[event.city]
    city = replace(city, army=None, population=city.population + event.soldiers)
    return spend_action(with_city(state, city), event.city)


def evolve_raided(state: RealmState, event: realm_events.Raided) -> RealmState:
    state = after_battle(state, event.battle)
    if event.taken:
        state = gain(state, event.battle.defender, {event.resource: event.taken}, -1)
        state = gain(state, event.battle.attacker, {event.resource: event.taken})
    return state


def evolve_besieged(state: RealmState, event: realm_events.Besieged) -> RealmState:
    state = after_battle(state, event.battle)
    defender = state.cities[event.battle.defender]
    return with_city(state, replace(defender, hit_points=event.hit_points_after))


def evolve_city_destroyed(state: RealmState, event: realm_events.CityDestroyed) -> RealmState:
    state = gain(state, event.by, event.plunder)
    cities = {}
    for name, city in state.cities.items():
        if name == event.city:
            city = replace(
                city,
                destroyed=True,
                stock=full_stock({}),
                population=0,
                hit_points=0,
                army=None,
                controller="",
                saved_stars=0,
                saved_wards=0,
                merchant="",
            )
        elif name in event.freed:
            city = replace(city, controller="", tax_year=0, tax_season=-1)
        cities[name] = city
    # Its own merchant on the road is lost with his load.
    merchants = {key: merchant for key, merchant in state.merchants.items() if merchant.home != event.city}
    return replace(state, cities=cities, merchants=merchants)


def evolve_city_surrendered(state: RealmState, event: realm_events.CitySurrendered) -> RealmState:
    city = state.cities[event.city]
    city = replace(city, controller=event.to, hit_points=event.hit_points_after, tax_year=0, tax_season=-1)
    return with_city(state, city)


def evolve_tax_season_chosen(state: RealmState, event: realm_events.TaxSeasonChosen) -> RealmState:
    city = state.cities[event.city]
    return with_city(state, replace(city, tax_year=event.year, tax_season=data.SEASONS.index(event.season)))


def evolve_tax_collected(state: RealmState, event: realm_events.TaxCollected) -> RealmState:
    return gain(gain(state, event.city, event.amounts, -1), event.to, event.amounts)


def free(state: RealmState, name: str) -> RealmState:
    return with_city(state, replace(state.cities[name], controller="", tax_year=0, tax_season=-1))


def evolve_freedom_bought(state: RealmState, event: realm_events.FreedomBought) -> RealmState:
    state = gain(gain(state, event.city, {"gold": event.gold}, -1), event.controller, {"gold": event.gold})
    return spend_action(free(state, event.city), event.city)


def evolve_sabotage_attempted(state: RealmState, event: realm_events.SabotageAttempted) -> RealmState:
    if event.freed:
        state = free(state, event.city)
    return spend_action(state, event.city)


def evolve_revolt_fought(state: RealmState, event: realm_events.RevoltFought) -> RealmState:
    state = after_battle(state, event.battle, mark_attacked=False)
    if event.battle.attacker_won:
        state = free(state, event.battle.attacker)
    return state


def evolve_city_restarted(state: RealmState, event: realm_events.CityRestarted) -> RealmState:
    city = replace(
        state.cities[event.city],
        destroyed=False,
        stock=full_stock(event.stock),
        population=event.population,
        hit_points=event.hit_points,
        immune_until=event.immune_until_season,
        army=None,
    )
    return spend_action(with_city(state, city), event.city)


def evolve_merchant_sent(state: RealmState, event: realm_events.MerchantSent) -> RealmState:
    home = state.cities[event.home]
    home = replace(home, stock=add_stock(home.stock, event.load, -1), merchant=event.trade_id)
    merchants = dict(state.merchants)
    merchants[event.trade_id] = Merchant(
        trade_id=event.trade_id, home=event.home, host=event.host, load=event.load
    )
    return spend_action(replace(with_city(state, home), merchants=merchants), event.home, event.actions_spent)


def drop_merchant(state: RealmState, trade_id: str) -> RealmState:
    merchant = state.merchants[trade_id]
    merchants = {key: merchant for key, merchant in state.merchants.items() if key != trade_id}
    home = state.cities[merchant.home]
    if home.merchant == trade_id:
        state = with_city(state, replace(home, merchant=""))
    return replace(state, merchants=merchants)


def record_ledger(state: RealmState, event: Any) -> RealmState:
    """Add the trade event's ledger rows (see `trades.ledger_entries`)."""
    merchant = state.merchants[event.trade_id]
    rows = trades.ledger_entries(event, merchant.rounds, merchant.home, merchant.host)
    return replace(state, ledger=state.ledger + rows) if rows else state


def evolve_merchant_intercepted(state: RealmState, event: realm_events.MerchantIntercepted) -> RealmState:
    if event.escaped:
        return state
    state = record_ledger(state, event)
    return drop_merchant(gain(state, event.attacker, event.seized), event.trade_id)


def set_merchant(state: RealmState, merchant: Merchant) -> RealmState:
    merchants = dict(state.merchants)
    merchants[merchant.trade_id] = merchant
    return replace(state, merchants=merchants)


def evolve_trade_offered(state: RealmState, event: realm_events.TradeOffered) -> RealmState:
    merchant = state.merchants[event.trade_id]
    return set_merchant(state, replace(merchant, buy=event.buy, want=event.pay, dice=event.dice, agreed=()))


def evolve_trade_countered(state: RealmState, event: realm_events.TradeCountered) -> RealmState:
    merchant = state.merchants[event.trade_id]
    return set_merchant(state, replace(merchant, want=event.want, agreed=()))


def evolve_trade_agreed(state: RealmState, event: realm_events.TradeAgreed) -> RealmState:
    merchant = state.merchants[event.trade_id]
    return set_merchant(state, replace(merchant, agreed=(*merchant.agreed, event.by)))


def evolve_trade_rolled(state: RealmState, event: realm_events.TradeRolled) -> RealmState:
    merchant = state.merchants[event.trade_id]
    next_terms = replace(merchant, buy="", want="", agreed=(), rounds=event.round)
    if event.cancelled:
        return set_merchant(state, next_terms)
    state = record_ledger(state, event)
    cities = dict(state.cities)
    load = dict(merchant.load)
    for transfer in event.transfers:
        if transfer.source.startswith("merchant:"):
            load[transfer.resource] -= transfer.amount
        elif transfer.source:
            source = cities[transfer.source]
            cities[transfer.source] = replace(
                source, stock=add_stock(source.stock, {transfer.resource: transfer.amount}, -1)
            )
        target = cities[transfer.target]
        cities[transfer.target] = replace(
            target, stock=add_stock(target.stock, {transfer.resource: transfer.amount})
        )
    return set_merchant(replace(state, cities=cities), replace(next_terms, load=load))


def evolve_trade_cancelled(state: RealmState, event: realm_events.TradeCancelled) -> RealmState:
    merchant = state.merchants[event.trade_id]
    return set_merchant(record_ledger(state, event), replace(merchant, load=event.load_after))


def evolve_trade_declined(state: RealmState, event: realm_events.TradeDeclined) -> RealmState:
    return state


def evolve_merchant_returned(state: RealmState, event: realm_events.MerchantReturned) -> RealmState:
    return drop_merchant(gain(state, event.home, event.delivered), event.trade_id)


def evolve_turn_ended(state: RealmState, event: realm_events.TurnEnded) -> RealmState:
    return replace(state, turn_ended=(*state.turn_ended, event.player))


def evolve_village_produced(state: RealmState, event: realm_events.VillageProduced) -> RealmState:
    return gain(state, event.city, event.amounts)


def evolve_season_ended(state: RealmState, event: realm_events.SeasonEnded) -> RealmState:
    following = event.season_index + 1
    return replace(
        state,
        season_index=following,
        season_started_ms=event.at_ms,
        actions_used={},
        turn_ended=(),
        over=following >= state.years * len(data.SEASONS),
    )


EVOLVE: dict[type, Callable[[RealmState, Any], RealmState]] = {
    realm_events.Mined: evolve_mined,
    realm_events.Smelted: evolve_smelted,
    realm_events.FoodGot: evolve_food_got,
    realm_events.HerbsFound: evolve_gathered,
    realm_events.ArmyHealed: evolve_army_healed,
    realm_events.WoodCut: evolve_gathered,
    realm_events.Fortified: evolve_fortified,
    realm_events.ArmyRaised: evolve_army_raised,
    realm_events.ArmyEquipped: evolve_army_equipped,
    realm_events.ArmyDismissed: evolve_army_dismissed,
    realm_events.Raided: evolve_raided,
    realm_events.Besieged: evolve_besieged,
    realm_events.CityDestroyed: evolve_city_destroyed,
    realm_events.CitySurrendered: evolve_city_surrendered,
    realm_events.TaxSeasonChosen: evolve_tax_season_chosen,
    realm_events.TaxCollected: evolve_tax_collected,
    realm_events.FreedomBought: evolve_freedom_bought,
    realm_events.SabotageAttempted: evolve_sabotage_attempted,
    realm_events.RevoltFought: evolve_revolt_fought,
    realm_events.CityRestarted: evolve_city_restarted,
    realm_events.MerchantSent: evolve_merchant_sent,
    realm_events.MerchantIntercepted: evolve_merchant_intercepted,
    realm_events.TradeOffered: evolve_trade_offered,
    realm_events.TradeCountered: evolve_trade_countered,
    realm_events.TradeAgreed: evolve_trade_agreed,
    realm_events.TradeRolled: evolve_trade_rolled,
    realm_events.TradeCancelled: evolve_trade_cancelled,
    realm_events.TradeDeclined: evolve_trade_declined,
    realm_events.MerchantReturned: evolve_merchant_returned,
    realm_events.TurnEnded: evolve_turn_ended,
    realm_events.VillageProduced: evolve_village_produced,
    realm_events.SeasonEnded: evolve_season_ended,
}
