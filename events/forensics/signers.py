"""Who signed in a room: its dice scheme, the seats that registered a key and those that did not, and what that leaves.

One computation for `almanac verify` (services/forensics/verify.py) and the bundle verifier (bundle_check.py); the
console's second verifier (services/gateway/console/verify.js, ``seatsOf``) writes the same fields and notes, word
for word, and tests/gateway/test_second_verifier.py holds them to it. A verdict that says VERIFIED for a room whose
seats did not sign must say so: the chain and the rules cannot tell a player's command from one the operator sent
with a token it minted for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from almanac.events import codec
from almanac.events.dice import COMMAND_BOUND
from almanac.events.envelope import Envelope
from almanac.events.forensics.redecide import signed_joins
from almanac.events.step import CommandRecord


class Seats(msgspec.Struct, frozen=True, kw_only=True):
    """What a room's chain and command records say about who signed (docs/dice.md "Signed seats")."""

    dice_scheme: int
    # Seats whose join registered an Ed25519 key (scheme 3): each of their commands is decided only with a valid
    # signature of that key (events.step.check_signature).
    signing_players: list[str]
    # Seats that registered no key (every seat of a scheme 1 or 2 room): whoever holds a token for them could
    # have sent their commands, the operator included.
    unsigned_players: list[str]
    # Of the signing seats: whose join carries the registered key's signature over the join (events.signing
    # .join_bytes), and whose does not (the operator could have registered a key of its own for them).
    signed_joins: list[str]
    unsigned_joins: list[str]
    # The caveats, in the words both verifiers print.
    notes: list[str]


def scheme_note(scheme: int) -> str:
    """The caveat of a room whose dice are keyed by version and whose commands nobody signs (schemes 1 and 2)."""
    return (f"dice scheme {scheme}: rolls are keyed by room and version and no command is signed, so the operator "
            "could predict rolls, choose which command lands on which version and act for a player (docs/dice.md); "
            "scheme 3 rooms prevent that")


def seats(scheme: int, envelopes: Sequence[Envelope], records: Iterable[CommandRecord]) -> Seats:
    """The seats of ``envelopes`` (a room's chain) by whether they sign, their joins' signatures checked against the
    ``records`` that decided them; pure (no clock, no I/O)."""
    seated: list[str] = []
    keys: dict[str, str] = {}
    for envelope in envelopes:
        if envelope.type == "room.player_joined":
            joined = codec.decode_event(envelope)
            seated.append(joined.player)
            if joined.public_key:
                keys[joined.player] = joined.public_key
    signed = signed_joins(envelopes, records) & set(keys)
    unsigned = sorted(set(seated) - set(keys))
    unsigned_joins = sorted(set(keys) - signed)
    notes = [] if scheme == COMMAND_BOUND else [scheme_note(scheme)]
    if unsigned_joins:
        notes.append(f"joins that registered a key unsigned ({', '.join(unsigned_joins)}): nothing but the join's own "
                     "answer shows the key is that player's (the operator could have registered its own)")
    if unsigned:
        notes.append(f"players who do not sign ({', '.join(unsigned)}): the operator could have acted for them "
                     "with a token it minted")
    return Seats(dice_scheme=scheme, signing_players=sorted(keys), unsigned_players=unsigned,
                 signed_joins=sorted(signed), unsigned_joins=unsigned_joins, notes=notes)


def seats_line(found: Seats) -> str:
    """The seats in one line, as a verdict prints them."""
    return (f"dice scheme {found.dice_scheme}; seats that sign their commands: "
            f"{', '.join(found.signing_players) or 'none'}; seats that do not: "
            f"{', '.join(found.unsigned_players) or 'none'}")
