"""The claim's Decider: what it decides, hides, shows and counts."""

from __future__ import annotations

from typing import Any

import msgspec

from almanac.events.manifest import Context, RuleError, Secret, event_tag, redact
from almanac.games.claim import data, events as e, rules
from almanac.games.claim.commands import COMMANDS
from almanac.games.claim.events import EVENTS
from almanac.games.claim.growth import stand
from almanac.games.claim.seeding import COUNTING, TERRAIN, lcg_seed, seed_parcels
from almanac.games.claim.state import ClaimOptions, ClaimSetup, ClaimState

MAX_NAME = 80


class ClaimDecider:
    name = "claim"
    options_type = ClaimOptions
    setup_type = ClaimSetup
    state_type = ClaimState
    command_types = COMMANDS
    event_types = EVENTS
    # Nothing on a claim is secret: anyone in the valley may walk it.
    secrets: dict[type, tuple[Secret, ...]] = {}

    def setup(self, options: ClaimOptions, ctx: Context) -> ClaimSetup:
        owner = options.owner or ctx.player
        block = options.block or ctx.room
        for field, value in (("owner", owner), ("block", block)):
            if not value.strip() or len(value) > MAX_NAME:
                raise RuleError(
                    "claim.invalid_option",
                    f"{field} must be 1 to {MAX_NAME} characters, not blank; got {value!r}",
                    field=f"options.{field}",
                )
        # The claim is seeded from the server's time on this command, never from anything a client sends.
        return ClaimSetup(
            owner=owner,
            block=block,
            created_at_ms=ctx.now_ms,
            lcg_seed=lcg_seed(ctx.now_ms),
            parcels=seed_parcels(ctx.now_ms),
        )

    def initial_state(self, setup: ClaimSetup) -> ClaimState:
        return rules.initial_state(setup)

    def decide(self, state: ClaimState, command: Any, ctx: Context) -> list[Any]:
        return rules.decide(state, command, ctx)

    def evolve(self, state: ClaimState, event: Any) -> ClaimState:
        return rules.evolve(state, event)

    def is_over(self, state: ClaimState) -> bool:
        return state.proved_up_ms is not None

    def seats(self, state: ClaimState) -> tuple[str, ...]:
        return (state.owner,)

    def view(self, state: ClaimState, player: str) -> dict[str, Any]:
        # Nothing on a claim is secret: anyone in the valley may walk it. Timber is valued at the clock.
        at = state.clock_ms
        parcels = []
        for terrain, parcel in zip(TERRAIN, state.parcels, strict=True):
            entry: dict[str, Any] = {
                "name": terrain.name,
                "zone": terrain.zone,  # the seed's zone function: the meadow lies in the bottom
                "slope": terrain.slope,
                "meadow": terrain.meadow,
                "road": terrain.road,
                "species": parcel.species,
                "planted_ms": parcel.planted_ms,
                "building": parcel.building,
                "crop_ripe_ms": parcel.crop_ripe_ms,
            }
            if parcel.species is not None and parcel.planted_ms is not None:
                s = stand(parcel.species, parcel.planted_ms, at)
                entry.update(
                    adjusted_hours=rules.hours_text(s.adjusted_hours),
                    board_feet=s.board_feet,
                    grade=s.grade,
                    value_cents=s.value_cents,
                )
            parcels.append(entry)
        return {
            "owner": state.owner,
            "block": state.block,
            "created_at_ms": state.created_at_ms,
            "clock_ms": state.clock_ms,
            "cash_cents": state.cash_cents,
            "deck": [msgspec.to_builtins(lot) for lot in state.deck],
            "wagon_back_ms": state.wagon_back_ms,
            "proved_up_ms": state.proved_up_ms,
            "score": rules.score(state),
            "resources": self.resources(state),
            "parcels": parcels,
        }

    def redact(self, event: Any, player: str) -> Any:
        return redact(self.secrets, event, player)

    def scores(self, state: ClaimState) -> dict[str, int]:
        return {state.owner: rules.score(state)}

    def public_scores(self, state: ClaimState) -> dict[str, int]:
        """Public: a claim hides nothing; its score is as public as its parcels."""
        return self.scores(state)

    def resources(self, state: ClaimState) -> dict[str, Any]:
        cover = rules.cover_parcels(state)
        return {
            "cash_cents": state.cash_cents,
            "deck_logs": rules.deck_logs(state),
            "deck_board_feet": rules.deck_board_feet(state),
            "board_feet_hauled": state.board_feet_hauled,
            "logs_hauled": state.logs_hauled,
            "forest_cover_parcels": cover,
            "forest_cover_of": len(COUNTING),
            "forest_cover_permille": cover * 1000 // len(COUNTING),
        }

    def summary(self, event: Any) -> str:
        return summarize(event)


def dollars(cents: int) -> str:
    return f"${cents // 100:,}.{cents % 100:02d}" if cents >= 0 else f"-{dollars(-cents)}"


def summarize(event: Any) -> str:
    """One human line per claim event, for logs, audits and the console."""
    parcel = TERRAIN[event.parcel].name if isinstance(getattr(event, "parcel", None), int) else ""
    if isinstance(event, e.ParcelCut):
        species = data.SPECIES[event.species].name if event.species in data.SPECIES else event.species
        return (
            f"cut {parcel} ({species}, {event.grade}): {event.board_feet:,} board feet in {event.logs} logs, "
            f"worth {dollars(event.value_cents)}, crew {dollars(event.cost_cents)}"
        )
    if isinstance(event, e.DeckHauled):
        return (
            f"hauled {event.logs} logs ({event.board_feet:,} board feet) to the mill: {dollars(event.gross_cents)}, "
            f"fee {dollars(event.fee_cents)}"
        )
    if isinstance(event, e.ParcelReplanted):
        species = data.SPECIES[event.species].name if event.species in data.SPECIES else event.species
        return f"replanted {parcel} with {species} for {dollars(event.cost_cents)}"
    if isinstance(event, e.MeadowFarmed):
        return f"farmed the meadow {parcel} for {dollars(event.cost_cents)}"
    if isinstance(event, e.CropHarvested):
        return f"harvested the hay on {parcel}: sold for {dollars(event.sale_cents)}"
    if isinstance(event, e.BuildingBuilt):
        return f"built a {event.building} on {parcel} for {dollars(event.cost_cents)}"
    if isinstance(event, e.TimberCruised):
        return (
            f"cruised the timber: {event.board_feet:,} board feet worth {dollars(event.value_cents)}, "
            f"{event.cover_parcels} parcels under cover"
        )
    if isinstance(event, e.ClaimProvedUp):
        return f"proved up the claim: score {event.score}, {event.cover_parcels} parcels under cover"
    return f"{event_tag(event)} at {getattr(event, 'at_ms', '?')} ms"


DECIDER = ClaimDecider()

__all__ = ["DECIDER", "ClaimDecider", "data"]
