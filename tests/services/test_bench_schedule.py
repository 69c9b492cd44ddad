"""`bench e2e`'s schedule: in step every room plays the same move; out of step the rooms spread over the game; with
``--overload`` a multiple of the achieved rate between two capacity runs."""

from __future__ import annotations

from collections import Counter

from almanac.bench.e2e import RoomSlots, _with_overload

MOVES = 17


def _play(slots: RoomSlots, cycles: int) -> tuple[list[Counter], dict[int, list[int]]]:
    """Every command accepted: per cycle (one command to each slot), how many slots played each move; per room,
    the moves it played, those before the clock included."""
    done = list(slots.played_before)
    played = {room: list(range(count)) for room, count in enumerate(slots.played_before)}
    per_cycle = []
    for _ in range(cycles):
        moves: Counter = Counter()
        for slot in range(len(slots.rooms)):
            room = slots.playing(slot, done, MOVES)
            moves[done[room]] += 1
            played[room].append(done[room])
            done[room] += 1
        per_cycle.append(moves)
    return per_cycle, played


def test_in_step_every_room_plays_the_same_move_at_the_same_moment():
    # Given 34 slots in step, when the schedule sends one game's moves to each
    slots = RoomSlots.in_step(34)
    per_cycle, played = _play(slots, MOVES)
    # Then each cycle is one move played by all 34 rooms (so all end a season together), and no room moved before
    assert per_cycle == [Counter({move: 34}) for move in range(MOVES)]
    assert slots.room_count == 34 and all(moves == list(range(MOVES)) for moves in played.values())


def test_out_of_step_the_rooms_are_spread_evenly_over_the_game_at_every_moment():
    # Given 34 slots out of step (slot j's first room played j % 17 moves before the clock, a fresh room after it)
    slots = RoomSlots.out_of_step(34, MOVES)
    assert slots.room_count == 34 + 32  # the two slots whose room starts at move 0 need no second room
    # When the schedule sends one game's moves to each slot
    per_cycle, played = _play(slots, MOVES)
    # Then at every moment each of the game's 17 moves is played by exactly two rooms
    assert per_cycle == [Counter({move: 2 for move in range(MOVES)})] * MOVES
    # and every room played its moves in order from the first, none past the game's end
    assert all(moves == list(range(len(moves))) and len(moves) <= MOVES for moves in played.values())
    # and 34 rooms start from their first move during the run (two slots' first rooms, and the 32 fresh rooms
    # that follow a finished game), so the rooms' first commands are spread over the run too
    assert sum(1 for room, moves in played.items() if slots.played_before[room] == 0 and moves) == 34


def test_the_overload_run_offers_a_multiple_of_the_achieved_rate_between_two_capacity_runs(capsys):
    """``bench e2e --overload 3``: capacity at the offered rate, then three times what it achieved, then the rate
    again; the goodput is judged against the mean of the two capacities around it (the machine drifts)."""
    offered: list[int] = []
    achieved = iter([800.0, 600.0, 1000.0, 500.0])

    def run(rate: int) -> dict:
        offered.append(rate)
        return {"offered_per_s": rate, "achieved_per_s": next(achieved), "shed": 10, "accepted_p99_ms": 40.0,
                "cpu_s": {}}

    figures = _with_overload(run, 1000, 3)
    assert offered == [1000, 2400, 1000]
    assert figures["overload"]["capacity_per_s"] == 900.0 and figures["overload"]["ratio"] == 600 / 900
    assert "0.67 of their mean" in " ".join(capsys.readouterr().out.split())
    assert _with_overload(run, 500, 0)["offered_per_s"] == 500 and offered[-1] == 500  # without: one run only


def test_an_overload_refusal_is_counted_under_the_rule_that_gave_it_without_its_numbers():
    """Given the gateway's 503s for each admission rule, when the bench counts them, then each kind names its
    rule (not the moment's numbers), so a collapsed run says which rule shed the load."""
    from almanac.bench.e2e import failure_kind
    from almanac.services.gateway.errors import overloaded

    assert failure_kind(503, overloaded("32 commands in flight in this gateway process").body()) == \
        failure_kind(503, overloaded("31 commands in flight in this gateway process").body()) == \
        "503 overloaded (N commands in flight in this gateway process)"
    lag = failure_kind(503, overloaded("requests wait 61 ms before this gateway process starts them").body())
    assert lag == "503 overloaded (requests wait N ms before this gateway process starts them)"
    assert failure_kind(429, {"code": "rate_limited", "message": "slow down"}) == "429 rate_limited"
