"""realm@1's events in one line each, as the log, the console and the audits show them."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import event_tag
from almanac.games.realm.v1 import events as realm_events


def faces_text(faces: tuple[str, ...]) -> str:
    return " ".join(faces) if faces else "hidden dice"


def summarize(event: Any) -> str:
    """One line per event, for logs, audits and the CLI."""
    if isinstance(event, realm_events.Mined):
        found = f"{event.amount} {event.found}" if event.found else "nothing"
        return f"{event.city} mined for {event.ore}: {faces_text(event.dice)} -> {event.stars} stars, {event.outcome}, {found}"
    if isinstance(event, realm_events.Smelted):
        verdict = "smelted" if event.success else "failed to smelt"
        return f"{event.city} {verdict} {event.amount} {event.ore} ({event.stars}/{event.needed} stars)"
    if isinstance(event, realm_events.FoodGot):
        return f"{event.city} {event.method} in {event.season}: {faces_text(event.dice)} x{event.multiplier} -> {event.amount} food"
    if isinstance(event, realm_events.HerbsFound | realm_events.WoodCut):
        what = "herbs" if isinstance(event, realm_events.HerbsFound) else "wood"
        return (
            f"{event.city} found {event.amount} {what} in {event.season} ({event.stars} stars x{event.rate})"
        )
    if isinstance(event, realm_events.Raided | realm_events.Besieged | realm_events.RevoltFought):
        battle = event.battle
        verb = {
            realm_events.Raided: "raided",
            realm_events.Besieged: "besieged",
            realm_events.RevoltFought: "revolted against",
        }[type(event)]
        outcome = (
            "won"
            if battle.attacker_won
            else f"failed, lost {battle.troops_lost} soldiers"
            + (" and disbanded" if battle.disbanded else "")
        )
        extra = ""
        if isinstance(event, realm_events.Raided) and battle.attacker_won:
            extra = f", took {event.taken} {event.resource}"
        if isinstance(event, realm_events.Besieged) and battle.attacker_won:
            extra = f", walls {event.hit_points_after} hp"
        return f"{battle.attacker} {verb} {battle.defender}: {battle.attack_score} vs {battle.defence_score}, {outcome}{extra}"
    if isinstance(event, realm_events.TradeRolled):
        if event.cancelled:
            return f"{event.trade_id} round {event.round}: the merchant cannot pay {event.seller.demanded} {event.seller.resource}"
        moves = "; ".join(
            f"{move.amount} {move.resource} {move.source or 'phantom'} -> {move.target}"
            for move in event.transfers
        )
        return f"{event.trade_id} round {event.round}: {moves}"
    if isinstance(event, realm_events.SeasonEnded):
        forced = f" (forced by {event.forced_by})" if event.forced_by else ""
        return f"{event.season} of year {event.year} ended{forced}"
    if isinstance(event, realm_events.TurnEnded):
        return f"{event.player} ended the turn"
    line = _summarize_more(event)
    return line if line is not None else f"{event_tag(event)} in {getattr(event, 'city', 'the realm')}"


def stock_text(stock: dict[str, int]) -> str:
    """``{"gold": 2000, "iron": 1000}`` as ``2000 gold, 1000 iron`` (``nothing`` when empty)."""
    parts = [f"{amount} {resource}" for resource, amount in stock.items() if amount]
    return ", ".join(parts) if parts else "nothing"


def _summarize_more(event: Any) -> str | None:
    """The armies, vassals, merchants and villages: one line each."""
    e = realm_events
    if isinstance(event, e.ArmyHealed):
        return f"{event.city} healed {event.points} damage with {event.herbs} herbs; damage now {event.damage_after}"
    if isinstance(event, e.Fortified):
        return (
            f"{event.city} fortified with {event.wood} wood and {event.stone} stone: "
            f"+{event.hit_points_gained} hp, walls {event.hit_points_after} hp"
        )
    if isinstance(event, e.ArmyRaised):
        return f"{event.city} raised {event.soldiers} soldiers; army {event.army_after}"
    if isinstance(event, e.ArmyEquipped):
        return f"{event.city} equipped its army with {event.tier} ({event.metal}) for {event.cost}"
    if isinstance(event, e.ArmyDismissed):
        return f"{event.city} dismissed {event.soldiers} soldiers"
    if isinstance(event, e.CityDestroyed):
        freed = f"; freed {', '.join(event.freed)}" if event.freed else ""
        return f"{event.by} destroyed {event.city}: carried off {stock_text(event.plunder)}, lost {stock_text(event.lost)}{freed}"
    if isinstance(event, e.CitySurrendered):
        return f"{event.city} surrendered to {event.to} with {event.hit_points_after} hp left"
    if isinstance(event, e.TaxSeasonChosen):
        return f"{event.controller} will tax {event.city} in {event.season} of year {event.year}"
    if isinstance(event, e.TaxCollected):
        return f"{event.to} collected tax from {event.city} in {event.season}: {stock_text(event.amounts)}"
    if isinstance(event, e.FreedomBought):
        return f"{event.city} bought its freedom from {event.controller} for {event.gold} gold"
    if isinstance(event, e.SabotageAttempted):
        verdict = "and is free" if event.freed else "and failed"
        return (
            f"{event.city} sabotaged {event.controller}: {faces_text(event.dice)} -> "
            f"{event.stars}/{event.needed} stars, {verdict}"
        )
    if isinstance(event, e.CityRestarted):
        return (
            f"{event.city} started again with {stock_text(event.stock)}, {event.population} people, "
            f"{event.hit_points} hp (immune until season {event.immune_until_season})"
        )
    if isinstance(event, e.MerchantSent):
        return f"{event.trade_id}: {event.home} sent a merchant to {event.host} carrying {stock_text(event.load)}"
    if isinstance(event, e.MerchantIntercepted):
        verdict = "escaped" if event.escaped else f"was caught: {event.attacker} seized {stock_text(event.seized)}"
        return (
            f"{event.trade_id}: {event.attacker} intercepted {event.home}'s merchant at {event.at} "
            f"({event.army_score} vs {event.merchant_score}); the merchant {verdict}"
        )
    if isinstance(event, e.TradeOffered):
        paying = f"{event.pay}, " if event.pay else ""  # pay "": the dice alone
        return f"{event.trade_id}: {event.by} offered to buy {event.buy} with {paying}{event.dice} dice"
    if isinstance(event, e.TradeCountered):
        return f"{event.trade_id}: {event.by} countered, wanting {event.want}"
    if isinstance(event, e.TradeAgreed):
        return f"{event.trade_id}: {event.by} agreed; {event.home} and {event.host} roll for the goods"
    if isinstance(event, e.TradeDeclined):
        return f"{event.trade_id}: {event.by} declined the trade between {event.home} and {event.host}"
    if isinstance(event, e.TradeCancelled):
        return f"{event.trade_id} cancelled ({event.reason}): lost {stock_text(event.lost)}"
    if isinstance(event, e.MerchantReturned):
        return f"{event.trade_id}: the merchant came home to {event.home} with {stock_text(event.delivered)}"
    if isinstance(event, e.VillageProduced):
        return f"{event.city}'s village produced {stock_text(event.amounts)}"
    return None
