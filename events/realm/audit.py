"""Pure audit helpers: a trade's whole story and the ledger of every trade, from a room's decoded events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from events.decider import event_tag
from events.realm import events as realm_events

TRADE_EVENTS = (
    realm_events.MerchantSent,
    realm_events.MerchantIntercepted,
    realm_events.TradeOffered,
    realm_events.TradeCountered,
    realm_events.TradeAgreed,
    realm_events.TradeRolled,
    realm_events.TradeCancelled,
    realm_events.TradeDeclined,
    realm_events.MerchantReturned,
)


def trade_story(events: Iterable[Any], trade_id: str) -> list[dict[str, Any]]:
    """Every step of one trade in order, each as builtins with its ``type`` tag and a ``step`` number.

    ``events`` are the room's decoded events in version order (other events are skipped).
    """
    story = []
    for event in events:
        if isinstance(event, TRADE_EVENTS) and event.trade_id == trade_id:
            step = msgspec.to_builtins(event)
            step["type"] = event_tag(event)
            step["step"] = len(story) + 1
            step["text"] = describe(event)
            story.append(step)
    return story


def trade_ids(events: Iterable[Any]) -> list[str]:
    """The trades of a room, in the order their merchants set out."""
    return [event.trade_id for event in events if isinstance(event, realm_events.MerchantSent)]


def ledger(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Every movement of goods by trade: transfers of each round, losses of cancelled merchants, seizures."""
    rows: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, realm_events.TradeRolled):
            for transfer in event.transfers:
                rows.append(
                    {
                        "trade_id": event.trade_id,
                        "round": event.round,
                        "source": transfer.source or "phantom",
                        "target": transfer.target,
                        "resource": transfer.resource,
                        "amount": transfer.amount,
                        "phantom": transfer.phantom,
                    }
                )
        elif isinstance(event, realm_events.TradeCancelled):
            for resource, amount in event.lost.items():
                rows.append(_row(event.trade_id, f"merchant:{event.trade_id}", "lost", resource, amount))
        elif isinstance(event, realm_events.MerchantIntercepted) and not event.escaped:
            for resource, amount in event.seized.items():
                rows.append(
                    _row(event.trade_id, f"merchant:{event.trade_id}", event.attacker, resource, amount)
                )
    return rows


def _row(trade_id: str, source: str, target: str, resource: str, amount: int) -> dict[str, Any]:
    return {
        "trade_id": trade_id,
        "round": 0,
        "source": source,
        "target": target,
        "resource": resource,
        "amount": amount,
        "phantom": False,
    }


def _goods(stock: dict[str, int]) -> str:
    parts = [f"{amount} {name}" for name, amount in stock.items() if amount]
    return ", ".join(parts) or "nothing"


def _side(side: realm_events.TradeSide) -> str:
    return (
        f"{side.city} rolled {' '.join(side.dice)}: {side.stars} stars, {side.skulls} skulls -> counts "
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
        return f"trade cancelled ({event.reason}); the merchant loses {_goods(event.lost)}"
    if isinstance(event, realm_events.TradeDeclined):
        return f"{event.by} declines to trade further"
    if isinstance(event, realm_events.MerchantReturned):
        return f"the merchant is home in {event.home} with {_goods(event.delivered)}"
    return type(event).__name__
