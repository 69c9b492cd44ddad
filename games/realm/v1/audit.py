"""Pure audit helpers, from a room's decoded events alone: a trade's whole story (as steps or as text), the
ledger of every trade, the holdings rebuilt from the transfers, and a check that re-derives every step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from almanac.events.manifest import Envelope, event_tag
from almanac.games.realm.v1 import data, events as realm_events
from almanac.games.realm.v1.trades import TRADE_EVENTS, home_of, host_of, ledger_entries

Holdings = dict[str, dict[str, int]]


def steps_of(events: Iterable[Any], trade_id: str) -> list[tuple[int, Any]]:
    """The trade's steps with their positions in the log."""
    return [
        (index, event)
        for index, event in enumerate(events)
        if isinstance(event, TRADE_EVENTS) and event.trade_id == trade_id
    ]


def trade_story(events: Iterable[Any], trade_id: str) -> list[dict[str, Any]]:
    """Every step of one trade in order, each as builtins with its ``type`` tag, a ``step`` number and a
    sentence (``text``); the fields carry the dice, the stars counted, phantom goods, the transfers and
    both sides' holdings after the step.

    ``events`` are the room's decoded events in version order (other events are skipped).
    """
    story = []
    for number, (_, event) in enumerate(steps_of(events, trade_id), start=1):
        step = msgspec.to_builtins(event)
        step["type"] = event_tag(event)
        step["step"] = number
        step["text"] = describe(event)
        story.append(step)
    return story


def story_text(events: Iterable[Any], trade_id: str) -> str:
    """A trade's whole story as text: one line a step, each followed by the holdings after it."""
    lines = [f"trade {trade_id}"]
    for number, (_, event) in enumerate(steps_of(events, trade_id), start=1):
        lines.append(f"{number:>3}. {describe(event)}")
        holdings = [f"{name}: {_goods(stock)}" for name, stock in _recorded(event).items() if stock]
        if holdings:
            lines.append("     after: " + "; ".join(holdings))
    return "\n".join(lines)


def trade_ids(events: Iterable[Any]) -> list[str]:
    """The trades of a room, in the order their merchants set out."""
    return [event.trade_id for event in events if isinstance(event, realm_events.MerchantSent)]


