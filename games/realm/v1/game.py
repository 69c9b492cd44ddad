"""realm@1's Decider: what the cities' commands decide, what each city sees and counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError, Secret, event_tag, redact
from almanac.games.realm.v1 import audit, data, events as realm_events
from almanac.games.realm.v1.commands import COMMAND_TYPES
from almanac.games.realm.v1.events import EVENT_TYPES
from almanac.games.realm.v1.rules import DECIDE, EVOLVE
from almanac.games.realm.v1.state import (
    Army,
    City,
    RealmOptions,
    RealmSetup,
    RealmState,
    full_stock,
    season_name,
    year_of,
)


def parties(event: Any) -> tuple[str, ...]:
    """The cities an event concerns; a player's city carries the player's id."""
    if isinstance(event, realm_events.Raided | realm_events.Besieged | realm_events.RevoltFought):
        return (event.battle.attacker, event.battle.defender)
    if isinstance(event, realm_events.CityDestroyed):
        return (event.city, event.by)
    if isinstance(event, realm_events.TaxCollected):
        return (event.city, event.to)
    if isinstance(event, realm_events.TaxSeasonChosen):
        return (event.city, event.controller)
    if isinstance(event, audit.TRADE_EVENTS):
        sides = (audit.home_of(event), audit.host_of(event), getattr(event, "attacker", ""))
        return tuple(name for name in sides if name)
    city = getattr(event, "city", None)
    return (city,) if isinstance(city, str) else ()


def _home(event: Any) -> tuple[str, ...]:
    return (audit.home_of(event),)


def _host(event: Any) -> tuple[str, ...]:
    return (audit.host_of(event),)


def _attacker(event: Any) -> tuple[str, ...]:
    return (event.attacker,)


def _party(*fields: str) -> Secret:
    """Fields the event's parties see (they reveal storage, a trade's load or dice only they saw roll)."""
    return Secret(fields, parties)


# A city's own holdings recorded on a trade step: only that city sees them, even among the parties.
_OWN_HOLDINGS = (Secret(("home_after",), _home), Secret(("host_after",), _host))

# What is hidden in the realm (docs/rules/realm.md, "What is public"); every other field is public.
SECRETS: dict[type, tuple[Secret, ...]] = {
    realm_events.Mined: (_party("dice", "stars", "saved_used", "saved_gained", "outcome", "found", "amount"),),
    realm_events.Smelted: (_party("amount", "dice", "stars", "success"),),
    realm_events.FoodGot: (
        _party("dice", "stars", "doubled", "skulls", "wards_used", "wards_gained", "spoiled", "amount"),
    ),
    realm_events.HerbsFound: (_party("dice", "stars", "amount"),),
    realm_events.WoodCut: (_party("dice", "stars", "amount"),),
    realm_events.ArmyHealed: (_party("points", "herbs", "damage_after"),),
    realm_events.Fortified: (_party("wood", "stone"),),
    realm_events.ArmyEquipped: (_party("cost",),),
    realm_events.Raided: (_party("taken",),),
    realm_events.CityDestroyed: (_party("plunder", "lost"),),
    realm_events.TaxCollected: (_party("amounts",),),
    realm_events.CityRestarted: (_party("stock",),),
    realm_events.MerchantSent: (_party("load", "transfers", "load_after"), *_OWN_HOLDINGS),
    realm_events.MerchantIntercepted: (
        _party("seized", "transfers", "load_after"),
        *_OWN_HOLDINGS,
        Secret(("attacker_after",), _attacker),
    ),
    realm_events.TradeOffered: (_party("load_after"), *_OWN_HOLDINGS),
    realm_events.TradeCountered: (_party("load_after"), *_OWN_HOLDINGS),
    realm_events.TradeAgreed: (_party("load_after"), *_OWN_HOLDINGS),
    # Each side's dice, stars and demand give the transfers: all of a roll but its round and outcome.
    realm_events.TradeRolled: (_party("buyer", "seller", "transfers", "shortfall", "load_after"), *_OWN_HOLDINGS),
    # The reason names the demand and the load.
    realm_events.TradeCancelled: (
        _party("reason", "load_before", "lost", "transfers", "load_after"),
        *_OWN_HOLDINGS,
    ),
    realm_events.TradeDeclined: (_party("load_after"), *_OWN_HOLDINGS),
    realm_events.MerchantReturned: (_party("delivered", "transfers", "load_after"), *_OWN_HOLDINGS),
}


def worth(city: City) -> int:
    """A city's worth: resources at their worth, people, soldiers (more with equipment), walls, vassals excluded."""
    return sum(amount * data.RESOURCE_WORTH[name] for name, amount in city.stock.items()) + public_worth(city)


