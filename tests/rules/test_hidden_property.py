"""Hidden information as a property: whatever the hidden values, an outsider receives the same events, views,
scores and feed messages (up to the first step where the rules make the difference public)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hidden_games import (
    SEED_A,
    SEED_B,
    VARIATIONS,
    alike,
    differing,
    divergence,
    play_a,
    plugins_known,
    replay,
)

from almanac.events import registry

GAMES = {"realm": 6, "board": 8, "sectors": 4, "claim": 3, "realm-bots": 3, "realm-v2": 6, "board-v2": 8,
         "dice_duel": 6}
MOVES = {"realm": 60, "board": 40, "sectors": 40, "claim": 40, "realm-bots": 60, "realm-v2": 60, "board-v2": 40,
         "dice_duel": 10}
# At least this many events per rule-set must have been compared.
MIN_EVENTS = {"realm": 40, "board": 15, "sectors": 5, "claim": 10, "realm-bots": 40, "realm-v2": 40, "board-v2": 15,
              "dice_duel": 8}
# Rule-sets the session knows that need no twin games, and why. Each must declare nothing hidden (its Decider's
# ``secrets`` empty: every field of every event public), read from the rule-set itself: one that declares a secret
# needs twins whatever this says. What is left hidden in such a room is the room's secret seed, which the kernel
# keeps alike for every rule-set (room.created's commitment; the seed revealed at the end) and every variation
# whose seed varies compares.
NOTHING_HIDDEN = {
    "counter": "the kernel tests' tiny rule-set (tests/counter_ruleset.py, registered by conftest): no secrets, "
               "every roll public, the view a part of its public events; no policy to play twins with",
    "bazaar": "the projection tests' trading rule-set (tests/projections/projection_games.py, registered when "
              "imported): no secrets, its dice and transfers public in its events",
}


@pytest.fixture(scope="module", autouse=True)
def plugins() -> Iterator[list[str]]:
    """The example plugins' rule-sets (the dice duel) known here whether or not this environment installed them."""
    with plugins_known() as names:
        yield names


def test_every_rule_set_version_the_session_knows_has_twin_games(plugins: list[str]) -> None:
    """Given every rule-set version the registry knows (installed, the example plugins, and those the test session
    registered), when each is looked up among the twin-game variations, then each is played as twins by one (its
    exact version), or declares nothing hidden and is exempt for a stated reason: a version installed tomorrow
    fails here until it has twins."""
    known = {manifest.ref: manifest for manifest in registry.all_manifests()}
    assert {f"{name}@1" for name in plugins} <= set(known), "an example plugin's rule-set was not loaded"
    twinned = {registry.manifest(variation.ruleset).ref for variation in VARIATIONS.values()}
    # What users get (installed, the example plugins) is played as twins or exempt by name; a rule-set some test
    # module registered for its own story (which of them this worker imported varies) only when it declares secrets.
    shipped = set(registry.installed()) | set(plugins)
    missing = sorted(ref for ref, manifest in known.items()
                     if ref not in twinned and registry.parse(ref)[0] not in NOTHING_HIDDEN
                     and (registry.parse(ref)[0] in shipped or manifest.decider.secrets))
    assert not missing, f"no twin games (tests/hidden_games.py VARIATIONS) for {missing}"
    exempt_yet_hiding = sorted(ref for ref, manifest in known.items()
                               if ref not in twinned and manifest.decider.secrets)
    assert not exempt_yet_hiding, f"declared to hide nothing, yet they declare secrets: {exempt_yet_hiding}"
    # Each variation's counts are set here (a new one fails at its first lookup otherwise).
    assert set(VARIATIONS) == set(GAMES) == set(MOVES) == set(MIN_EVENTS)


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
