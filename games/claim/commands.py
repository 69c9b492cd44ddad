"""The claim's commands: what the owner may ask of the claim."""

from __future__ import annotations

from typing import Annotated

import msgspec

from almanac.events.manifest import Key, free

# A parcel as a person types it: case and spaces are forgiven (" c1 ", "c 1" and "C1" are one parcel).
# Decoding writes it in its one spelling (``canonical_parcel``), so the rules, the log and every replay
# see "C1"; a name that is no parcel is the rules' refusal (``claim.unknown_parcel``).
ParcelName = Annotated[str, msgspec.Meta(pattern=r"^ *[A-Za-z0-9][A-Za-z0-9_.:\- ]{0,63}(?!\n)$", max_length=64,
                                         description="a parcel, A1..H8 (case and spaces forgiven); at most 64")]
# For the API documents: no list (case and spaces are forgiven), said so on purpose (events.schema).
Parcel = Annotated[ParcelName, free("a parcel as a person types it, A1..H8")]


def canonical_parcel(name: str) -> str:
    """A parcel's one spelling: no spaces, upper case (" c 1 " -> "C1")."""
    return name.replace(" ", "").upper()


def _write_parcel_canonically(command: msgspec.Struct) -> None:
    # msgspec runs __post_init__ after decoding a frozen Struct, before anything reads it
    msgspec.structs.force_setattr(command, "parcel", canonical_parcel(command.parcel))


class Cut(msgspec.Struct, frozen=True, kw_only=True, tag="cut", tag_field="kind",
          forbid_unknown_fields=True):
    """Fell a parcel's timber; its logs go to the landing deck."""

    parcel: Parcel
    __post_init__ = _write_parcel_canonically


class Haul(msgspec.Struct, frozen=True, kw_only=True, tag="haul", tag_field="kind",
          forbid_unknown_fields=True):
    """Send the wagon from the landing with the whole deck, to sell it at the mill."""


class Replant(msgspec.Struct, frozen=True, kw_only=True, tag="replant", tag_field="kind",
          forbid_unknown_fields=True):
    """Plant a bare parcel with a species its zone allows."""

    parcel: Parcel
    __post_init__ = _write_parcel_canonically
    species: Key


class Farm(msgspec.Struct, frozen=True, kw_only=True, tag="farm", tag_field="kind",
          forbid_unknown_fields=True):
    """Sow hay on a meadow parcel (never the landing)."""

    parcel: Parcel
    __post_init__ = _write_parcel_canonically


class Harvest(msgspec.Struct, frozen=True, kw_only=True, tag="harvest", tag_field="kind",
          forbid_unknown_fields=True):
    """Cut and sell a ripe hay crop."""

    parcel: Parcel
    __post_init__ = _write_parcel_canonically


class Build(msgspec.Struct, frozen=True, kw_only=True, tag="build", tag_field="kind",
          forbid_unknown_fields=True):
    """Put up a cabin, barn or mill where the rules allow."""

    parcel: Parcel
    __post_init__ = _write_parcel_canonically
    building: Key


class Cruise(msgspec.Struct, frozen=True, kw_only=True, tag="cruise", tag_field="kind",
          forbid_unknown_fields=True):
    """Cruise the timber: record the standing volume and value at the server's time."""


class ProveUp(msgspec.Struct, frozen=True, kw_only=True, tag="prove_up", tag_field="kind",
          forbid_unknown_fields=True):
    """Prove up the claim: the game ends and the score is final."""


COMMANDS: tuple[type, ...] = (Cut, Haul, Replant, Farm, Harvest, Build, Cruise, ProveUp)