def public_worth(city: City) -> int:
    """The part of a city's worth every player sees: people, walls, soldiers and their armour (never storage)."""
    total = city.population * data.POPULATION_WORTH + city.hit_points * data.HIT_POINT_WORTH
    if city.army is not None:
        total += city.army.soldiers * (data.SOLDIER_WORTH + data.TIERS.index(city.army.equipment))
    return total


def city_public(city: City) -> dict[str, Any]:
    """What every player sees of a city: who holds it, people, walls, army size and armour; never storage."""
    return {
        "name": city.name,
        "owner": city.owner,
        "population": city.population,
        "hit_points": city.hit_points,
        "army": None
        if city.army is None
        else {"soldiers": city.army.soldiers, "equipment": city.army.equipment},
        "destroyed": city.destroyed,
        "controller": city.controller,
        "immune_until_season": city.immune_until,
        "merchant_away": bool(city.merchant),
    }


def city_full(city: City) -> dict[str, Any]:
    return {
        **city_public(city),
        "army": None if city.army is None else msgspec.to_builtins(city.army),
        "stock": dict(city.stock),
        "saved_stars": city.saved_stars,
        "saved_wards": city.saved_wards,
        "tax_year": city.tax_year,
        "tax_season": data.SEASONS[city.tax_season] if city.tax_season >= 0 else None,
        "merchant": city.merchant,
    }


