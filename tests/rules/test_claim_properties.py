"""Property tests: whatever the owner does and whenever, the claim's parcels stay consistent."""

from __future__ import annotations

import msgspec
from game_modules import game_module, game_names
from hypothesis import given, settings, strategies as st
from test_claim_support import HOUR, MINUTE, ClaimGame, fold_events

from almanac.events.dice import Dice
from almanac.events.errors import RuleError
from almanac.events.hashing import state_hash

DECIDER = game_module("claim@1", "game").DECIDER
data = game_module("claim@1", "data")
(Build, Cruise, Cut, Farm, Harvest, Haul, ProveUp, Replant) = game_names(
    "claim@1", "commands", "Build", "Cruise", "Cut", "Farm", "Harvest", "Haul", "ProveUp", "Replant")
choose_command = game_module("claim@1", "policy").choose_command
cover_parcels, deck_logs = game_names("claim@1", "rules", "cover_parcels", "deck_logs")
COUNTING, TERRAIN, seed_parcels = game_names("claim@1", "seeding", "COUNTING", "TERRAIN", "seed_parcels")
ClaimState, Parcel = game_names("claim@1", "state", "ClaimState", "Parcel")

NAMES = [t.name for t in TERRAIN]
SPECIES = [*data.SPECIES, "oak"]
BUILDINGS = [*data.BUILDINGS, "saloon"]

commands = st.one_of(
    st.builds(Cut, parcel=st.sampled_from(NAMES)),
    st.just(Haul()),
    st.builds(Replant, parcel=st.sampled_from(NAMES), species=st.sampled_from(SPECIES)),
    st.builds(Farm, parcel=st.sampled_from(NAMES)),
    st.builds(Harvest, parcel=st.sampled_from(NAMES)),
    st.builds(Build, parcel=st.sampled_from(NAMES), building=st.sampled_from(BUILDINGS)),
    st.just(Cruise()),
    st.just(ProveUp()),
)
steps = st.lists(st.tuples(st.integers(0, 6 * HOUR), commands), min_size=1, max_size=40)


def assert_consistent(claim: ClaimState) -> None:
    for terrain, parcel in zip(TERRAIN, claim.parcels, strict=True):
        if terrain.meadow:
            assert parcel.species is None and parcel.planted_ms is None  # no species on the meadow
        if terrain.road:
            assert parcel.building is None and parcel.crop_ripe_ms is None
        if parcel.crop_ripe_ms is not None:
            assert terrain.meadow and parcel.building is None
        if parcel.building is not None:
            assert parcel.species is None and not terrain.slope
        if parcel.species is not None:
            allowed = {k for k, _ in data.ZONES[terrain.zone].mix} | set(data.ZONES[terrain.zone].replant)
            assert parcel.species in allowed and parcel.planted_ms is not None
    buildings = [p.building for p in claim.parcels if p.building]
    assert len(buildings) == len(set(buildings))
    cover = cover_parcels(claim)
    timbered = sum(1 for t, p in zip(TERRAIN, claim.parcels, strict=True) if p.species and not t.meadow)
    assert cover == timbered <= len(COUNTING) == 61  # cover counts only the 61
    # Cover never looks at the meadow: even timber forced onto it (which no event can do) adds nothing.
    forced = tuple(
        Parcel(species="rc", planted_ms=0) if t.meadow else p
        for t, p in zip(TERRAIN, claim.parcels, strict=True)
    )
    assert cover_parcels(msgspec.structs.replace(claim, parcels=forced)) == cover
    resources = DECIDER.resources(claim)
    assert resources["forest_cover_of"] == 61 and resources["forest_cover_parcels"] == cover
    assert claim.cash_cents >= 0
    assert 0 <= deck_logs(claim) <= data.DECK_CAPACITY_LOGS


@settings(max_examples=60, deadline=None)
@given(created=st.integers(0, 2**32 * 1000), plan=steps)
def test_any_sequence_of_commands_keeps_the_parcels_consistent(created: int, plan) -> None:
    game = ClaimGame(created_ms=created)
    at = created
    for delay, command in plan:
        at += delay
        try:
            game.do(command, at=at)
        except RuleError as error:
            assert error.code.startswith("claim.") or error.code == "room_ended"
        assert_consistent(game.claim)
    assert fold_events("claim-1", game.events) == game.state


@settings(max_examples=40, deadline=None)
@given(created=st.integers(0, 2**32 * 1000))
def test_any_staking_time_seeds_a_valid_claim(created: int) -> None:
    parcels = seed_parcels(created)
    assert [p.name for p in parcels] == NAMES
    for p in parcels:
        if p.meadow:
            assert (p.species, p.planted_ms, p.age_hours) == (None, None, None)
            continue
        assert p.species in {k for k, _ in data.ZONES[p.zone].mix}
        assert (22 <= p.age_hours < 52) if p.old else (1 <= p.age_hours < 18)
        assert created - 52 * HOUR < p.planted_ms <= created - HOUR
        assert p.planted_ms == created - p.age_hours * 3600000  # the seed's double, not rounded
    assert seed_parcels(created - created % 1000)[0].species == parcels[0].species


@settings(max_examples=15, deadline=None)
@given(
    created=st.integers(10**12, 2 * 10**12), step=st.integers(5 * MINUTE, 2 * HOUR), salt=st.text(max_size=8)
)
def test_the_policy_always_chooses_a_legal_command_until_the_claim_is_proved_up(
    created: int, step: int, salt: str
) -> None:
    game = ClaimGame(created_ms=created)
    for turn in range(80):
        at = game.advance(step)
        command = choose_command(game.claim, "ann", at, Dice(b"policy", salt, turn))
        if command is None:
            assert game.state.ended
            break
        game.do(command, at=at)  # raises if the policy picked an illegal move
        assert_consistent(game.claim)
    assert choose_command(game.claim, "bob", game.now, Dice(b"policy", salt, 0)) is None
    assert state_hash(fold_events("claim-1", game.events)) == state_hash(game.state)
