"""The realm's options, setup and state: cities, armies, merchants, the calendar and the trade ledger."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Amount, Key, Name, PlayerName, free, one_of
from almanac.games.realm.v1 import data
from almanac.games.realm.v1.data import CityName, Resource, TradeId

# The words a state holds, for the API documents (events/schema.py): enums from the data, or free on purpose.
Equipment = Annotated[str, one_of(data.TIERS)]
# an offer's terms: "" where none is named (yet)
Terms = Annotated[str, one_of(("", *data.RESOURCES), '"" when none is named')]
Owner = Annotated[str, free('the player who owns the city, "" for an NPC village')]
CityOrNone = Annotated[str, free('a city\'s name, "" for none')]
TradeOrNone = Annotated[str, free('a trade\'s id, "" for none')]


class RealmOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Creation options; ``{}`` seats the creator, alice and bob (the creator once), and one NPC village.

    The schema bounds every number; the rules then check what the bounds cannot say (two or more
    distinct players, known resources) with their own codes.
    """

    players: Annotated[tuple[Annotated[Name, *PlayerName.__metadata__], ...], msgspec.Meta(max_length=16)] = ("alice", "bob")
    villages: Annotated[int, msgspec.Meta(ge=0, le=data.MAX_VILLAGES)] = 1
    # overrides per resource for every player city
    starting_stock: Annotated[dict[Annotated[Key, one_of(data.RESOURCES)], Amount], msgspec.Meta(max_length=32)] = {}
    actions_per_season: Annotated[int, msgspec.Meta(ge=1, le=100)] = data.ACTIONS_PER_SEASON
    years: Annotated[int, msgspec.Meta(ge=1, le=1_000)] = data.YEARS
    season_timeout_ms: Annotated[int, msgspec.Meta(ge=0, le=366 * 24 * 3_600_000)] = data.SEASON_TIMEOUT_MS


class RealmSetup(msgspec.Struct, frozen=True, kw_only=True):
    players: tuple[PlayerName, ...]
    villages: tuple[CityName, ...]
    starting_stock: dict[Resource, int]
    starting_population: int
    starting_hit_points: int
    starting_army: int
    actions_per_season: int
    years: int
    season_timeout_ms: int
    started_ms: int


class Army(msgspec.Struct, frozen=True, kw_only=True):
    soldiers: int
    equipment: Equipment = "none"
    damage: int = 0  # each point takes one die from the army's rolls; 1,000 herbs cure one


class City(msgspec.Struct, frozen=True, kw_only=True):
    name: CityName
    owner: Owner  # the player id, or "" for an NPC village
    population: int
    stock: dict[Resource, int]  # every resource, in data.RESOURCES order
    hit_points: int
    army: Army | None = None
    saved_stars: int = 0  # from moons in mining
    saved_wards: int = 0  # from moons in food rolls, each cancels one skull later
    destroyed: bool = False
    controller: CityOrNone = ""  # the city that took it and taxes it
    tax_year: int = 0  # the year the controller chose a tax season for
    tax_season: int = -1
    immune_until: int = 0  # first season index in which it can be attacked again
    attacked_season: int = -1  # the last season it was raided or besieged ("under attack")
    attacked_by: CityOrNone = ""
    merchant: TradeOrNone = ""  # the trade id of its merchant on the road, if any


class Merchant(msgspec.Struct, frozen=True, kw_only=True):
    trade_id: TradeId
    home: CityName
    host: CityName
    load: dict[Resource, int]
    buy: Terms = ""
    want: Terms = ""
    dice: int = 1
    agreed: tuple[CityName, ...] = ()  # cities that agreed to the terms on the table
    rounds: int = 0


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    trade_id: TradeId
    round: int
    source: CityName
    target: CityName
    resource: Resource
    amount: int
    phantom: bool
    home: CityOrNone = ""  # the trade's parties: the merchant's home city and his host
    host: CityOrNone = ""


class RealmState(msgspec.Struct, frozen=True, kw_only=True):
    players: tuple[PlayerName, ...]
    cities: dict[CityName, City]  # player cities in seat order, then villages
    actions_per_season: int
    years: int
    season_timeout_ms: int
    starting_population: int
    starting_hit_points: int
    season_index: int = 0  # 0 = spring of year 1
    season_started_ms: int = 0
    actions_used: dict[PlayerName, int] = {}
    turn_ended: tuple[PlayerName, ...] = ()
    merchants: dict[TradeId, Merchant] = {}
    ledger: tuple[LedgerEntry, ...] = ()
    over: bool = False


def season_name(index: int) -> str:
    return data.SEASONS[index % len(data.SEASONS)]


def year_of(index: int) -> int:
    return index // len(data.SEASONS) + 1


def full_stock(values: dict[str, int]) -> dict[str, int]:
    """A stock with every resource, in the canonical order."""
    return {name: values.get(name, 0) for name in data.RESOURCES}
