"""The realm's events, the stored format: each carries the dice it rolled and the outcome it decided."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import PlayerName, Reason, free, one_of
from almanac.games.realm.v1 import data
from almanac.games.realm.v1.data import CityName, Resource, TradeId

# The words of the log, for the API documents only (events.schema: decoding is unchanged, stored logs read as ever).
ResourceOrNone = Annotated[str, one_of(("", *data.RESOURCES), '"" when none is named')]
Face = Annotated[str, one_of(data.FACES)]
Dice = tuple[Face, ...]
Season = Annotated[str, one_of(data.SEASONS)]
Metal = Annotated[str, one_of(data.EQUIPMENT_METAL.values())]
# A fraction as the rules write it (str(Fraction)): the season's food multiplier, herb or wood rate.
Multiplier = Annotated[str, one_of(str(value) for values in data.FOOD_MULTIPLIERS.values() for value in values)]
Rate = Annotated[str, one_of(str(value) for value in (*data.HERB_RATES, *data.WOOD_RATES))]
Ore = Annotated[str, one_of(data.ORES)]
Tier = Annotated[str, one_of(data.EQUIPMENT_METAL)]
Method = Annotated[str, one_of(data.FOOD_METHODS)]
MiningMoon = Annotated[str, one_of(data.MINING_MOON_USES)]
FoodMoon = Annotated[str, one_of(data.FOOD_MOON_USES)]
SiegeEnd = Annotated[str, one_of(data.SIEGE_ENDS)]
Outcome = Annotated[str, one_of(data.MINING_OUTCOMES)]
PlayerOrNone = Annotated[str, free('a player\'s name, "" for none')]
CityOrNone = Annotated[str, free('a city\'s name, "" for none named (older logs)')]
Place = Annotated[str, free('a city\'s name, a merchant ("merchant:<trade id>"), "lost", or "" for phantom goods')]
Stock = dict[Resource, int]


class _Event(msgspec.Struct, frozen=True, kw_only=True):
    pass


class Transfer(msgspec.Struct, frozen=True, kw_only=True):
    """One movement of goods: ``phantom`` goods are created by a moon and taken from nobody."""

    source: Place  # a city name, a merchant ("merchant:<trade id>"), or "" for phantom goods
    target: Place  # a city name, a merchant, or "lost" (half a cancelled merchant's load)
    resource: Resource
    amount: int
    phantom: bool = False


class TradeSide(msgspec.Struct, frozen=True, kw_only=True):
    """One side's roll in a trade round: what it rolled, how the stars were counted, what it is owed."""

    city: CityName
    resource: Resource  # what this side takes
    dice: Dice
    stars: int  # star faces rolled
    skulls: int
    moons: int
    counted: int  # stars after skulls halve them, and at least one
    demanded: int  # counted x 1,000, taken from the other side
    phantom: int  # moons x 1,000, created without being deducted


# --- production ---------------------------------------------------------------------------------


class Mined(_Event, frozen=True, kw_only=True, tag="realm.mined"):
    city: CityName
    ore: Ore
    dice: Dice
    moons: MiningMoon
    stars: int  # stars counted, moons and saved stars included
    saved_used: int
    saved_gained: int
    outcome: Outcome  # "found", "lesser_ore", "skull_stone", "blank_stone", "nothing"
    found: ResourceOrNone  # the resource gained ("" for nothing)
    amount: int


class Smelted(_Event, frozen=True, kw_only=True, tag="realm.smelted"):
    city: CityName
    ore: Ore
    amount: int
    dice: Dice
    stars: int
    needed: int
    success: bool


class FoodGot(_Event, frozen=True, kw_only=True, tag="realm.food_got"):
    city: CityName
    method: Method
    season: Season
    dice: Dice
    stars: int  # stars plus blanks (a blank counts as one star)
    multiplier: Multiplier  # the season multiplier as an exact fraction, e.g. "3/2"
    moon: FoodMoon
    doubled: bool
    skulls: int
    wards_used: int
    wards_gained: int
    spoiled: bool  # an unwarded skull: no food
    amount: int


class _Gathered(_Event, frozen=True, kw_only=True):
    """A roll for herbs or wood: stars (moons count one) x the unit x the season's rate."""

    city: CityName
    season: Season
    dice: Dice
    stars: int
    rate: Rate
    amount: int


