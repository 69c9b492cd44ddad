"""Every refusal of the claim rule-set: the command, the stable code, and nothing changes."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from game_modules import game_folder, game_module, game_names
from test_claim_support import HOUR, SEED, T0, ClaimGame

from almanac.events import room
from almanac.events.decider import Context
from almanac.events.dice import Dice
from almanac.events.errors import RuleError

DECIDER = game_module("claim@1", "game").DECIDER
(Build, Cruise, Cut, Farm, Harvest, Haul, ProveUp, Replant) = game_names(
    "claim@1", "commands", "Build", "Cruise", "Cut", "Farm", "Harvest", "Haul", "ProveUp", "Replant")
COUNTING = game_module("claim@1", "seeding").COUNTING
Parcel = game_module("claim@1", "state").Parcel

ROOT = Path(__file__).resolve().parents[2]


def _ctx(player: str = "ann", at: int = T0) -> Context:
    return Context(room="claim-1", player=player, now_ms=at, version=9, dice=Dice(SEED, "claim-1", 9))


@pytest.fixture
def broke() -> ClaimGame:
    """A claim with $0 cash, a barn on C8, and four small lots (8 logs, $4.41) on the deck."""
    game = ClaimGame()
    game.do(Cut(parcel="E6"))
    game.do(Build(parcel="C8", building="barn"))
    for name in ("D4", "E4", "C2"):
        game.do(Cut(parcel=name))
    assert game.claim.cash_cents == 0
    return game


def test_only_the_owner_works_the_claim() -> None:
    game = ClaimGame()
    assert game.refuse(room.JoinRoom(), player="bob").code == "no_seat"
    assert game.refuse(Cut(parcel="C1"), player="bob").code == "not_joined"
    with pytest.raises(RuleError) as error:
        DECIDER.decide(game.claim, Cut(parcel="C1"), _ctx(player="bob"))
    assert error.value.code == "claim.not_owner" and error.value.allowed == ["ann"]


def test_a_proved_up_claim_refuses_everything() -> None:
    game = ClaimGame()
    game.do(Build(parcel="A8", building="cabin"))
    game.do(ProveUp(), at=T0 + 48 * HOUR)
    assert game.refuse(Cruise()).code == "room_ended"
    with pytest.raises(RuleError) as error:
        DECIDER.decide(game.claim, Cruise(), _ctx(at=T0 + 49 * HOUR))
    assert error.value.code == "claim.proved_up"
    # The docs name the refusal the room gives first.
    [row] = [
        line
        for line in (ROOT / "games" / "claim" / "RULES.md").read_text().splitlines()
        if "`claim.proved_up`" in line
    ]
    assert "`room_ended`" in row and "game_over" not in row


@pytest.mark.parametrize(
    "command",
    [
        Cut(parcel="Z9"),
        Replant(parcel="I1", species="df"),
        Farm(parcel="A0"),
        Harvest(parcel=""),
        Build(parcel="B88", building="cabin"),
    ],
)
def test_a_parcel_outside_a1_to_h8_is_refused_by_name(command) -> None:
    error = ClaimGame().refuse(command)
    assert (error.code, error.field) == ("claim.unknown_parcel", "parcel")
    assert len(error.allowed) == 64


@pytest.mark.parametrize("typed", [" c1 ", "c 1", "C1 ", "  c1"])
def test_parcel_names_forgive_case_and_spaces_from_the_input_boundary_on(typed: str) -> None:
    # Given a body as a client sends it (decoded at the boundary, as the engine does)
    game = ClaimGame()
    game.do({"kind": "cut", "parcel": typed})
    assert game.parcel("C1").species is None
    # and a name that is no parcel, however typed, is the rules' refusal, not a malformed command
    assert game.refuse({"kind": "farm", "parcel": " z 9 "}).code == "claim.unknown_parcel"


def test_nothing_costs_more_than_the_cash(broke: ClaimGame) -> None:
    for command in (
        Cut(parcel="C1"),
        Replant(parcel="E6", species="l"),
        Farm(parcel="A8"),
        Build(parcel="E6", building="cabin"),
    ):
        assert broke.refuse(command).code == "claim.not_enough_cash", command


def test_the_teamster_must_be_paid_from_cash_and_sale(broke: ClaimGame) -> None:
    error = broke.refuse(Haul())
    assert error.code == "claim.not_enough_cash"
    assert "$0.00" in error.message and "$4.41" in error.message


@pytest.mark.parametrize("name", ["A8", "B8", "C8"])
def test_the_meadow_and_the_landing_have_no_timber_to_cut(name: str) -> None:
    error = ClaimGame().refuse(Cut(parcel=name))
    assert error.code == "claim.no_timber"
    assert ("road" in error.message) == (name == "B8")


def test_a_cut_or_built_parcel_has_no_timber_to_cut() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="C1"))
    assert "cut and not replanted" in game.refuse(Cut(parcel="C1")).message
    game.do(Build(parcel="C1", building="cabin"))
    error = game.refuse(Cut(parcel="C1"))
    assert error.code == "claim.no_timber" and "cabin" in error.message


def test_a_stand_under_four_growth_adjusted_hours_is_too_young_to_cut() -> None:
    game = ClaimGame()
    error = game.refuse(Cut(parcel="A1"))  # grand fir, 1.95 real hours x 11/10
    assert error.code == "claim.too_young" and "2.1 growth-adjusted hours" in error.message
    game.do(Cut(parcel="A1"), at=T0 + 2 * HOUR)  # 3.95 x 11/10 = 4.35 hours: merchantable


def test_the_landing_deck_holds_three_hundred_logs() -> None:
    game = ClaimGame()
    for name in ("C1", "A6", "D7"):  # 78 + 81 + 78 = 237 logs
        game.do(Cut(parcel=name))
    error = game.refuse(Cut(parcel="D2"))  # 74 more
    assert error.code == "claim.deck_full" and "room for 63" in error.message


def test_the_wagon_cannot_leave_while_away_or_with_an_empty_deck() -> None:
    game = ClaimGame()
    assert game.refuse(Haul()).code == "claim.deck_empty"
    game.do(Cut(parcel="C1"))
    game.do(Haul())
    game.do(Cut(parcel="A6"))
    error = game.refuse(Haul(), at=T0 + HOUR)
    assert error.code == "claim.wagon_away" and "60 minutes" in error.message


@pytest.mark.parametrize("name", ["A8", "B8", "C8"])
def test_the_meadow_is_never_replanted(name: str) -> None:
    error = ClaimGame().refuse(Replant(parcel=name, species="rc"))
    assert error.code == "claim.meadow_not_plantable"


def test_replanting_needs_bare_unbuilt_ground() -> None:
    game = ClaimGame()
    assert game.refuse(Replant(parcel="A6", species="df")).code == "claim.timber_standing"
    game.do(Cut(parcel="A6"))
    game.do(Build(parcel="A6", building="cabin"))
    assert game.refuse(Replant(parcel="A6", species="df")).code == "claim.built_on"


def test_replanting_takes_only_the_zones_species() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="A6"))  # bench
    game.do(Cut(parcel="G1"))  # ridge
    game.do(Cut(parcel="D7"))  # bottom
    error = game.refuse(Replant(parcel="A6", species="oak"))
    assert (error.code, error.field) == ("claim.unknown_species", "species") and len(error.allowed) == 9
    for parcel, species, allowed in (
        ("A6", "pp", ["wp", "df", "l", "gf", "lp"]),
        ("A6", "wh", ["wp", "df", "l", "gf", "lp"]),  # seeded on the bench, but not replanted there
        ("G1", "wp", ["pp", "l", "df", "lp"]),
        ("D7", "df", ["rc", "wh", "gf", "cw"]),
    ):
        error = game.refuse(Replant(parcel=parcel, species=species))
        assert (error.code, error.allowed) == ("claim.species_not_allowed", allowed)


def test_only_the_meadow_is_farmed_and_never_the_landing() -> None:
    game = ClaimGame()
    assert game.refuse(Farm(parcel="B8")).code == "claim.landing_not_farmable"
    error = game.refuse(Farm(parcel="D7"))
    assert (error.code, error.allowed) == ("claim.not_meadow", ["A8", "C8"])


def test_a_meadow_parcel_takes_one_crop_and_not_under_a_building() -> None:
    game = ClaimGame()
    game.do(Farm(parcel="A8"))
    assert game.refuse(Farm(parcel="A8")).code == "claim.crop_growing"
    assert game.refuse(Build(parcel="A8", building="barn")).code == "claim.crop_growing"
    game.do(Build(parcel="C8", building="barn"))
    assert game.refuse(Farm(parcel="C8")).code == "claim.built_on"


def test_harvest_needs_a_ripe_crop() -> None:
    game = ClaimGame()
    assert game.refuse(Harvest(parcel="A8")).code == "claim.no_crop"
    assert game.refuse(Harvest(parcel="C1")).code == "claim.no_crop"
    game.do(Farm(parcel="A8"))
    error = game.refuse(Harvest(parcel="A8"), at=T0 + 5 * HOUR)
    assert error.code == "claim.crop_not_ripe" and "60 minutes" in error.message


def test_buildings_go_only_where_the_rules_allow() -> None:
    game = ClaimGame()
    error = game.refuse(Build(parcel="A8", building="saloon"))
    assert (error.code, error.allowed) == ("claim.unknown_building", ["cabin", "barn", "mill"])
    for building in ("cabin", "barn", "mill"):
        assert game.refuse(Build(parcel="B8", building=building)).code == "claim.landing_no_building"
    game.do(Cut(parcel="G1"))  # the ridge takes no building
    game.do(Cut(parcel="C1"))
    for parcel, building in (("G1", "cabin"), ("G1", "mill"), ("C1", "barn"), ("A8", "mill")):
        assert game.refuse(Build(parcel=parcel, building=building)).code == "claim.site_not_allowed"
    assert game.refuse(Build(parcel="A6", building="cabin")).code == "claim.timber_standing"
    game.do(Haul())
    game.do(Build(parcel="A8", building="cabin"))
    assert game.refuse(Build(parcel="A8", building="barn")).code == "claim.built_on"
    error = game.refuse(Build(parcel="C1", building="cabin"))
    assert (error.code, error.field) == ("claim.building_limit", "building")


def test_proving_up_needs_a_cabin_two_days_and_half_the_cover() -> None:
    game = ClaimGame()
    assert game.refuse(ProveUp(), at=T0 + 100 * HOUR).code == "claim.no_cabin"
    game.do(Build(parcel="A8", building="cabin"))
    error = game.refuse(ProveUp(), at=T0 + 47 * HOUR)
    assert error.code == "claim.too_early" and "1 h to go" in error.message
    # A claim stripped to 30 timbered parcels (a state built directly: 31 cuts would take a long story).
    parcels = list(game.claim.parcels)
    for index in COUNTING[:31]:
        parcels[index] = Parcel()
    stripped = msgspec.structs.replace(game.claim, parcels=tuple(parcels))
    with pytest.raises(RuleError) as refused:
        DECIDER.decide(stripped, ProveUp(), _ctx(at=T0 + 48 * HOUR))
    assert refused.value.code == "claim.cover_too_low" and "only 30 of 61" in refused.value.message
    parcels[COUNTING[0]] = Parcel(species="df", planted_ms=T0)
    DECIDER.decide(
        msgspec.structs.replace(stripped, parcels=tuple(parcels)), ProveUp(), _ctx(at=T0 + 48 * HOUR)
    )


@pytest.mark.parametrize(
    ("options", "field", "code"),
    [
        ({"block": "   "}, "options.block", "claim.invalid_option"),
        # The schema refuses what is not a joinable name or is too long, before the rules look.
        ({"owner": "x" * 81}, "options.owner", "invalid_options"),
        ({"owner": "\u2603"}, "options.owner", "invalid_options"),
        ({"block": "b" * 81}, "options.block", "invalid_options"),
    ],
)
def test_blank_or_overlong_owner_and_block_are_refused_at_staking(options, field, code) -> None:
    with pytest.raises(RuleError) as error:
        room.decide(None, room.CreateRoom(ruleset="claim", options=options), _ctx())
    assert (error.value.code, error.value.field) == (code, field)


def test_options_of_the_wrong_shape_are_refused_by_the_room() -> None:
    with pytest.raises(RuleError) as error:
        room.decide(None, room.CreateRoom(ruleset="claim", options={"block": 7}), _ctx())
    assert error.value.code == "invalid_options"
    with pytest.raises(RuleError) as error:
        room.decide(None, room.CreateRoom(ruleset="claim", options={"created_at_ms": 0}), _ctx())
    assert error.value.code == "invalid_options"  # a client cannot choose the staking time


def test_a_command_of_another_rule_set_is_unknown_to_the_claim() -> None:
    with pytest.raises(RuleError) as error:
        DECIDER.decide(ClaimGame().claim, room.EndRoom(), _ctx())
    assert error.value.code == "unknown_command"


def test_every_refusal_code_is_documented_and_tested() -> None:
    source = "".join((game_folder("claim@1") / name).read_text() for name in ("rules.py", "game.py"))
    codes = set(re.findall(r'"(claim\.[a-z_]+)"', source))
    assert len(codes) == 28
    docs = (ROOT / "games" / "claim" / "RULES.md").read_text()
    tests = Path(__file__).read_text()
    assert {c for c in codes if f"`{c}`" not in docs} == set()
    assert {c for c in codes if f'"{c}"' not in tests} == set()


# --- time before the staking ------------------------------------------------------------------


@pytest.mark.parametrize("command", [Cut(parcel="C1"), Cruise(), Haul(), ProveUp()])
def test_a_command_timed_before_the_claim_was_staked_is_refused(command) -> None:
    # Given a claim staked at T0, when a command arrives stamped a minute earlier, then it is refused:
    # no timber stood on this claim for its owner before T0, so nothing may be valued or cut then.
    game = ClaimGame()
    error = game.refuse(command, at=T0 - 60_000)
    assert error.code == "claim.before_staking" and error.allowed == {"min": T0}
    # At the staking time itself the claim is open for work.
    game.do(Cruise(), at=T0)


def test_the_view_reports_the_seeds_zone_and_keeps_the_meadow_as_its_own_flag() -> None:
    parcels = {p["name"]: p for p in DECIDER.view(ClaimGame().claim, "anyone")["parcels"]}
    for name in ("A8", "B8", "C8"):
        assert (parcels[name]["zone"], parcels[name]["meadow"]) == ("bottom", True), parcels[name]
    assert (parcels["D8"]["zone"], parcels["D8"]["meadow"]) == ("bottom", False)
    assert parcels["E1"]["zone"] == "ridge" and parcels["A1"]["zone"] == "bench"