class RealmDecider:
    """The realm as a Decider: one city per seat, optional NPC villages, seasons of simultaneous turns."""

    name = "realm"
    options_type = RealmOptions
    setup_type = RealmSetup
    state_type = RealmState
    command_types: tuple[type, ...] = COMMAND_TYPES
    event_types: tuple[type, ...] = EVENT_TYPES
    secrets = SECRETS

    def setup(self, options: RealmOptions, ctx: Context) -> RealmSetup:
        """Check the seats and numbers; nothing is drawn (every city starts alike).

        The creator always has a seat: named among ``players`` where the list puts them, else first.
        """
        players = tuple(options.players)
        if ctx.player not in players:
            players = (ctx.player, *players)
        if len(players) < 2 or len(set(players)) != len(players) or not all(players):
            raise RuleError(
                "realm.invalid_players",
                "the seats (the creator and options.players) need two or more distinct player ids",
                field="options.players",
            )
        if not 0 <= options.villages <= data.MAX_VILLAGES:
            raise RuleError(
                "realm.invalid_villages",
                f"options.villages must be 0..{data.MAX_VILLAGES}",
                field="options.villages",
            )
        villages = tuple(f"village-{number}" for number in range(1, options.villages + 1))
        if set(villages) & set(players):
            raise RuleError(
                "realm.invalid_players", "player ids may not be village names", field="options.players"
            )
        for name, amount in options.starting_stock.items():
            if name not in data.RESOURCES or amount < 0:
                raise RuleError(
                    "realm.invalid_stock",
                    f"starting_stock.{name}: resources are {', '.join(data.RESOURCES)}, amounts at least 0",
                    field=f"options.starting_stock.{name}",
                    allowed=list(data.RESOURCES),
                )
        if options.actions_per_season < 1 or options.years < 1 or options.season_timeout_ms < 0:
            raise RuleError(
                "realm.invalid_options",
                "actions_per_season and years must be at least 1, the timeout at least 0",
            )
        return RealmSetup(
            players=players,
            villages=villages,
            starting_stock=full_stock({**data.STARTING_STOCK, **options.starting_stock}),
            starting_population=data.STARTING_POPULATION,
            starting_hit_points=data.STARTING_HIT_POINTS,
            starting_army=data.STARTING_ARMY,
            actions_per_season=options.actions_per_season,
            years=options.years,
            season_timeout_ms=options.season_timeout_ms,
            started_ms=ctx.now_ms,
        )

    def initial_state(self, setup: RealmSetup) -> RealmState:
        cities: dict[str, City] = {}
        for player in setup.players:
            cities[player] = City(
                name=player,
                owner=player,
                population=setup.starting_population,
                stock=full_stock(setup.starting_stock),
                hit_points=setup.starting_hit_points,
                army=Army(soldiers=setup.starting_army) if setup.starting_army else None,
            )
        for village in setup.villages:
            cities[village] = City(
                name=village,
                owner="",
                population=data.VILLAGE_POPULATION,
                stock=full_stock(data.VILLAGE_STOCK),
                hit_points=data.VILLAGE_HIT_POINTS,
                army=Army(soldiers=data.VILLAGE_ARMY),
            )
        return RealmState(
            players=setup.players,
            cities=cities,
            actions_per_season=setup.actions_per_season,
            years=setup.years,
            season_timeout_ms=setup.season_timeout_ms,
            starting_population=setup.starting_population,
            starting_hit_points=setup.starting_hit_points,
            season_started_ms=setup.started_ms,
        )

    def decide(self, state: RealmState, command: Any, ctx: Context) -> list[Any]:
        handler = DECIDE.get(type(command))
        if handler is None:
            kinds = [kind.__struct_config__.tag for kind in COMMAND_TYPES]
            raise RuleError(
                "unknown_command",
                f"the realm has no command {type(command).__name__}",
                field="kind",
                allowed=kinds,
            )
        return handler(state, command, ctx)

    def evolve(self, state: RealmState, event: Any) -> RealmState:
        return EVOLVE[type(event)](state, event)

    def is_over(self, state: RealmState) -> bool:
        return state.over

    def seats(self, state: RealmState) -> tuple[str, ...]:
        return state.players

    def view(self, state: RealmState, player: str) -> dict[str, Any]:
        """Own city in full (and the storage of cities it taxes); others: people, walls, army, never storage.
        Merchants: in full when the player is a party, otherwise only who went where."""
        cities = {}
        for name, city in state.cities.items():
            seen = name == player or (city.controller == player and player in state.players)
            cities[name] = city_full(city) if seen else city_public(city)
        merchants = []
        for merchant in state.merchants.values():
            if player in (merchant.home, merchant.host):
                merchants.append(msgspec.to_builtins(merchant))
            else:
                merchants.append(
                    {"trade_id": merchant.trade_id, "home": merchant.home, "host": merchant.host}
                )
        return {
            "player": player,
            "season": season_name(state.season_index),
            "year": year_of(state.season_index),
            "season_index": state.season_index,
            "season_started_ms": state.season_started_ms,
            "season_timeout_ms": state.season_timeout_ms,
            "actions_left": max(0, state.actions_per_season - state.actions_used.get(player, 0)),
            "turn_ended": list(state.turn_ended),
            "cities": cities,
            "merchants": merchants,
            "ledger": [
                msgspec.to_builtins(row)
                for row in state.ledger
                if player in (row.home, row.host, row.source, row.target)
            ],
            "scores": self.public_scores(state),
            "own_score": self.scores(state).get(player),
            "over": state.over,
        }

    def redact(self, event: Any, player: str) -> Any:
        """Parties see an event whole but for the other side's own holdings; others see that it happened,
        with the fields that reveal storage, loads or private rolls hidden (``SECRETS``)."""
        return redact(SECRETS, event, player)

    def scores(self, state: RealmState) -> dict[str, int]:
        """Worth / 1,000 rounded down, plus 10 per city the player taxes."""
        return _scores(state, worth)

    def public_scores(self, state: RealmState) -> dict[str, int]:
        """While the game runs, the score without storage (what every view shows); once over, the score."""
        return self.scores(state) if state.over else _scores(state, public_worth)

    def resources(self, state: RealmState) -> dict[str, Any]:
        return {
            "season": season_name(state.season_index),
            "year": year_of(state.season_index),
            "cities": {name: city_full(city) for name, city in state.cities.items()},
            "merchants": [msgspec.to_builtins(merchant) for merchant in state.merchants.values()],
            "ledger": [msgspec.to_builtins(row) for row in state.ledger],
        }

    def summary(self, event: Any) -> str:
        return summarize(event)


