"""The realm rule-set's manifest: its Decider, the random-legal policy, the trade ledger and the trade audit."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from almanac.events.manifest import (
    AuditView,
    BenchScenario,
    Dice,
    Envelope,
    PlayerName,
    ReadModel,
    RoomId,
    RuleSet,
    event_tag,
    free,
    one_of,
    to_builtins,
)
from almanac.games.realm.v1 import audit, data, events as realm_events, seats
from almanac.games.realm.v1.data import CityName, Resource, TradeId
from almanac.games.realm.v1.game import DECIDER
from almanac.games.realm.v1.policy import choose_command
from almanac.games.realm.v1.state import (
    Army,
    CityOrNone,
    Equipment,
    LedgerEntry,
    Merchant,
    Owner,
    RealmOptions,
    RealmSetup,
    TradeOrNone,
    full_stock,
)

BENCH_PLAYERS = ("alice", "bob", "carol")


def policy(state: object, player: str, dice: Dice, now_ms: int) -> object:
    return choose_command(state, player, dice)  # type: ignore[arg-type]


def ledger_rows(envelope: Envelope, event: Any) -> list[dict[str, Any]]:
    """Trade ledger rows: one per event that carries a trade id, with everything that event records."""
    trade_id = getattr(event, "trade_id", None)
    if trade_id is None:
        return []
    tag_field = event.__struct_config__.tag_field
    detail = {k: v for k, v in to_builtins(event).items() if k != tag_field}
    return [
        {
            "room": envelope.room,
            "version": envelope.version,
            "trade": trade_id,
            "type": envelope.type,
            "player": envelope.player,
            "time_ms": envelope.server_time_ms,
            "summary": DECIDER.summary(event),
            # Dice, stars, phantom goods, transfers, holdings after: whatever the step's event names.
            "detail": detail,
        }
    ]


def shown_view(view: dict[str, Any]) -> dict[str, Any]:
    """The realm's view as the API shows it (``RuleSet.present_view``): its "" for nothing as null, so a client
    reads absence one way: nobody's view (the public's), a village's owner, no controller, no merchant away, terms
    not named, a ledger row's party not recorded. The rules' own view (game.RealmDecider.view) keeps its ""."""

    def nothing(record: dict[str, Any], *fields: str) -> dict[str, Any]:
        return {**record, **{name: None for name in fields if record.get(name) == ""}}

    return {**nothing(view, "player"),
            "cities": {name: nothing(city, "owner", "controller", "merchant") for name, city in view["cities"].items()},
            "merchants": [nothing(merchant, "buy", "want") for merchant in view["merchants"]],
            "ledger": [nothing(row, "home", "host") for row in view["ledger"]]}


def notices(event: Any) -> list[tuple[str, str | None]]:
    """Webhook notices: a new season is every city's turn; an offer is news to the city it is made to."""
    if isinstance(event, realm_events.SeasonEnded):
        return [("your_turn", None)]
    if isinstance(event, realm_events.TradeOffered) and audit.host_of(event):
        return [("trade_offered", audit.host_of(event))]
    return []


Season = Annotated[str, one_of(data.SEASONS)]
Summary = Annotated[str, free("the step in a sentence a person reads")]


