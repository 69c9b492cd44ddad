"""Realm rooms played through the engine's write path for the forensics tests: mining tries, seasons ended."""

from __future__ import annotations

from typing import Any

from almanac.events import codec
from almanac.events.step import replay
from almanac.services.room_service import CommandRecord, Outcome, RoomService
from almanac.storage.base import EventStore
from almanac.storage.loader import RoomLoader


class RealmTable:
    """One realm room (alice and bob) driven command by command through a RoomService."""

    def __init__(self, store: EventStore, room: str, snapshot_every: int = 10) -> None:
        self.store = store
        self.room = room
        self.service = RoomService(store, snapshot_every=snapshot_every)
        # What forensics reads through: a reader's loader on the store, as a process's runtime hands it its own.
        self.loader = RoomLoader(store, 0)
        self.sent = 0

    async def send(self, player: str, body: dict[str, Any], room: str | None = None) -> Outcome:
        self.sent += 1
        return await self.service.handle(CommandRecord(
            command_id=f"{room or self.room}-c{self.sent}", room=room or self.room, player=player,
            server_time_ms=1_000 * self.sent, body=body))

    async def create(self, ruleset: str = "realm@1", years: int = 3) -> None:
        created = await self.send("alice", {"kind": "create_room", "ruleset": ruleset,
                                            "options": {"players": ["alice", "bob"], "villages": 1, "years": years}})
        assert created.accepted, created.error
        await self.join(self.room)

    async def join(self, room: str) -> None:
        for player in ("alice", "bob"):
            joined = await self.send(player, {"kind": "join_room"}, room)
            assert joined.accepted, joined.error

    async def mine(self, player: str, room: str | None = None, ore: str = "gold") -> Outcome:
        """A mining try; when the player has no action left this season, both end their turns and it tries again."""
        outcome = await self.send(player, {"kind": "mine", "ore": ore}, room)
        if not outcome.accepted and outcome.error["code"] in ("realm.no_actions_left", "realm.turn_ended"):
            for seat in ("alice", "bob"):
                ended = await self.send(seat, {"kind": "end_turn"}, room)
                assert ended.accepted or ended.error["code"] == "realm.turn_ended", ended.error
            outcome = await self.send(player, {"kind": "mine", "ore": ore}, room)
        assert outcome.accepted, outcome.error
        return outcome

    async def play_mining(self, rounds: int, room: str | None = None) -> None:
        for _ in range(rounds):
            for player in ("alice", "bob"):
                await self.mine(player, room)


def mined(outcome: Outcome) -> Any:
    """The realm.mined event of a mining try's outcome."""
    (event,) = [codec.decode_event(e) for e in outcome.envelopes if e.type == "realm.mined"]
    return event


async def mining_tries(store: EventStore, room: str) -> list[tuple[int, Any]]:
    """(version, realm.mined event) of every mining try in the room, in order."""
    return [(e.version, codec.decode_event(e)) for e in await store.read(room) if e.type == "realm.mined"]


async def fold_each_version(store: EventStore, room: str) -> list[Any]:
    """Brute force: the room's state at every version 1..latest, each folded from scratch (not for forks)."""
    envelopes = await store.read(room)
    return [replay(envelopes[:version]) for version in range(1, len(envelopes) + 1)]