class HerbsFound(_Gathered, frozen=True, kw_only=True, tag="realm.herbs_found"):
    pass


class ArmyHealed(_Event, frozen=True, kw_only=True, tag="realm.army_healed"):
    city: CityName
    points: int
    herbs: int
    damage_after: int


class WoodCut(_Gathered, frozen=True, kw_only=True, tag="realm.wood_cut"):
    pass


class Fortified(_Event, frozen=True, kw_only=True, tag="realm.fortified"):
    city: CityName
    wood: int
    stone: int
    hit_points_gained: int
    hit_points_after: int


class ArmyRaised(_Event, frozen=True, kw_only=True, tag="realm.army_raised"):
    city: CityName
    soldiers: int
    army_after: int


class ArmyEquipped(_Event, frozen=True, kw_only=True, tag="realm.army_equipped"):
    city: CityName
    tier: Tier
    metal: Metal
    cost: int


class ArmyDismissed(_Event, frozen=True, kw_only=True, tag="realm.army_dismissed"):
    city: CityName
    soldiers: int


# --- war ----------------------------------------------------------------------------------------


class Battle(msgspec.Struct, frozen=True, kw_only=True):
    """Both sides of a fight: dice counts with their parts, faces, and scores (stars and moons)."""

    attacker: CityName
    defender: CityName
    attack_dice: Dice
    defence_dice: Dice
    attack_bonus: int  # equipment dice included in attack_dice
    defence_bonus: int
    attack_score: int
    defence_score: int
    attacker_won: bool
    troops_lost: int  # the attacker's loss when it fails
    army_after: int  # the attacker's soldiers after
    disbanded: bool  # the attacker's army fell under 1,000 and went home
    defender_damage: int  # damage points dealt to the defending army


class Raided(_Event, frozen=True, kw_only=True, tag="realm.raided"):
    battle: Battle
    resource: Resource
    taken: int


class Besieged(_Event, frozen=True, kw_only=True, tag="realm.besieged"):
    battle: Battle
    hit_points_lost: int
    hit_points_after: int
    if_taken: SiegeEnd


class CityDestroyed(_Event, frozen=True, kw_only=True, tag="realm.city_destroyed"):
    city: CityName
    by: CityName
    plunder: Stock  # what the destroyer carried off (half of everything)
    lost: Stock  # what was lost in the ruins
    freed: tuple[CityName, ...]  # cities it controlled, now free


class CitySurrendered(_Event, frozen=True, kw_only=True, tag="realm.city_surrendered"):
    city: CityName
    to: CityName
    hit_points_after: int


class TaxSeasonChosen(_Event, frozen=True, kw_only=True, tag="realm.tax_season_chosen"):
    controller: CityName
    city: CityName
    year: int
    season: Season


class TaxCollected(_Event, frozen=True, kw_only=True, tag="realm.tax_collected"):
    city: CityName
    to: CityName
    season: Season
    amounts: Stock


class FreedomBought(_Event, frozen=True, kw_only=True, tag="realm.freedom_bought"):
    city: CityName
    controller: CityName
    gold: int


class SabotageAttempted(_Event, frozen=True, kw_only=True, tag="realm.sabotage_attempted"):
    city: CityName
    controller: CityName
    dice: Dice
    stars: int
    needed: int
    freed: bool


class RevoltFought(_Event, frozen=True, kw_only=True, tag="realm.revolt_fought"):
    battle: Battle  # the vassal is the attacker


class CityRestarted(_Event, frozen=True, kw_only=True, tag="realm.city_restarted"):
    city: CityName
    stock: Stock
    population: int
    hit_points: int
    immune_until_season: int


# --- trade --------------------------------------------------------------------------------------


class MerchantSent(_Event, frozen=True, kw_only=True, tag="realm.merchant_sent"):
    trade_id: TradeId
    home: CityName
    host: CityName
    load: Stock
    home_after: Stock
    actions_spent: int = 1  # the whole turn: every action of the season (older logs: one)
    transfers: tuple[Transfer, ...] = ()  # the load, from the home city to the merchant
    host_after: Stock = {}
    load_after: Stock = {}


