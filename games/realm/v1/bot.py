"""The realm's seat bot: the random-legal policy played from one city's view, never the realm's whole state.

The view shows the seat's own city in full (and the storage of cities it taxes), the other cities without
their storage, and merchants in full only where the seat is a party. The state rebuilt from it fills what the
seat may not see with nothing (empty storage, empty loads): the policy's legality probe then judges by what the
seat knows, and the rules, which see everything, decide the command as they would a person's.
"""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.realm.v1 import data
from almanac.games.realm.v1.policy import choose_command
from almanac.games.realm.v1.state import Army, City, LedgerEntry, Merchant, RealmState, full_stock


def _city(shown: dict[str, Any]) -> City:
    army = shown["army"]
    season = shown.get("tax_season")
    return City(
        name=shown["name"],
        owner=shown["owner"] or "",  # the API shows "nothing" as null, the rules' view as ""
        population=shown["population"],
        stock=full_stock(shown.get("stock", {})),
        hit_points=shown["hit_points"],
        army=None if army is None else Army(soldiers=army["soldiers"], equipment=army["equipment"],
                                            damage=army.get("damage", 0)),
        saved_stars=shown.get("saved_stars", 0),
        saved_wards=shown.get("saved_wards", 0),
        destroyed=shown["destroyed"],
        controller=shown["controller"] or "",
        tax_year=shown.get("tax_year", 0),
        tax_season=data.SEASONS.index(season) if season else -1,
        immune_until=shown["immune_until_season"],
        # another city's merchant is known to be away, not which trade he is on
        merchant=shown.get("merchant", "away" if shown["merchant_away"] else "") or "",
    )


def _merchant(shown: dict[str, Any]) -> Merchant:
    if "load" not in shown:  # not a party: who went where, nothing else
        return Merchant(trade_id=shown["trade_id"], home=shown["home"], host=shown["host"], load={})
    return Merchant(**{**shown, "agreed": tuple(shown.get("agreed", ())), "buy": shown.get("buy") or "",
                       "want": shown.get("want") or ""})


def state_from_view(view: dict[str, Any]) -> RealmState:
    player = view["player"] or ""
    cities = {name: _city(shown) for name, shown in view["cities"].items()}
    return RealmState(
        players=tuple(city.owner for city in cities.values() if city.owner),
        cities=cities,
        # what is left to the seat this season, as if none were used
        actions_per_season=view["actions_left"],
        actions_used={player: 0},
        years=data.YEARS,
        season_timeout_ms=view["season_timeout_ms"],
        starting_population=data.STARTING_POPULATION,
        starting_hit_points=data.STARTING_HIT_POINTS,
        season_index=view["season_index"],
        season_started_ms=view["season_started_ms"],
        turn_ended=tuple(view["turn_ended"]),
        merchants={shown["trade_id"]: _merchant(shown) for shown in view["merchants"]},
        ledger=tuple(LedgerEntry(**{**row, "home": row.get("home") or "", "host": row.get("host") or ""})
                     for row in view["ledger"]),
        over=view["over"],
    )


def play(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    return choose_command(state_from_view(view), player, dice)
