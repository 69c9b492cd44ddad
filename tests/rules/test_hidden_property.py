"""Hidden information as a property: whatever the hidden values, an outsider receives the same events, views,
scores and feed messages (up to the first step where the rules make the difference public)."""

from __future__ import annotations

import pytest
from hidden_games import SEED_A, SEED_B, VARIATIONS, divergence, play_a, replay

GAMES = {"realm": 6, "board": 8, "sectors": 4, "claim": 3}
MOVES = {"realm": 60, "board": 40, "sectors": 40, "claim": 40}
# At least this many events per rule-set must have been compared while their stored forms differed.
MIN_EVENTS = {"realm": 40, "board": 15, "sectors": 5, "claim": 10}
DIFFERING_COMPARED = {"realm": 30, "board": 1, "sectors": 0, "claim": 0}


@pytest.mark.parametrize("ruleset", sorted(VARIATIONS))
def test_an_outsider_receives_the_same_whatever_the_hidden_values(ruleset: str) -> None:
    """Given a game played by the rule-set's policy for three players, when the same commands are played
    again with other dice for the owner's hidden rolls, then everything the outsider receives after every
    step is identical, up to the first step where the rules make the difference public."""
    variation = VARIATIONS[ruleset]
    compared_steps = compared_events = differing_compared = 0
    stops: list[str] = []
    for number in range(GAMES[ruleset]):
        steps = play_a(variation, number, MOVES[ruleset])
        run_a = replay(variation, steps, number, SEED_A)
        run_b = replay(variation, steps, number, SEED_B, like=run_a)
        for index, (a, b) in enumerate(zip(run_a, run_b, strict=True)):
            reason = divergence(variation, a, b)
            if reason is not None:
                stops.append(f"game {number} step {index}/{len(steps)}: {reason}")
                break
            assert a.seen == b.seen, (ruleset, number, index, steps[index])
            compared_steps += 1
            compared_events += len(a.envelopes)
            differing_compared += sum(ea.payload != eb.payload for ea, eb in zip(a.envelopes, b.envelopes, strict=True))
        else:
            stops.append(f"game {number}: identical to the end ({len(steps)} steps)")
    print(f"{ruleset}: {compared_steps} steps, {compared_events} events compared, "
          f"{differing_compared} with differing hidden values; stops: {stops}")
    assert compared_events >= MIN_EVENTS[ruleset] * GAMES[ruleset], stops
    assert differing_compared >= DIFFERING_COMPARED[ruleset], stops
