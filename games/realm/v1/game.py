"""realm@1's Decider: what the cities' commands decide, what each city sees and counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError, redact
from almanac.games.realm.v1 import data
from almanac.games.realm.v1.commands import COMMAND_TYPES
from almanac.games.realm.v1.events import EVENT_TYPES
from almanac.games.realm.v1.hidden import SECRETS
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
from almanac.games.realm.v1.summaries import summarize


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


DECIDER = RealmDecider()
