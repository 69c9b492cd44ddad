"""`bench e2e`'s schedule: in step every room plays the same move; out of step the rooms spread over the game."""

from __future__ import annotations

from collections import Counter

from almanac.services.bench.e2e import RoomSlots

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