def ledger(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Every movement of goods by trade: transfers of each round, losses of cancelled merchants, seizures."""
    rows: list[dict[str, Any]] = []
    rounds: dict[str, int] = {}
    sides: dict[str, tuple[str, str]] = {}
    for event in events:
        if not isinstance(event, TRADE_EVENTS):
            continue
        if isinstance(event, realm_events.MerchantSent):
            sides[event.trade_id] = (event.home, event.host)
        home, host = sides.get(event.trade_id, (home_of(event), host_of(event)))
        entries = ledger_entries(event, rounds.get(event.trade_id, 0), home, host)
        rows += [msgspec.to_builtins(entry) for entry in entries]
        if isinstance(event, realm_events.TradeRolled):
            rounds[event.trade_id] = event.round
    return rows


def _recorded(event: Any) -> Holdings:
    return {
        home_of(event): dict(event.home_after),
        host_of(event): dict(event.host_after),
        f"merchant:{event.trade_id}": dict(event.load_after),
    }


def replay_holdings(events: Iterable[Any], trade_id: str) -> list[Holdings]:
    """Per step, the holdings of home, host and merchant rebuilt from the previous step's recorded holdings
    plus this step's transfers (the first step's as recorded). They must equal the recorded ones for the
    merchant always, and for the cities wherever no other event came between the two steps."""
    rebuilt: list[Holdings] = []
    before: Holdings = {}
    for _, event in steps_of(events, trade_id):
        after = {name: dict(stock) for name, stock in (before or _recorded(event)).items()}
        if before:
            for transfer in getattr(event, "transfers", ()):
                if transfer.source in after:
                    after[transfer.source][transfer.resource] -= transfer.amount
                if transfer.target in after:
                    after[transfer.target][transfer.resource] += transfer.amount
        rebuilt.append(after)
        before = _recorded(event)
    return rebuilt


def _faces(dice: tuple[str, ...] | list[str]) -> tuple[int, int, int]:
    return (list(dice).count(data.STAR), list(dice).count(data.SKULL), list(dice).count(data.MOON))


def _check_roll(where: str, event: realm_events.TradeRolled, load: dict[str, int]) -> list[str]:
    problems = []
    for label, side in (("buyer", event.buyer), ("seller", event.seller)):
        stars, skulls, moons = _faces(side.dice)
        counted = max(1, stars >> skulls)
        if (side.stars, side.skulls, side.moons) != (stars, skulls, moons):
            problems.append(f"{where}: the {label}'s faces do not match its dice {list(side.dice)}")
        expected = (counted, counted * data.TRADE_UNIT, moons * data.TRADE_UNIT)
        if (side.counted, side.demanded, side.phantom) != expected:
            problems.append(
                f"{where}: the {label} counts {side.counted} (takes {side.demanded}, phantom {side.phantom}); "
                f"its dice give {expected[0]} (takes {expected[1]}, phantom {expected[2]})"
            )
    if load and event.cancelled != (load.get(event.seller.resource, 0) < event.seller.demanded):
        problems.append(f"{where}: cancelled is {event.cancelled} while the merchant carried {load}")
    if not event.cancelled:
        paid = {(t.source, t.resource): t.amount for t in event.transfers if not t.phantom}
        if paid.get((f"merchant:{event.trade_id}", event.seller.resource)) != event.seller.demanded:
            problems.append(f"{where}: the merchant did not pay the host's demand")
        if paid.get((event.seller.city, event.buyer.resource), 0) + event.shortfall != event.buyer.demanded:
            problems.append(f"{where}: the host's payment and the shortfall do not make the buyer's demand")
    return problems


def _check_escape(where: str, event: realm_events.MerchantIntercepted) -> list[str]:
    stars, _, moons = _faces(event.merchant_dice)
    army_stars, _, army_moons = _faces(event.army_dice)
    if len(event.merchant_dice) != data.MERCHANT_ESCAPE_DICE or event.merchant_score != stars + moons:
        return [f"{where}: the merchant's escape roll is not five dice scored as recorded"]
    if event.army_score != army_stars + army_moons or event.escaped != (
        event.merchant_score > event.army_score
    ):
        return [f"{where}: the escape does not follow from the scores"]
    return []


def check_trade(events: Iterable[Any], trade_id: str) -> list[str]:
    """Re-derive every step of a trade from its dice and recorded holdings; returns the disagreements.

    Each side's faces, count (stars halved per skull, at least one), demand (x 1,000) and phantom goods
    (moons x 1,000); a round cancels exactly when the merchant carries less than the host's demand; the
    transfers pay the demands; the escape roll is five dice and escapes only when higher; the merchant's
    load (which only trade steps change) follows the transfers from step to step, and so do both cities'
    holdings between steps with nothing else between them in the log."""
    events = list(events)
    problems: list[str] = []
    cart = f"merchant:{trade_id}"
    previous_index, load = -2, {}
    steps = steps_of(events, trade_id)
    for number, ((index, event), expected) in enumerate(
        zip(steps, replay_holdings(events, trade_id), strict=True), 1
    ):
        where = f"step {number} ({event_tag(event)})"
        if isinstance(event, realm_events.TradeRolled):
            problems += _check_roll(where, event, load)
        if isinstance(event, realm_events.MerchantIntercepted):
            problems += _check_escape(where, event)
        recorded = _recorded(event)
        if number > 1 and expected[cart] != recorded[cart]:
            problems.append(f"{where}: the merchant's load is not the last load plus the transfers")
        if number > 1 and index == previous_index + 1:
            for name in (home_of(event), host_of(event)):
                if expected.get(name) != recorded[name]:
                    problems.append(f"{where}: {name}'s holdings are not the last step's plus the transfers")
        previous_index, load = index, recorded[cart]
    return problems


def _goods(stock: dict[str, int]) -> str:
    parts = [f"{amount} {name}" for name, amount in stock.items() if amount]
    return ", ".join(parts) or "nothing"


def _side(side: realm_events.TradeSide) -> str:
    return (
        f"{side.city} rolled {' '.join(side.dice)}: {side.stars} stars, {side.skulls} skulls, {side.moons} moons "
        f"-> counts "
        f"{side.counted}, takes {side.demanded} {side.resource}"
        + (f" plus {side.phantom} phantom" if side.phantom else "")
    )


def describe(event: Any) -> str:
    """One sentence for a step of a trade."""
    if isinstance(event, realm_events.MerchantSent):
        return f"{event.home} sent a merchant to {event.host} carrying {_goods(event.load)}"
    if isinstance(event, realm_events.MerchantIntercepted):
        verdict = (
            "escaped" if event.escaped else f"was caught; {event.attacker} seized {_goods(event.seized)}"
        )
        return (
            f"at {event.at}, {event.attacker}'s army scored {event.army_score}, the merchant {event.merchant_score}: "
            f"he {verdict}"
        )
    if isinstance(event, realm_events.TradeOffered):
        pay = f", paying in {event.pay}" if event.pay else ""
        return f"{event.by} offers to buy {event.buy}{pay}, {event.dice} dice each"
    if isinstance(event, realm_events.TradeCountered):
        return f"{event.by} wants {event.want} in return"
    if isinstance(event, realm_events.TradeAgreed):
        return f"{event.by} agrees"
    if isinstance(event, realm_events.TradeRolled):
        head = f"round {event.round}: {_side(event.buyer)}; {_side(event.seller)}"
        if event.cancelled:
            return f"{head}; the merchant cannot cover it"
        moves = "; ".join(
            f"{move.amount} {move.resource} {'(phantom) ' if move.phantom else ''}from {move.source or 'nowhere'} "
            f"to {move.target}"
            for move in event.transfers
        )
        return f"{head}; moved: {moves}"
    if isinstance(event, realm_events.TradeCancelled):
        return f"trade cancelled ({event.reason}); the merchant heads home and {_goods(event.lost)} are lost"
    if isinstance(event, realm_events.TradeDeclined):
        return f"{event.by} declines to trade further"
    if isinstance(event, realm_events.MerchantReturned):
        return f"the merchant is home in {event.home} with {_goods(event.delivered)}"
    return type(event).__name__


# --- the trade audit view the manifest offers ---------------------------------------------------------


def trade_steps(pairs: list[tuple[Envelope, Any]], trade_id: str) -> list[dict[str, Any]]:
    """The trade audit view: ``trade_story`` with each step's version."""
    events = [event for _, event in pairs]
    positions = [index for index, _ in steps_of(events, trade_id)]
    story = trade_story(events, trade_id)
    return [{**step, "version": pairs[index][0].version} for index, step in zip(positions, story, strict=True)]


def trade_ids_of(pairs: list[tuple[Envelope, Any]]) -> list[str]:
    return trade_ids(event for _, event in pairs)