def _scores(state: RealmState, worth_of: Callable[[City], int]) -> dict[str, int]:
    result = {}
    for player in state.players:
        vassals = sum(1 for city in state.cities.values() if city.controller == player)
        result[player] = (worth_of(state.cities[player]) + vassals * data.VASSAL_WORTH) // data.SCORE_UNIT
    return result


def faces_text(faces: tuple[str, ...]) -> str:
    return " ".join(faces) if faces else "hidden dice"


def summarize(event: Any) -> str:
    """One line per event, for logs, audits and the CLI."""
    if isinstance(event, realm_events.Mined):
        found = f"{event.amount} {event.found}" if event.found else "nothing"
        return f"{event.city} mined for {event.ore}: {faces_text(event.dice)} -> {event.stars} stars, {event.outcome}, {found}"
    if isinstance(event, realm_events.Smelted):
        verdict = "smelted" if event.success else "failed to smelt"
        return f"{event.city} {verdict} {event.amount} {event.ore} ({event.stars}/{event.needed} stars)"
    if isinstance(event, realm_events.FoodGot):
        return f"{event.city} {event.method} in {event.season}: {faces_text(event.dice)} x{event.multiplier} -> {event.amount} food"
    if isinstance(event, realm_events.HerbsFound | realm_events.WoodCut):
        what = "herbs" if isinstance(event, realm_events.HerbsFound) else "wood"
        return (
            f"{event.city} found {event.amount} {what} in {event.season} ({event.stars} stars x{event.rate})"
        )
    if isinstance(event, realm_events.Raided | realm_events.Besieged | realm_events.RevoltFought):
        battle = event.battle
        verb = {
            realm_events.Raided: "raided",
            realm_events.Besieged: "besieged",
            realm_events.RevoltFought: "revolted against",
        }[type(event)]
        outcome = (
            "won"
            if battle.attacker_won
            else f"failed, lost {battle.troops_lost} soldiers"
            + (" and disbanded" if battle.disbanded else "")
        )
        extra = ""
        if isinstance(event, realm_events.Raided) and battle.attacker_won:
            extra = f", took {event.taken} {event.resource}"
        if isinstance(event, realm_events.Besieged) and battle.attacker_won:
            extra = f", walls {event.hit_points_after} hp"
        return f"{battle.attacker} {verb} {battle.defender}: {battle.attack_score} vs {battle.defence_score}, {outcome}{extra}"
    if isinstance(event, realm_events.TradeRolled):
        if event.cancelled:
            return f"{event.trade_id} round {event.round}: the merchant cannot pay {event.seller.demanded} {event.seller.resource}"
        moves = "; ".join(
            f"{move.amount} {move.resource} {move.source or 'phantom'} -> {move.target}"
            for move in event.transfers
        )
        return f"{event.trade_id} round {event.round}: {moves}"
    if isinstance(event, realm_events.SeasonEnded):
        forced = f" (forced by {event.forced_by})" if event.forced_by else ""
        return f"{event.season} of year {event.year} ended{forced}"
    if isinstance(event, realm_events.TurnEnded):
        return f"{event.player} ended the turn"
    line = _summarize_more(event)
    return line if line is not None else f"{event_tag(event)} in {getattr(event, 'city', 'the realm')}"


