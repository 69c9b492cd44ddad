"""Stories of play on a claim: staking, cutting, hauling, replanting, farming, building, proving up."""

from __future__ import annotations

import json
from pathlib import Path

from game_modules import game_module, game_names
from test_claim_support import HOUR, MINUTE, T0, ClaimGame, fold_events

from almanac.events import codec, room
from almanac.events.envelope import Envelope
from almanac.events.hashing import state_hash

DECIDER = game_module("claim@1", "game").DECIDER
data = game_module("claim@1", "data")
(Build, Cruise, Cut, Farm, Harvest, Haul, ProveUp, Replant) = game_names(
    "claim@1", "commands", "Build", "Cruise", "Cut", "Farm", "Harvest", "Haul", "ProveUp", "Replant")
DeckHauled, ParcelCut = game_names("claim@1", "events", "DeckHauled", "ParcelCut")
ClaimSetup = game_module("claim@1", "state").ClaimSetup
INDEX_BY_NAME, seed_parcels = game_names("claim@1", "seeding", "INDEX_BY_NAME", "seed_parcels")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claim.jsonl"


def test_staking_a_claim_records_owner_block_time_and_every_parcel_in_room_created() -> None:
    game = ClaimGame(created_ms=T0 + 250, owner="ann", block="valley-1/NE")
    created = game.events[0]
    assert isinstance(created, room.RoomCreated)
    setup: ClaimSetup = created.setup
    assert (setup.owner, setup.block, setup.created_at_ms, setup.lcg_seed) == (
        "ann",
        "valley-1/NE",
        T0 + 250,
        T0 // 1000,
    )
    assert setup.parcels == seed_parcels(T0 + 250)
    assert len(setup.parcels) == 64 and [p.name for p in setup.parcels][:3] == ["A1", "B1", "C1"]
    assert DECIDER.seats(game.claim) == ("ann",)
    assert game.claim.cash_cents == 10_000


def test_the_owner_defaults_to_the_creator_and_the_block_to_the_room() -> None:
    game = ClaimGame(owner="cy", block="", room_id="valley-2/SW")
    assert (game.claim.owner, game.claim.block) == ("cy", "valley-2/SW")


def test_a_clerk_may_stake_a_claim_for_another_owner_who_alone_may_join() -> None:
    game = ClaimGame.__new__(ClaimGame)
    game.room, game.owner, game.state, game.events, game.now = "claim-9", "bob", None, [], T0
    game.do(
        room.CreateRoom(ruleset="claim", options={"owner": "bob", "block": "valley-1/SE"}), player="clerk"
    )
    assert game.refuse(room.JoinRoom(), player="clerk").code == "no_seat"
    game.do(room.JoinRoom(), player="bob")
    assert game.claim.owner == "bob" and game.state.players == ("bob",)


def test_cutting_sends_the_stands_logs_to_the_landing_deck_and_leaves_the_parcel_bare() -> None:
    game = ClaimGame()
    [cut] = game.do(Cut(parcel="C1"))  # an old Douglas-fir, 42.23 hours at staking
    assert cut == ParcelCut(
        at_ms=T0,
        parcel=INDEX_BY_NAME["C1"],
        species="df",
        age_ms=cut.age_ms,
        grade="clears",
        board_feet=15_558,
        logs=78,
        value_cents=19_447,
        cost_cents=1_500,
    )
    assert 42 * HOUR < cut.age_ms < 43 * HOUR
    assert game.parcel("C1").species is None
    assert game.claim.cash_cents == 8_500
    resources = DECIDER.resources(game.claim)
    assert (resources["deck_logs"], resources["deck_board_feet"], resources["forest_cover_parcels"]) == (
        78,
        15_558,
        60,
    )


def test_logging_the_steep_ridge_costs_double() -> None:
    game = ClaimGame()
    [cut] = game.do(Cut(parcel="G1"))  # old ponderosa pine on the ridge
    assert cut.cost_cents == 2 * data.CUT_COST_CENTS
    assert game.claim.cash_cents == 10_000 - 3_000


