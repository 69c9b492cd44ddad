"""The claim's commands: what the owner may ask of the claim."""

from __future__ import annotations

import msgspec


class ClaimOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Creation options. ``owner`` defaults to the creator; ``block`` to the room id.

    Unknown fields are refused, so nobody believes they chose the staking time (the server does).
    """

    owner: str = ""
    block: str = ""


class Cut(msgspec.Struct, frozen=True, kw_only=True, tag="cut", tag_field="kind"):
    """Fell a parcel's timber; its logs go to the landing deck."""

    parcel: str


class Haul(msgspec.Struct, frozen=True, kw_only=True, tag="haul", tag_field="kind"):
    """Send the wagon from the landing with the whole deck, to sell it at the mill."""


class Replant(msgspec.Struct, frozen=True, kw_only=True, tag="replant", tag_field="kind"):
    """Plant a bare parcel with a species its zone allows."""

    parcel: str
    species: str


class Farm(msgspec.Struct, frozen=True, kw_only=True, tag="farm", tag_field="kind"):
    """Sow hay on a meadow parcel (never the landing)."""

    parcel: str


class Harvest(msgspec.Struct, frozen=True, kw_only=True, tag="harvest", tag_field="kind"):
    """Cut and sell a ripe hay crop."""

    parcel: str


class Build(msgspec.Struct, frozen=True, kw_only=True, tag="build", tag_field="kind"):
    """Put up a cabin, barn or mill where the rules allow."""

    parcel: str
    building: str


class Cruise(msgspec.Struct, frozen=True, kw_only=True, tag="cruise", tag_field="kind"):
    """Cruise the timber: record the standing volume and value at the server's time."""


class ProveUp(msgspec.Struct, frozen=True, kw_only=True, tag="prove_up", tag_field="kind"):
    """Prove up the claim: the game ends and the score is final."""


COMMANDS: tuple[type, ...] = (Cut, Haul, Replant, Farm, Harvest, Build, Cruise, ProveUp)