class MerchantIntercepted(_Event, frozen=True, kw_only=True, tag="realm.merchant_intercepted"):
    trade_id: TradeId
    home: CityName  # the merchant's home city
    at: CityName  # the city under attack the merchant was leaving or entering
    attacker: CityName
    army_dice: Dice
    merchant_dice: Dice
    army_score: int
    merchant_score: int
    escaped: bool
    seized: Stock  # moved to the attacker's city when he did not escape
    attacker_after: Stock
    host: CityOrNone = ""
    transfers: tuple[Transfer, ...] = ()  # the seized load, from the merchant to the attacker
    # both sides' holdings and the merchant's load right after this step (older logs: empty)
    home_after: Stock = {}
    host_after: Stock = {}
    load_after: Stock = {}


class _TradeStep(_Event, frozen=True, kw_only=True):
    """A step of the talks (offer, counter-offer, agreement, refusal): who spoke, the trade's parties, and
    both sides' holdings and the merchant's load right after it (older logs: the last four empty)."""

    trade_id: TradeId
    by: CityName
    home: CityName = ""  # the merchant's home city (the buyer)
    host: CityOrNone = ""  # the city he trades with
    home_after: Stock = {}
    host_after: Stock = {}
    load_after: Stock = {}


class TradeOffered(_TradeStep, frozen=True, kw_only=True, tag="realm.trade_offered"):
    buy: Resource
    pay: ResourceOrNone
    dice: int


class TradeCountered(_TradeStep, frozen=True, kw_only=True, tag="realm.trade_countered"):
    want: Resource


class TradeAgreed(_TradeStep, frozen=True, kw_only=True, tag="realm.trade_agreed"):
    pass


class TradeRolled(_Event, frozen=True, kw_only=True, tag="realm.trade_rolled"):
    """One round of a trade: both rolls, and either the transfers or the cancellation."""

    trade_id: TradeId
    round: int
    buyer: TradeSide  # the merchant's owner
    seller: TradeSide  # the host city
    cancelled: bool  # the merchant could not cover what the seller's dice demand
    transfers: tuple[Transfer, ...]
    shortfall: int  # what the host could not pay of the buyer's demand
    home_after: Stock
    host_after: Stock
    load_after: Stock


class TradeCancelled(_Event, frozen=True, kw_only=True, tag="realm.trade_cancelled"):
    trade_id: TradeId
    home: CityName
    host: CityName
    reason: Reason
    load_before: Stock
    lost: Stock
    load_after: Stock
    transfers: tuple[Transfer, ...] = ()  # the lost half, from the merchant to "lost"
    home_after: Stock = {}
    host_after: Stock = {}


class TradeDeclined(_TradeStep, frozen=True, kw_only=True, tag="realm.trade_declined"):
    pass


class MerchantReturned(_Event, frozen=True, kw_only=True, tag="realm.merchant_returned"):
    trade_id: TradeId
    home: CityName
    delivered: Stock
    home_after: Stock
    host: CityOrNone = ""
    transfers: tuple[Transfer, ...] = ()  # what he brings home, from the merchant to the home city
    host_after: Stock = {}
    load_after: Stock = {}


# --- the calendar -------------------------------------------------------------------------------


class TurnEnded(_Event, frozen=True, kw_only=True, tag="realm.turn_ended"):
    player: PlayerName


class VillageProduced(_Event, frozen=True, kw_only=True, tag="realm.village_produced"):
    city: CityName
    amounts: Stock


class SeasonEnded(_Event, frozen=True, kw_only=True, tag="realm.season_ended"):
    season_index: int  # the season that ended (0 = spring of year 1)
    season: Season
    year: int
    forced_by: PlayerOrNone  # "" when every player ended the turn
    at_ms: int  # server time; the next season starts now


EVENT_TYPES: tuple[type, ...] = (
    Mined,
    Smelted,
    FoodGot,
    HerbsFound,
    ArmyHealed,
    WoodCut,
    Fortified,
    ArmyRaised,
    ArmyEquipped,
    ArmyDismissed,
    Raided,
    Besieged,
    CityDestroyed,
    CitySurrendered,
    TaxSeasonChosen,
    TaxCollected,
    FreedomBought,
    SabotageAttempted,
    RevoltFought,
    CityRestarted,
    MerchantSent,
    MerchantIntercepted,
    TradeOffered,
    TradeCountered,
    TradeAgreed,
    TradeRolled,
    TradeCancelled,
    TradeDeclined,
    MerchantReturned,
    TurnEnded,
    VillageProduced,
    SeasonEnded,
)