def test_hauling_sells_the_whole_deck_and_the_wagon_is_away_two_hours() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="C1"))
    game.do(Cut(parcel="A6"))
    [haul] = game.do(Haul(), at=T0 + 10 * MINUTE)
    assert haul == DeckHauled(
        at_ms=T0 + 10 * MINUTE,
        logs=78 + 81,
        board_feet=15_558 + 16_080,
        gross_cents=19_447 + 20_100,
        fee_cents=1_000,
        back_ms=T0 + 10 * MINUTE + 2 * HOUR,
    )
    assert game.claim.deck == ()
    assert game.claim.cash_cents == 10_000 - 3_000 + 39_547 - 1_000
    assert DECIDER.resources(game.claim)["board_feet_hauled"] == 31_638
    game.do(Cut(parcel="D2"), at=T0 + HOUR)
    assert game.refuse(Haul(), at=T0 + 10 * MINUTE + 2 * HOUR - 1).code == "claim.wagon_away"
    game.do(Haul(), at=T0 + 10 * MINUTE + 2 * HOUR)
    assert game.claim.trips == 2


def test_a_mill_on_the_claim_sells_hauled_logs_for_five_quarters() -> None:
    game = ClaimGame()
    for name in ("C1", "A6", "D2"):
        game.do(Cut(parcel=name))
    game.do(Haul())
    game.do(Build(parcel="C1", building="mill"))
    game.do(Cut(parcel="D7"), at=T0 + 3 * HOUR)
    [cut] = [e for e in game.events if isinstance(e, ParcelCut)][-1:]
    [haul] = game.do(Haul())
    assert haul.gross_cents == cut.value_cents * 5 // 4


def test_a_replanted_parcel_grows_from_the_replant_events_time() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="C1"))
    game.do(Replant(parcel="C1", species="df"), at=T0 + HOUR)
    assert game.parcel("C1").planted_ms == T0 + HOUR
    assert game.refuse(Cut(parcel="C1"), at=T0 + 4 * HOUR).code == "claim.too_young"  # 3 h < 4 h
    game.do(Haul(), at=T0 + 5 * HOUR)
    [cut] = game.do(Cut(parcel="C1"), at=T0 + 7 * HOUR)  # 6 h: 1500 * 2/6 = 500 board feet
    assert (cut.board_feet, cut.grade, cut.logs) == (500, "poles", 3)


def test_hay_on_the_meadow_ripens_in_six_hours_and_a_barn_makes_it_pay_half_again() -> None:
    game = ClaimGame()
    game.do(Farm(parcel="A8"))
    assert game.refuse(Harvest(parcel="A8"), at=T0 + 6 * HOUR - 1).code == "claim.crop_not_ripe"
    [sale] = game.do(Harvest(parcel="A8"), at=T0 + 6 * HOUR)
    assert sale.sale_cents == 900
    game.do(Build(parcel="C8", building="barn"))
    game.do(Farm(parcel="A8"))
    [sale] = game.do(Harvest(parcel="A8"), at=T0 + 12 * HOUR)
    assert sale.sale_cents == 1_350
    assert game.claim.hay_sales_cents == 2_250
    assert game.claim.cash_cents == 10_000 - 300 + 900 - 4_000 - 300 + 1_350


def test_a_claim_proved_up_after_two_days_with_a_cabin_ends_with_a_frozen_score() -> None:
    game = ClaimGame()
    game.do(Build(parcel="A8", building="cabin"))
    assert game.refuse(ProveUp(), at=T0 + 48 * HOUR - 1).code == "claim.too_early"
    events = game.do(ProveUp(), at=T0 + 48 * HOUR)
    assert [type(e).__name__ for e in events] == ["ClaimProvedUp", "RoomEnded"]
    assert DECIDER.is_over(game.claim) and game.state.ended
    assert DECIDER.scores(game.claim) == {"ann": events[0].score}
    assert events[0].score == game.claim.final_score > 4_000 - 60  # timber grew for 48 hours
    assert game.refuse(Cruise(), at=T0 + 50 * HOUR).code == "room_ended"