def stock_text(stock: dict[str, int]) -> str:
    """``{"gold": 2000, "iron": 1000}`` as ``2000 gold, 1000 iron`` (``nothing`` when empty)."""
    parts = [f"{amount} {resource}" for resource, amount in stock.items() if amount]
    return ", ".join(parts) if parts else "nothing"


def _summarize_more(event: Any) -> str | None:
    """The armies, vassals, merchants and villages: one line each."""
    e = realm_events
    if isinstance(event, e.ArmyHealed):
        return f"{event.city} healed {event.points} damage with {event.herbs} herbs; damage now {event.damage_after}"
    if isinstance(event, e.Fortified):
        return (
            f"{event.city} fortified with {event.wood} wood and {event.stone} stone: "
            f"+{event.hit_points_gained} hp, walls {event.hit_points_after} hp"
        )
    if isinstance(event, e.ArmyRaised):
        return f"{event.city} raised {event.soldiers} soldiers; army {event.army_after}"
    if isinstance(event, e.ArmyEquipped):
        return f"{event.city} equipped its army with {event.tier} ({event.metal}) for {event.cost}"
    if isinstance(event, e.ArmyDismissed):
        return f"{event.city} dismissed {event.soldiers} soldiers"
    if isinstance(event, e.CityDestroyed):
        freed = f"; freed {', '.join(event.freed)}" if event.freed else ""
        return f"{event.by} destroyed {event.city}: carried off {stock_text(event.plunder)}, lost {stock_text(event.lost)}{freed}"
    if isinstance(event, e.CitySurrendered):
        return f"{event.city} surrendered to {event.to} with {event.hit_points_after} hp left"
    if isinstance(event, e.TaxSeasonChosen):
        return f"{event.controller} will tax {event.city} in {event.season} of year {event.year}"
    if isinstance(event, e.TaxCollected):
        return f"{event.to} collected tax from {event.city} in {event.season}: {stock_text(event.amounts)}"
    if isinstance(event, e.FreedomBought):
        return f"{event.city} bought its freedom from {event.controller} for {event.gold} gold"
    if isinstance(event, e.SabotageAttempted):
        verdict = "and is free" if event.freed else "and failed"
        return (
            f"{event.city} sabotaged {event.controller}: {faces_text(event.dice)} -> "
            f"{event.stars}/{event.needed} stars, {verdict}"
        )
    if isinstance(event, e.CityRestarted):
        return (
            f"{event.city} started again with {stock_text(event.stock)}, {event.population} people, "
            f"{event.hit_points} hp (immune until season {event.immune_until_season})"
        )
    if isinstance(event, e.MerchantSent):
        return f"{event.trade_id}: {event.home} sent a merchant to {event.host} carrying {stock_text(event.load)}"
    if isinstance(event, e.MerchantIntercepted):
        verdict = "escaped" if event.escaped else f"was caught: {event.attacker} seized {stock_text(event.seized)}"
        return (
            f"{event.trade_id}: {event.attacker} intercepted {event.home}'s merchant at {event.at} "
            f"({event.army_score} vs {event.merchant_score}); the merchant {verdict}"
        )
    if isinstance(event, e.TradeOffered):
        return f"{event.trade_id}: {event.by} offered to buy {event.buy} with {event.pay}, {event.dice} dice"
    if isinstance(event, e.TradeCountered):
        return f"{event.trade_id}: {event.by} countered, wanting {event.want}"
    if isinstance(event, e.TradeAgreed):
        return f"{event.trade_id}: {event.by} agreed; {event.home} and {event.host} roll for the goods"
    if isinstance(event, e.TradeDeclined):
        return f"{event.trade_id}: {event.by} declined the trade between {event.home} and {event.host}"
    if isinstance(event, e.TradeCancelled):
        return f"{event.trade_id} cancelled ({event.reason}): lost {stock_text(event.lost)}"
    if isinstance(event, e.MerchantReturned):
        return f"{event.trade_id}: the merchant came home to {event.home} with {stock_text(event.delivered)}"
    if isinstance(event, e.VillageProduced):
        return f"{event.city}'s village produced {stock_text(event.amounts)}"
    return None


DECIDER = RealmDecider()
