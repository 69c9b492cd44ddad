"""docs/dice.md's "Client side in Python" derives the key a new room's dice are drawn with (scheme 3, command-bound)."""

from __future__ import annotations

import re
from pathlib import Path

from signed_rooms import ANN_NONCE, SEED, Room

from almanac.events.dice import Dice, command_key
from almanac.storage.memory_store import MemoryEventStore

DOC = (Path(__file__).resolve().parents[2] / "docs" / "dice.md").read_text()


def the_docs_derivation() -> dict:
    """The example block that derives a command's key, run as a player would run it (with their seed and nonce)."""
    section = DOC[DOC.index("## Client side in Python"):]
    [block] = [code for code in re.findall(r"```python\n(.*?)```", section, re.S) if "def command_dice_key" in code]
    namespace = {"seed": SEED, "nonce": ANN_NONCE}
    exec(block, namespace)  # noqa: S102 - the documentation's own example, run as its reader would
    return namespace


async def test_the_docs_example_derives_the_key_of_the_roll_a_new_room_recorded():
    # Given a new room (the engine's default scheme, 3) named as in the doc, where ann's client sent command "roll-1"
    room = await Room(MemoryEventStore(), room="my-room").open(seed=SEED, ann_nonce=ANN_NONCE)
    body = {"kind": "roll", "dice": 3}
    recorded = await room.roll("my-room:ann:roll-1", "ann", dice=3)  # the id the gateway records for "roll-1"

    # When ann derives the command's key with the doc's example, from what she kept and the reveal
    example = the_docs_derivation()
    key = example["command_dice_key"](SEED, "my-room", "ann", ANN_NONCE, "roll-1", body)

    # Then it is the engine's key, and its draws at version 0 are the roll the room recorded
    assert key == command_key(SEED, "ann", ANN_NONCE, "my-room:ann:roll-1", body)
    assert Dice(key, "my-room", 0).d6(3) == recorded
    # and the example's own last line is the same derivation for its realm command
    assert example["key"] == command_key(SEED, "ann", ANN_NONCE, "my-room:ann:mine-1", {"kind": "mine", "ore": "iron"})