def test_the_score_is_cash_plus_deck_plus_standing_timber_at_the_claims_clock() -> None:
    game = ClaimGame()
    before = DECIDER.scores(game.claim)["ann"]
    game.do(Cruise(), at=T0 + 10 * HOUR)
    [cruise] = game.events[-1:]
    after = DECIDER.scores(game.claim)["ann"]
    assert after > before  # the timber grew, and the cruise moved the clock
    assert after == (10_000 + cruise.value_cents) // 100
    game.do(Cut(parcel="C1"))
    # Cutting pays the crew and moves value from the stand to the deck: the score drops by the crew.
    assert DECIDER.scores(game.claim)["ann"] == (10_000 - 1_500 + cruise.value_cents) // 100


def test_view_shows_every_parcel_with_its_stand_and_redact_hides_nothing() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="C1"))
    view = DECIDER.view(game.claim, "anyone")
    json.dumps(view)  # builtins only
    by_name = {p["name"]: p for p in view["parcels"]}
    assert by_name["B8"]["road"] and by_name["B8"]["meadow"]
    assert by_name["A6"]["grade"] == "clears" and by_name["A6"]["board_feet"] == 16_080
    assert view["deck"][0]["logs"] == 78
    assert all(DECIDER.redact(e, "bob") is e for e in game.events[2:])
    assert DECIDER.summary(game.events[-1]).startswith("cut C1 (Douglas-fir, ")


def test_every_event_round_trips_through_the_codec_and_the_state_through_a_snapshot() -> None:
    game = ClaimGame()
    game.do(Cut(parcel="C1"))
    game.do(Haul())
    game.do(Replant(parcel="C1", species="wp"))
    game.do(Farm(parcel="A8"))
    game.do(Build(parcel="C8", building="barn"))
    game.do(Cut(parcel="A6"))
    game.do(Build(parcel="A6", building="cabin"))
    game.do(Harvest(parcel="A8"), at=T0 + 6 * HOUR)
    game.do(Cruise())
    game.do(ProveUp(), at=T0 + 48 * HOUR)
    kinds = {type(e).__name__ for e in game.events}
    assert {t.__name__ for t in DECIDER.event_types} <= kinds
    for version, event in enumerate(game.events, start=1):
        tag, payload = codec.encode_event(event)
        envelope = Envelope(
            room="claim-1",
            version=version,
            ruleset="claim",
            type=tag,
            payload=payload,
            command_id="c",
            player="ann",
            server_time_ms=0,
            previous_hash="",
        )
        assert codec.decode_event(envelope) == event
    assert fold_events("claim-1", game.events) == game.state
    snapshot, last = codec.decode_snapshot(codec.encode_snapshot(game.state, "h"))
    assert snapshot == game.state and last == "h"
    assert state_hash(snapshot) == state_hash(game.state)


def test_commands_decode_from_json_with_their_fields() -> None:
    assert codec.decode_command("claim", {"kind": "cut", "parcel": "C1"}) == Cut(parcel="C1")
    assert codec.decode_command("claim", {"kind": "replant", "parcel": "C1", "species": "df"}) == Replant(
        parcel="C1", species="df"
    )
    assert codec.decode_command("claim", {"kind": "haul"}) == Haul()
    assert set(codec.command_kinds("claim")) >= {
        "cut",
        "haul",
        "replant",
        "farm",
        "harvest",
        "build",
        "cruise",
        "prove_up",
    }


def test_the_example_scenario_runs_with_one_refusal_and_ends_proved_up() -> None:
    lines = [
        json.loads(line)
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    head, commands = lines[0], lines[1:]
    assert head["ruleset"] == "claim" and 15 <= len(commands) <= 30
    game = ClaimGame.__new__(ClaimGame)
    game.room, game.owner, game.state, game.events, game.now = (
        head["room"],
        head["player"],
        None,
        [],
        head["time_ms"],
    )
    game.do(
        room.CreateRoom(ruleset="claim", options=head["options"], challenge=head["challenge"]),
        player=head["player"],
        at=head["time_ms"],
    )
    refused = []
    for line in commands:
        try:
            game.do(line["command"], player=line["player"], at=line["time_ms"])
        except Exception as error:  # noqa: BLE001 - the scenario names its refusals
            refused.append(getattr(error, "code", repr(error)))
    assert refused and all(code.startswith("claim.") for code in refused)
    assert game.state.ended and game.claim.final_score is not None
