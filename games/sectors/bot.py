"""The colony's seat bot: the simple policy played from the owner's view (the explored sectors, as shown)."""

from __future__ import annotations

from typing import Any

from almanac.events.manifest import Dice
from almanac.games.sectors.policy import choose_command
from almanac.games.sectors.state import ColonyState, Goods, Sector, season_number


def state_from_view(view: dict[str, Any]) -> ColonyState:
    """The colony as its view shows it: unexplored sectors stay unknown (None), as they are in the state."""
    now = season_number(view["season"], view["year"])
    sectors: list[Sector | None] = []
    for row in view["grid"]:
        for cell in row:
            if not cell["explored"]:
                sectors.append(None)
                continue
            ago = cell["starved_seasons_ago"]
            sectors.append(Sector(type=cell["type"], population=cell["population"],
                                  buildings=tuple(cell["buildings"]), last_starved=None if ago is None else now - ago))
    return ColonyState(owner=view["owner"], rows=view["rows"], columns=view["columns"], season=view["season"],
                       year=view["year"], years=view["years"], stock=Goods(**view["stock"]), sectors=tuple(sectors))


def play(view: dict[str, Any], player: str, dice: Dice, now_ms: int) -> object | None:
    return choose_command(state_from_view(view), player, dice)
