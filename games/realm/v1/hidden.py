"""What each city may not see in realm@1: per event type, the fields only the cities it concerns see."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Secret
from almanac.games.realm.v1 import events as realm_events, trades


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
    if isinstance(event, trades.TRADE_EVENTS):
        sides = (trades.home_of(event), trades.host_of(event), getattr(event, "attacker", ""))
        return tuple(name for name in sides if name)
    city = getattr(event, "city", None)
    return (city,) if isinstance(city, str) else ()


def _home(event: Any) -> tuple[str, ...]:
    return (trades.home_of(event),)


def _host(event: Any) -> tuple[str, ...]:
    return (trades.host_of(event),)


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
