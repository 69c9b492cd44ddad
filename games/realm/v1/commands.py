"""The realm's commands: what a player may ask for; choices made after the dice are declared here up front."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Amount, Key, Name, OptionalKey, free
from almanac.games.realm.v1.data import TRADE_MAX_DICE

# Names no list bounds, said so for the API documents (events.schema: schema-only, decoding unchanged).
City = Annotated[Name, free("a city's name: its player's, or a village's")]
TradeId = Annotated[Key, free("a trade's id (a merchant's, as realm.merchant_sent named it)")]

Load = Annotated[dict[Key, Amount], msgspec.Meta(max_length=32)]
TradeDice = Annotated[int, msgspec.Meta(ge=1, le=TRADE_MAX_DICE, description="1 .. 3")]


class _Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", forbid_unknown_fields=True):
    pass


# --- production actions (each spends one of the season's actions) ------------------------------


class Mine(_Command, frozen=True, kw_only=True, tag="mine"):
    """Search for an ore, declared before the roll.

    ``moons``: ``"count"`` counts each moon as two stars, ``"save"`` as one star plus one saved star.
    ``use_saved``: saved stars added to this try (spent whatever the dice show).
    ``lesser_ore``: below the minimum, ``"best"`` takes the most valuable lesser ore the stars reach
    (at -75%), ``"none"`` takes none, or an ore name takes exactly that one.
    """

    ore: Key
    moons: Key = "count"
    use_saved: Amount = 0
    lesser_ore: Key = "best"


class Smelt(_Command, frozen=True, kw_only=True, tag="smelt"):
    """Smelt ``amount`` of an ore (stone, bronze, iron, steel) into its smelted form."""

    ore: Key
    amount: Amount


class GetFood(_Command, frozen=True, kw_only=True, tag="get_food"):
    """Hunt, gather, fish or farm. ``moon``: ``"double"`` doubles this roll, ``"save"`` keeps a ward for a skull."""

    method: Key
    moon: Key = "double"


class FindHerbs(_Command, frozen=True, kw_only=True, tag="find_herbs"):
    """Roll for herbs: 1,000 per three stars, at the season's rate."""


class HealArmy(_Command, frozen=True, kw_only=True, tag="heal_army"):
    """Cure ``points`` of damage to the army with 1,000 herbs each."""

    points: Amount


class CutWood(_Command, frozen=True, kw_only=True, tag="cut_wood"):
    """Cut wood: 1,000 per star, x1.5 in fall."""


class Fortify(_Command, frozen=True, kw_only=True, tag="fortify"):
    """Spend wood (2,000 per hit point) and stone (1,500 per two hit points) on the city's walls."""

    wood: Amount = 0
    stone: Amount = 0


class RaiseArmy(_Command, frozen=True, kw_only=True, tag="raise_army"):
    """Draft ``soldiers`` (in hundreds) from the population into the army; the army must reach 1,000."""

    soldiers: Amount


class EquipArmy(_Command, frozen=True, kw_only=True, tag="equip_army"):
    """Arm the whole army in bronze, iron or steel: one smelted metal per soldier."""

    tier: Key


class DismissArmy(_Command, frozen=True, kw_only=True, tag="dismiss_army"):
    """Send the whole army home into the population (its equipment is lost)."""


# --- war ----------------------------------------------------------------------------------------


class Raid(_Command, frozen=True, kw_only=True, tag="raid"):
    """Raid ``target`` for one resource; cannot be changed once declared."""

    target: City
    resource: Key


class Besiege(_Command, frozen=True, kw_only=True, tag="besiege"):
    """Attack ``target``'s walls; if they fall, ``if_taken`` says what happens: ``"destroy"`` or ``"tax"``."""

    target: City
    if_taken: Key = "tax"


class ChooseTaxSeason(_Command, frozen=True, kw_only=True, tag="choose_tax_season"):
    """The controller states which season of this year ``city`` pays its tax (costs no action)."""

    city: City
    season: Key


class BuyFreedom(_Command, frozen=True, kw_only=True, tag="buy_freedom"):
    """A controlled city pays 5,000 gold to its controller and is free."""


class Sabotage(_Command, frozen=True, kw_only=True, tag="sabotage"):
    """A controlled city rolls three dice; two stars free it."""


class Revolt(_Command, frozen=True, kw_only=True, tag="revolt"):
    """A controlled city's army fights the controller's army; a win frees it."""


class RestartCity(_Command, frozen=True, kw_only=True, tag="restart_city"):
    """A destroyed city starts again with a share of the other players' resources and a year's immunity."""


# --- trade (only send_merchant spends an action) ------------------------------------------------


class SendMerchant(_Command, frozen=True, kw_only=True, tag="send_merchant"):
    """Send a merchant to ``to`` carrying ``load`` (resource -> amount) from the city's storage."""

    to: City
    load: Load


class OfferTrade(_Command, frozen=True, kw_only=True, tag="offer_trade"):
    """The merchant's owner states what to buy, optionally what to pay with, and how many dice each side rolls."""

    trade_id: TradeId
    buy: Key
    pay: OptionalKey = ""
    dice: TradeDice = 1


class CounterOffer(_Command, frozen=True, kw_only=True, tag="counter_offer"):
    """The host city states what it wants from the merchant's load in return."""

    trade_id: TradeId
    want: Key


class AgreeTrade(_Command, frozen=True, kw_only=True, tag="agree_trade"):
    """Agree to the terms on the table; once both sides agree, the dice are rolled and there is no way back."""

    trade_id: TradeId


class DeclineTrade(_Command, frozen=True, kw_only=True, tag="decline_trade"):
    """Stop trading; the merchant heads home with what he carries."""

    trade_id: TradeId


# --- the calendar -------------------------------------------------------------------------------


class EndTurn(_Command, frozen=True, kw_only=True, tag="end_turn"):
    """End this season's turn; the season ends when every player has ended theirs."""


class EndSeason(_Command, frozen=True, kw_only=True, tag="end_season"):
    """Force the season to end once its timeout (server time) has passed."""


COMMAND_TYPES: tuple[type, ...] = (
    Mine,
    Smelt,
    GetFood,
    FindHerbs,
    HealArmy,
    CutWood,
    Fortify,
    RaiseArmy,
    EquipArmy,
    DismissArmy,
    Raid,
    Besiege,
    ChooseTaxSeason,
    BuyFreedom,
    Sabotage,
    Revolt,
    RestartCity,
    SendMerchant,
    OfferTrade,
    CounterOffer,
    AgreeTrade,
    DeclineTrade,
    EndTurn,
    EndSeason,
)
