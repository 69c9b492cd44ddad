"""The claim's map and seeding follow seed 001 exactly."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from game_modules import game_module, game_names

from almanac.events.decider import Context
from almanac.events.dice import Dice

DECIDER = game_module("claim@1", "game").DECIDER
data = game_module("claim@1", "data")
(COUNTING, INDEX_BY_NAME, TERRAIN, Lcg, lcg_seed, parcel_name, pick_species, seed_parcels) = game_names(
    "claim@1", "seeding", "COUNTING", "INDEX_BY_NAME", "TERRAIN", "Lcg", "lcg_seed", "parcel_name", "pick_species", "seed_parcels")

STEEP = "E1 F1 G1 H1 E2 F2 G2 H2 H3 G4 H4 F5 G5 H5".split()


def test_parcels_are_named_a1_to_h8_by_index_r_times_8_plus_c() -> None:
    assert [parcel_name(i) for i in (0, 7, 8, 57, 63)] == ["A1", "H1", "A2", "B8", "H8"]
    assert all(INDEX_BY_NAME[t.name] == t.index for t in TERRAIN)
    assert len(INDEX_BY_NAME) == 64


def test_the_fourteen_steep_parcels_are_exactly_the_seeds_list() -> None:
    assert [t.name for t in TERRAIN if t.slope] == STEEP


def test_zone_counts_are_14_ridge_13_bottom_34_bench_3_meadow() -> None:
    kinds = Counter("meadow" if t.meadow else t.zone for t in TERRAIN)
    assert kinds == {"ridge": 14, "bottom": 13, "bench": 34, "meadow": 3}
    assert [t.name for t in TERRAIN if t.meadow] == ["A8", "B8", "C8"]
    assert len(COUNTING) == 61


def test_the_landing_is_b8_and_a_road_and_the_only_road() -> None:
    assert data.LANDING == (7, 1)
    assert [t.name for t in TERRAIN if t.road] == ["B8"]
    setup = seed_parcels(1_700_000_000_000)
    assert [p.name for p in setup if p.road] == ["B8"]


def test_first_lcg_outputs_for_seed_zero_match_the_hand_computation() -> None:
    # s0 = 0 (any creation time in the first second of 1970).
    # s1 = 0 * 1664525 + 1013904223 = 1013904223 (below 2^32 = 4294967296, no wrap)
    # s2 = 1013904223 * 1664525 + 1013904223 = 1687668926789075 + 1013904223 = 1687669940693298
    #      1687669940693298 // 4294967296 = 392941; 392941 * 4294967296 = 1687668744257536
    #      s2 = 1687669940693298 - 1687668744257536 = 1196435762
    # s3 = 1196435762 * 1664525 + 1013904223 = 1991497236743050 + 1013904223 = 1991498250647273
    #      1991498250647273 // 4294967296 = 463681; 463681 * 4294967296 = 1991494730776576
    #      s3 = 1991498250647273 - 463681 * 4294967296 = 3519870697
    assert 1013904223 * 1664525 == 1687668926789075
    assert 392941 * 4294967296 == 1687668744257536
    assert 1196435762 * 1664525 == 1991497236743050
    assert 463681 * 4294967296 == 1991494730776576
    assert 1991498250647273 - 1991494730776576 == 3519870697
    rng = Lcg(0)
    outputs = [rng.rand() for _ in range(3)]
    assert rng.state == 3519870697
    # rand() = s / 2^32, exact in doubles
    assert outputs == [1013904223 / 2**32, 1196435762 / 2**32, 3519870697 / 2**32]
    assert outputs[0] == pytest.approx(0.2360679728)
    assert outputs[1] == pytest.approx(0.2785669086)
    assert outputs[2] == pytest.approx(0.8195337600)


def test_first_parcel_for_seed_zero_is_worked_by_hand() -> None:
    # A1 is bench (not steep, row 0). Draw 1: 0.23607 >= 0.22 -> young.
    # Draw 2: age = 1 + 0.2785669086 * 17 = 5.7356374455 hours.
    # Draw 3: 0.81953 against the bench mix running totals 0.28, 0.55, 0.70, 0.82 -> the 4th, gf.
    # planted = 999 - 5.735637445468455... * 3600000 = -20647295.80368644 (bc, 30 digits): the seed's
    # double, not rounded to a whole millisecond.
    a1 = seed_parcels(999)[0]
    assert (a1.name, a1.zone, a1.old, a1.species) == ("A1", "bench", False, "gf")
    assert a1.age_hours == 1 + (1196435762 / 2**32) * 17
    assert a1.planted_ms == pytest.approx(-20647295.80368644, abs=1e-7)


def test_planted_is_the_creation_time_minus_the_age_in_doubles_and_nothing_more() -> None:
    # Given a claim staked at a millisecond that is not a whole second,
    # when it is seeded,
    # then every timbered parcel's planted time is createdAt - age * 3600000 as the seed computes it in
    # doubles: no flooring, no rounding (the fraction of a millisecond is kept).
    created = 1_700_000_000_123
    parcels = seed_parcels(created)
    timbered = [p for p in parcels if not p.meadow]
    assert all(p.planted_ms == created - p.age_hours * 3600000 for p in timbered)
    assert any(p.planted_ms != int(p.planted_ms) for p in timbered)


def test_the_generator_starts_at_the_creation_time_in_whole_seconds() -> None:
    assert lcg_seed(1_700_000_000_999) == 1_700_000_000
    assert lcg_seed(5_000_000_000_000) == 5_000_000_000 % 2**32
    # s1 for s0 = 1_700_000_000: 1700000000 * 1664525 + 1013904223 = 2829693513904223 mod 2^32
    assert (1_700_000_000 * 1664525 + 1013904223) == 2829693513904223
    rng = Lcg(1_700_000_000)
    assert rng.rand() == (2829693513904223 % 2**32) / 2**32


def test_same_creation_second_gives_the_identical_claim() -> None:
    first = seed_parcels(1_700_000_000_000)
    same_second = seed_parcels(1_700_000_000_999)
    next_second = seed_parcels(1_700_000_001_000)
    assert [(p.species, p.old, p.age_hours) for p in first] == [
        (p.species, p.old, p.age_hours) for p in same_second
    ]
    # planted is createdAt (in ms) minus the age, so it shifts with the millisecond, nothing else does.
    assert [p.species for p in first] != [p.species for p in next_second]


def test_meadow_draws_nothing_and_every_other_parcel_draws_three() -> None:
    # Replay the seed's loop by hand with a counting generator: 61 parcels x 3 draws = 183.
    rng = Lcg(lcg_seed(1_700_000_000_000))
    expected = []
    for t in TERRAIN:
        if t.meadow:
            expected.append(None)
            continue
        old = rng.rand() < 0.22
        age = 22 + rng.rand() * 30 if old else 1 + rng.rand() * 17
        expected.append((old, age, pick_species(t.zone, rng.rand())))
    seeded = seed_parcels(1_700_000_000_000)
    got = [None if p.meadow else (p.old, p.age_hours, p.species) for p in seeded]
    assert got == expected
    check = Lcg(lcg_seed(1_700_000_000_000))
    for _ in range(183):
        check.rand()
    assert check.state == rng.state
    assert all(p.species is None and p.planted_ms is None and p.age_hours is None for p in seeded if p.meadow)


def test_pick_species_walks_the_mix_in_the_tables_order() -> None:
    assert [pick_species("bottom", x) for x in (0.0, 0.39, 0.4, 0.59, 0.61, 0.79, 0.8, 0.999)] == [
        "rc",
        "rc",
        "cw",
        "cw",
        "wh",
        "wh",
        "gf",
        "gf",
    ]
    assert [
        pick_species("bench", x) for x in (0.27, 0.28, 0.54, 0.55, 0.69, 0.71, 0.81, 0.83, 0.91, 0.92)
    ] == [
        "wp",
        "df",
        "df",
        "l",
        "l",
        "gf",
        "gf",
        "wh",
        "wh",
        "lp",
    ]
    assert [pick_species("ridge", x) for x in (0.44, 0.45, 0.74, 0.75, 0.89, 0.9)] == [
        "pp",
        "l",
        "l",
        "df",
        "df",
        "lp",
    ]


def test_pick_species_keeps_the_running_sum_in_doubles() -> None:
    # 0.4 + 0.2 is 0.6000000000000001 in doubles, so x = 0.6 still falls to cw, as in the prototype;
    # likewise 0.28 + 0.27 + 0.15 = 0.7000000000000001 keeps x = 0.7 on l, and 0.82 stays on gf.
    assert 0.4 + 0.2 > 0.6
    assert pick_species("bottom", 0.6) == "cw"
    assert pick_species("bench", 0.7) == "l"
    assert pick_species("bench", 0.82) == "gf"


def _many_claims(count: int = 2000) -> list:
    # Spread seconds over decades: neighbouring seconds give correlated first draws (an LCG property).
    chooser = random.Random(20240601)
    return [seed_parcels(chooser.randrange(0, 2**32) * 1000) for _ in range(count)]


@pytest.fixture(scope="module")
def many_claims() -> list:
    return _many_claims()


def test_species_shares_per_zone_match_the_mixes_within_two_points(many_claims) -> None:
    # 2000 claims: 26000 bottom, 68000 bench, 28000 ridge samples; a share's standard error is
    # below 0.3 points, so a 2-point tolerance is over six standard errors.
    for zone in data.ZONES.values():
        counts: Counter = Counter()
        for parcels in many_claims:
            counts.update(p.species for p in parcels if not p.meadow and p.zone == zone.key)
        total = sum(counts.values())
        assert set(counts) == {key for key, _ in zone.mix}
        for key, share in zone.mix:
            assert counts[key] / total == pytest.approx(share, abs=0.02), (zone.key, key)


def test_old_parcels_are_about_22_percent_and_ages_stay_in_their_ranges(many_claims) -> None:
    timbered = [p for parcels in many_claims for p in parcels if not p.meadow]
    old_share = sum(p.old for p in timbered) / len(timbered)
    assert old_share == pytest.approx(0.22, abs=0.01)  # 122000 samples: standard error 0.12 points
    assert all(22 <= p.age_hours < 52 for p in timbered if p.old)
    assert all(1 <= p.age_hours < 18 for p in timbered if not p.old)
    per_claim = [sum(p.old for p in parcels if not p.meadow) for parcels in many_claims]
    assert min(per_claim) < 13 < max(per_claim)  # the share varies by claim


def test_the_staking_time_comes_from_the_server_context_not_the_options() -> None:
    ctx = Context(room="r", player="ann", now_ms=1_700_000_000_500, version=1, dice=Dice(b"k", "r", 1))
    setup = DECIDER.setup(DECIDER.options_type(), ctx)
    assert setup.created_at_ms == 1_700_000_000_500
    assert setup.lcg_seed == 1_700_000_000
    assert setup.parcels == seed_parcels(1_700_000_000_500)
    assert set(DECIDER.options_type.__struct_fields__) == {"owner", "block"}