class _View(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class ArmyView(_View):
    soldiers: int
    equipment: Equipment
    damage: int | None = None  # own (and taxed) cities only


class CityView(_View):
    """A city as the player sees it: their own (and the cities they tax) in full, the others without storage."""

    name: CityName
    owner: PlayerName | None  # None: an NPC village
    population: int
    hit_points: int
    army: ArmyView | None
    destroyed: bool
    controller: CityName | None
    immune_until_season: int
    merchant_away: bool
    stock: dict[Resource, int] | None = None  # the rest: own and taxed cities only
    saved_stars: int | None = None
    saved_wards: int | None = None
    tax_year: int | None = None
    tax_season: Season | None = None
    merchant: TradeId | None = None  # None: at home, or not shown


class MerchantView(_View):
    """A merchant on the road: in full to the trade's parties, only who went where to the others."""

    trade_id: TradeId
    home: CityName
    host: CityName
    load: dict[Resource, int] | None = None
    buy: Resource | None = None  # None: not named (yet), or not shown
    want: Resource | None = None
    dice: int | None = None
    agreed: list[CityName] | None = None
    rounds: int | None = None


# A row of the trade ledger as shown: the state's entry, held to the views' strictness (no docstring: it would
# become the schema's description and change the published OpenAPI).
class LedgerRow(LedgerEntry, forbid_unknown_fields=True):
    home: CityName | None = None
    host: CityName | None = None


class RealmView(_View):
    """What a player sees of the realm (game.RealmDecider.view)."""

    player: PlayerName | None  # None: the public's view, nobody's seat
    season: Season
    year: int
    season_index: int
    season_started_ms: int
    season_timeout_ms: int
    actions_left: int
    turn_ended: list[PlayerName]
    cities: dict[CityName, CityView]
    merchants: list[MerchantView]
    ledger: list[LedgerRow]
    scores: dict[PlayerName, int]
    own_score: int | None
    over: bool


class CityHoldings(_View):
    """A city in full, as the auditors' resources show it (game.city_full): the public part and its storage."""

    name: CityName
    owner: Owner
    population: int
    hit_points: int
    army: Army | None
    destroyed: bool
    controller: CityOrNone
    immune_until_season: int
    merchant_away: bool
    stock: dict[Resource, int]
    saved_stars: int
    saved_wards: int
    tax_year: int
    tax_season: Season | None
    merchant: TradeOrNone


class RealmResources(_View):
    """Every city's holdings, the merchants on the road and the trade ledger (game.RealmDecider.resources)."""

    season: Season
    year: int
    cities: dict[CityName, CityHoldings]
    merchants: list[Merchant]
    ledger: list[LedgerEntry]


def _ledger_row_type(event_type: type) -> type:
    """A row ``ledger_rows`` makes of one trade event: where and when, and the event's own fields as ``detail``
    (without its tag, which the row's ``type`` carries). Declared for the API documents (the read model's
    ``row_type``)."""
    fields = [(f.name, f.type) if f.required else (f.name, f.type, msgspec.field(default=f.default)
                                                    if f.default_factory is msgspec.NODEFAULT
                                                    else msgspec.field(default_factory=f.default_factory))
              for f in msgspec.structs.fields(event_type)]
    detail = msgspec.defstruct(f"{event_type.__name__}Detail", fields, module=__name__, kw_only=True, frozen=True,
                               forbid_unknown_fields=True)
    return msgspec.defstruct(f"{event_type.__name__}Row",
                             [("room", RoomId), ("version", int), ("trade", TradeId), ("player", PlayerName),
                              ("time_ms", int), ("summary", Summary), ("detail", detail)],
                             module=__name__, kw_only=True, frozen=True, forbid_unknown_fields=True,
                             tag_field="type", tag=event_tag(event_type))


# Every event of the realm that carries a trade id makes a ledger row (ledger_rows).
TRADE_ROW_TYPES = tuple(_ledger_row_type(event_type) for event_type in DECIDER.event_types
                        if "trade_id" in event_type.__struct_fields__)


def _step_type(event_type: type) -> type:
    """What ``audit.trade_steps`` makes of one trade event: its fields (and ``type`` tag), its step number, sentence
    and version. Declared for the API documents (the audit view's ``step_types``); here, not in audit.py, which is
    rules (the fingerprint covers it) while this only describes its answer."""
    return msgspec.defstruct(f"{event_type.__name__}Step", [("step", int), ("text", Summary), ("version", int)],
                             bases=(event_type,), module=__name__, kw_only=True, frozen=True,
                             tag=event_tag(event_type))


TRADE_STEP_TYPES = tuple(_step_type(event_type) for event_type in audit.TRADE_EVENTS)


def ranks(setup: RealmSetup) -> bool:
    """A realm ranks when its cities start as the seed's (the default stock), with the default village count,
    actions per season and years; who plays and how long a season may wait do not change the game."""
    return (setup.starting_stock == full_stock(data.STARTING_STOCK) and len(setup.villages) == RealmOptions().villages
            and setup.actions_per_season == data.ACTIONS_PER_SEASON and setup.years == data.YEARS)


MANIFEST = RuleSet(
    decider=DECIDER,
    # The version a bare name means: it plays seed 003 as written (a skull in mining finds only stone,
    # at -50%); realm@2 is opt-in by its full name (docs/design-rulings.md).
    default=True,
    policy=policy,
    # What the room decides with besides the Decider: rules, in seats.py, which the fingerprint covers.
    seat_bot=seats.seat_bot,
    deadlines=seats.deadlines,
    bench=BenchScenario(
        description="three players, two villages, three years of random legal play",
        options={"players": list(BENCH_PLAYERS), "villages": 2, "years": 3},
        players=BENCH_PLAYERS,
        seconds=5,
    ),
    read_models=(
        ReadModel(
            name="trades",
            description="the trade ledger: one row per trade step (dice, stars, transfers, holdings after)",
            event_rows=ledger_rows,
            order_by=("room", "version"),
            filters=("trade",),
            columns=("room", "version", "trade", "type", "player", "summary"),
            # Each step's detail names both cities' holdings: secrets. Players see their trades in their view.
            auditors_only=True,
            row_type=TRADE_ROW_TYPES,
        ),
    ),
    audit_views=(
        AuditView(
            name="trade",
            description="every step of one trade: dice, stars, phantom amounts, transfers, holdings",
            steps=audit.trade_steps,
            ids=audit.trade_ids_of,
            step_types=TRADE_STEP_TYPES,
        ),
    ),
    # One picture draws every version: the cities and holdings are the same shape in both.
    console_picture="almanac.games.realm:picture.js",
    rulebook="games/realm/RULES.md",
    examples=("examples/realm.jsonl",),
    view_type=RealmView,
    present_view=shown_view,
    ranks=ranks,
    resources_type=RealmResources,
    notices=notices,
    # What the rules accept where a command names a word of the realm (rules.need_choice): enums in the API.
    allowed_values={
        "mine.ore": data.ORES,
        "mine.moons": data.MINING_MOON_USES,
        "mine.lesser_ore": ("best", "none", *data.ORES[:-1]),  # a lesser ore is below the one sought: never gold
        "smelt.ore": tuple(data.SMELTED),
        "get_food.method": data.FOOD_METHODS,
        "get_food.moon": data.FOOD_MOON_USES,
        "equip_army.tier": tuple(data.EQUIPMENT_METAL),
        "raid.resource": data.RESOURCES,
        "besiege.if_taken": data.SIEGE_ENDS,
        "choose_tax_season.season": data.SEASONS,
        "send_merchant.load": data.RESOURCES,
        "offer_trade.buy": data.RESOURCES,
        "offer_trade.pay": ("", *data.RESOURCES),  # "": nothing named (the host says what it wants)
        "counter_offer.want": data.RESOURCES,
    },
    demo_moves=40,
)
