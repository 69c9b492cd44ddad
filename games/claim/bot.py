"""The claim's seat bot: the simple policy played from the owner's view (a claim hides nothing, but the bot reads
the view all the same, as every seat bot does)."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.claim.policy import choose_command
from almanac.games.claim.state import ClaimState, DeckLot, Parcel


def state_from_view(view: dict[str, Any]) -> ClaimState:
    """The claim as its view shows it; the tallies the view does not list (trips, sales) the policy never reads."""
    return ClaimState(
        owner=view["owner"],
        block=view["block"],
        created_at_ms=view["created_at_ms"],
        clock_ms=view["clock_ms"],
        cash_cents=view["cash_cents"],
        parcels=tuple(Parcel(species=p["species"], planted_ms=p["planted_ms"], building=p["building"],
                             crop_ripe_ms=p["crop_ripe_ms"]) for p in view["parcels"]),
        deck=tuple(DeckLot(**lot) for lot in view["deck"]),
        wagon_back_ms=view["wagon_back_ms"],
        proved_up_ms=view["proved_up_ms"],
    )


def play(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    return choose_command(state_from_view(view), player, now_ms, dice)
