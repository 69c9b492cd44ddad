"""A trade's steps in realm@1's rules: which events they are, the cities on each side, the ledger rows each adds.

Rules, not audit: the fold records a step's ledger rows in the state (rules.record_ledger), and a step is hidden
from the cities not in it by its sides (hidden.parties). audit.py retells and checks trades from these; it is left
out of the fingerprint, so what the state depends on lives here, inside it (events/fingerprint.py).
"""

from __future__ import annotations

from typing import Any

from almanac.games.realm.v1 import events as realm_events
from almanac.games.realm.v1.state import LedgerEntry

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


def home_of(event: Any) -> str:
    """The merchant's home city in a trade step (older logs name it only where the step had a field for it)."""
    if isinstance(event, realm_events.TradeRolled):
        return event.buyer.city
    home: str = getattr(event, "home", "")
    return home or (event.by if isinstance(event, realm_events.TradeOffered) else "")


def host_of(event: Any) -> str:
    """The city the merchant trades with in a trade step."""
    if isinstance(event, realm_events.TradeRolled):
        return event.seller.city
    host: str = getattr(event, "host", "")
    return host or (event.by if isinstance(event, realm_events.TradeCountered) else "")


def ledger_entries(event: Any, last_round: int, home: str, host: str) -> tuple[LedgerEntry, ...]:
    """The ledger rows of one trade event: a round's transfers, a cancelled merchant's loss, a seized load.

    ``last_round`` is the trade's last round so far (a roll carries its own). The state's ledger and
    `audit.ledger` both come from here, so they agree."""
    cart = f"merchant:{event.trade_id}"
    round_number = last_round
    if isinstance(event, realm_events.TradeRolled):
        round_number = event.round
        moves = [(t.source or "phantom", t.target, t.resource, t.amount, t.phantom) for t in event.transfers]
    elif isinstance(event, realm_events.TradeCancelled):
        moves = [(cart, "lost", name, amount, False) for name, amount in event.lost.items()]
    elif isinstance(event, realm_events.MerchantIntercepted) and not event.escaped:
        moves = [(cart, event.attacker, name, amount, False) for name, amount in event.seized.items()]
    else:
        return ()
    return tuple(
        LedgerEntry(
            trade_id=event.trade_id,
            round=round_number,
            source=source,
            target=target,
            resource=resource,
            amount=amount,
            phantom=phantom,
            home=home,
            host=host,
        )
        for source, target, resource, amount, phantom in moves
    )
