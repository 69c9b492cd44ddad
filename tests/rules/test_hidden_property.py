"""Hidden information as a property: whatever the hidden values, an outsider receives the same events, views,
scores and feed messages (up to the first step where the rules make the difference public)."""

from __future__ import annotations

import pytest
from hidden_games import SEED_A, SEED_B, VARIATIONS, alike, differing, divergence, play_a, replay

GAMES = {"realm": 6, "board": 8, "sectors": 4, "claim": 3, "realm-bots": 3}
MOVES = {"realm": 60, "board": 40, "sectors": 40, "claim": 40, "realm-bots": 60}
# At least this many events per rule-set must have been compared.
MIN_EVENTS = {"realm": 40, "board": 15, "sectors": 5, "claim": 10, "realm-bots": 40}


@pytest.mark.parametrize("ruleset", sorted(VARIATIONS))
def test_an_outsider_receives_the_same_whatever_the_hidden_values(ruleset: str) -> None:
    """Given a game played by the rule-set's policy for three players, when the same commands are played
    again in a room with another secret seed and other dice for the owner's hidden rolls, then everything
    the outsider receives after every step is identical, up to the first step where the rules make the
    difference public; and in every game some compared events really differed."""
    variation = VARIATIONS[ruleset]
    compared_steps = compared_events = 0
    differing_per_game: list[int] = []
    stops: list[str] = []
    covered: set[str] = set()
    for number in range(GAMES[ruleset]):
        steps = play_a(variation, number, MOVES[ruleset])
        run_a = replay(variation, steps, number, SEED_A)
        run_b = replay(variation, steps, number, SEED_B, like=run_a)
        differing_per_game.append(0)
        for index, (a, b) in enumerate(zip(run_a, run_b, strict=True)):
            reason = divergence(variation, a, b)
            if reason is not None:
                stops.append(f"game {number} step {index}/{len(steps)}: {reason}")
                break
            assert alike(a, b), (ruleset, number, index, steps[index])
            compared_steps += 1
            compared_events += len(a.envelopes)
            covered.update(e.type for e in a.envelopes)
            differing_per_game[-1] += differing(a, b)
        else:
            stops.append(f"game {number}: identical to the end ({len(steps)} steps)")
    print(f"{ruleset}: {compared_steps} steps, {compared_events} events compared, "
          f"differing hidden values per game {differing_per_game}; stops: {stops}")
    assert compared_events >= MIN_EVENTS[ruleset] * GAMES[ruleset], stops
    assert min(differing_per_game) > 0, (differing_per_game, stops)
    assert variation.covers <= covered, f"never compared: {sorted(variation.covers - covered)}; stops: {stops}"
