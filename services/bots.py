"""Bots as seats: a server-side process plays the seats handed to bots through the gateway's public API, as those seats.

A seat is handed to a bot by writing it to its shard's bot hash (``Keys.bots``: "room\\x1fseat" -> JSON), at room
creation (the create request's ``bots``), later (``almanac bots add ROOM --seat NAME``, ``POST /rooms/{room}/bots``)
or by the room itself (``room.seat_to_bot``: a player left it, or it missed the room's deadlines; ``hand_over``).
`almanac bots` then, every round, for each bot seat of the shards it serves:

- reads the room's version from Redis (the registry and this poll are what it reads there); a room that did not
  move since the seat last acted is skipped;
- if the seat is not taken yet (the room's public summary, ``GET /rooms/{room}``), joins it as the seat's player,
  ``POST /rooms/{room}/join`` under a command id derived from the room and seat with the deployment's bot key
  (``bot_join_client_id``: the log then says which seats a bot took, and a seat a person took is never played);
- else reads the seat's view with the seat's token (``GET /rooms/{room}/view``: exactly what the API gives that
  seat, never the state, so a bot cannot read what the seat may not see), asks the rule-set's seat bot
  (``RuleSet.seat_bot``, in the rule-set's own package) for a command from it (``decide_seen``), and sends it as the
  seat, ``POST /rooms/{room}/commands``.

The gateway admits, decides (or queues for the shard's engine), dedupes and logs it like any player's command, and
replay and ``verify`` need nothing new; with the gateway down nothing is sent, by any other way either. The seat's
token is the join's answer (after a restart: the same join resent, which the gateway's dedupe answers with the
first outcome and a token), or, for a seat the room's log handed to a bot, minted with the deployment's token
secret (``deployment_signer``, as `almanac token --room --player`). A command's id is derived from (room, seat,
version, attempt), and the bot's own dice from the same keyed with the deployment's bot key (``dice_key``: derived
from the commitment secret, so a rival cannot recompute a bot's choices, and another deployment draws others): a
bots process restarted (or two racing) sends the same command under the same id, which the gateway's dedupe
answers with the first outcome. Progress lives in the log only; the process keeps nothing that a restart needs.
Bounded: at most ``ALMANAC_MAX_BOT_SEATS`` bot seats in the deployment (a caller's ask past it is refused, 429
``bot_seats_full``, ``admit_seat``; a seat the room itself hands over is never refused, but counts);
``max_rooms`` bot seats read and played per process per round (a cursor over the shards' hashes, HSCAN: the rest
wait their turn, logged), ``PLAYS_AT_ONCE`` of them in flight at the gateway at once; ``rate`` commands per second
across the process (a token bucket); at most ``ATTEMPTS`` refused tries per seat and version; and a seat whose bot
join was refused is dropped (it can never play).

A room may set its bots a move delay (``set_delay``: `almanac bots add --delay MS`, or the create request's
``bot_delay_ms``; at most ``MAX_DELAY_MS``): its
bot seats send nothing until ``delay`` after the room's newest event (its ``server_time_ms``, the log's own clock),
so a bot's command is recorded no sooner than that after the room moved to it, and, the process playing it, within
about a round after (``DELAY_MARGIN_MS``; tests/services/test_bot_delay.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from almanac.client import ApiError, Held
from almanac.client.aio import AsyncClient
from almanac.client.seat_bot import Policy
from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.events.room import RoomState, has_bot_policy
from almanac.services import bootstrap
from almanac.services.bus import internal_command_id
from almanac.services.checkpoints import commit_secret
from almanac.services.logging import get_logger
from almanac.services.redis_client import read_or_stop
from almanac.services.settings import Settings
from almanac.storage.keys import Keys, bot_pending_key, bot_removed_key, bot_seats_key, bot_wake_key

log = get_logger("almanac.bots")
SEPARATOR = "\x1f"
PLAYER_JOINED = "room.player_joined"
SEAT_TO_BOT = "room.seat_to_bot"
SEAT_RECLAIMED = "room.seat_reclaimed"
ATTEMPTS = 8  # refused tries at one version before the seat waits for the room to move
RETRY_AFTER_MS = 2_000  # a command sent that moved nothing by then counts as refused (or lost): try another
DICE_DOMAIN = b"almanac seat bot dice v1"  # separates the bots' key from every other use of the commitment secret


MAX_DELAY_MS = 60_000  # a room's bots wait at most a minute: a longer pause is the clock's business (deadlines)
# How late past its delay a bot's command may be recorded: a round's interval (0.1 s) and the engine's decision,
# with room for a loaded host. Stated for operators (docs/bots.md) and held by tests/services/test_bot_delay.py.
DELAY_MARGIN_MS = 2_000


async def set_delay(client: Any, keys: Keys, room: str, delay_ms: int) -> None:
    """Set ``room``'s bot move delay (0: none); refused past ``MAX_DELAY_MS``, as any unbounded input is."""
    if not 0 <= delay_ms <= MAX_DELAY_MS:
        raise ValueError(f"a bot delay is 0 to {MAX_DELAY_MS} ms, not {delay_ms}")
    key = keys.bot_delays(keys.shard(room))
    await (client.hset(key, room, delay_ms) if delay_ms else client.hdel(key, room))


WAKE_KEPT = 100  # entries the wake stream keeps (about: MAXLEN ~); a reader only needs the newest


async def _wake(client: Any, keys: Keys) -> None:
    await client.xadd(bot_wake_key(keys.prefix), {"w": "1"}, maxlen=WAKE_KEPT, approximate=True)


# Take bot seats against the deployment's bound in one step (KEYS[1]: the deployment's bot seats, bot_seats_key;
# KEYS[2]: the reservations awaiting a command's outcome, ``bot_pending_key``; then each member's removal mark,
# ``bot_removed_key``, in the members' order; one slot). ARGV: the bound (-1: none, a seat the room's log handed over
# must be played), when (ms), the command whose outcome decides the seats ('' none), whether the room's log handed
# them ('1': ``sync_bound`` never drops such a seat, it completes it), whether a removed seat is left alone ('1':
# ``sync_bound``, which read the seat before it was removed; else the seats are asked for anew and their marks
# cleared), the room's bot move delay to set once the command is recorded ('' none: kept with a pending seat, for
# ``settle_pending``), then the members. The members not held yet are taken all or none: none when they would pass the bound.
# Answers [taken, held after] ([-1, held] when refused), then per member 1 (taken), 0 (held already) or 2 (removed:
# left alone).
RESERVE_SCRIPT = """
local bound = tonumber(ARGV[1])
local fresh = {}
local removed = {}
for i = 7, #ARGV do
  if ARGV[5] == '1' and redis.call('EXISTS', KEYS[i - 4]) == 1 then removed[i] = true
  elseif redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then fresh[#fresh + 1] = i end
end
local held = redis.call('HLEN', KEYS[1])
if bound >= 0 and #fresh > 0 and held + #fresh > bound then return {-1, held} end
local flags = {}
for i = 7, #ARGV do
  if removed[i] then
    flags[i - 6] = 2
  else
    flags[i - 6] = 0
    redis.call('DEL', KEYS[i - 4])  -- asked for anew: a removal before this ask no longer holds
    if ARGV[4] == '1' then  -- a seat held already (a leave's, say) that the log has now handed over: marked so
      local value = redis.call('HGET', KEYS[1], ARGV[i])
      if value then
        local ok, entry = pcall(cjson.decode, value)
        if ok and type(entry) == 'table' and not entry.log then
          entry.log = true
          redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(entry))
        end
      end
    end
  end
end
local added = tonumber(ARGV[2])
for _, i in ipairs(fresh) do
  local room, seat = string.match(ARGV[i], '^(.-)\\031(.*)$')
  local entry = {room = room, seat = seat, added_ms = added}
  if ARGV[3] ~= '' then
    entry.command = ARGV[3]
    local waiting = {command = ARGV[3], added_ms = added}
    if ARGV[6] ~= '' then waiting.delay_ms = tonumber(ARGV[6]) end
    redis.call('HSET', KEYS[2], ARGV[i], cjson.encode(waiting))
  end
  if ARGV[4] == '1' then entry.log = true end
  redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(entry))
  flags[i - 6] = 1
end
return {#fresh, held + #fresh, unpack(flags)}
"""
# Drop members whose value is still the one read (KEYS[1]: bot_seats_key); ARGV: member, value, member, value...
# A seat taken again since (a new added_ms) stays.
PRUNE_SCRIPT = """
local dropped = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    dropped = dropped + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return dropped
"""
# Settle reservations awaiting a command (KEYS[1]: bot_seats_key, KEYS[2]: bot_pending_key). ARGV: how ('release' or
# 'confirm'), then member, pending value, member, pending value...: a member still awaiting that same command is
# given back (release: the command was refused, or never applied; unless the room's log has handed it over since,
# ``hand_over``) or kept for good (confirm: the room recorded it). Answers how many were settled.
SETTLE_SCRIPT = """
local settled = 0
for i = 2, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[2], ARGV[i])
    if ARGV[1] == 'release' then
      local value = redis.call('HGET', KEYS[1], ARGV[i])
      local ok, entry = pcall(cjson.decode, value or '')
      if not (ok and type(entry) == 'table' and entry.log) then redis.call('HDEL', KEYS[1], ARGV[i]) end
    end
    settled = settled + 1
  end
end
return settled
"""
IDLE_WAIT_S = 1.0  # the longest a bots process with no seat waits for the wake stream (below the socket timeout)
SYNC_EVERY_MS = 60_000  # how often the bots process matches the bound's count to the shards' seats
# A seat taken in the bound but in no shard's hash for this long was left half-done; taken for a command answered
# 202 and still undecided, its command is taken never to have reached a stream (no tighter bound: settle_pending).
RESERVATION_GRACE_MS = 600_000


def _full(held: int, max_seats: int) -> SeatRefused:
    return SeatRefused(429, "bot_seats_full", f"the bots hold {held} seats of at most {max_seats}; try later")


async def reserve_seats(client: Any, keys: Keys, seats: list[tuple[str, str]], now_ms: int, *,
                        max_seats: int | None, command: str | None = None, log: bool = False,
                        delay_ms: int = 0) -> list[tuple[str, str]]:
    """Take ``seats`` in the deployment's bot seats (``bot_seats_key``) in one script: all of those not held yet,
    or none (SeatRefused 429 ``bot_seats_full``) when they would pass ``max_seats`` (None: no bound, for a seat
    the room's log handed over). Racing callers cannot pass the bound together: the count and the take are one
    step on one key. Answers the seats this call took (``release_seats`` gives them back). An ask anew: a seat
    removed before (``remove_bot``) is handed again, its removal's mark cleared.

    ``command``: the id (the engine's, ``CommandRecord.command_id``) of the command whose outcome decides the
    seats (a create with bots, a player's leave): the seats this call took await it in ``bot_pending_key`` until the
    caller settles them, or, when the command was answered 202, until its recorded outcome does
    (``settle_pending``, every bots round): given back at once when refused. ``log``: the room's log already
    handed the seats over (``hand_over``): ``sync_bound`` never gives such a seat back, it completes it.
    ``delay_ms``: the room's bot move delay (a create's ``bot_delay_ms``), kept with the seats awaiting
    ``command`` so that whoever confirms them (the gateway, or ``settle_pending`` after a 202) sets it first."""
    taken, _ = await _take(client, keys, seats, now_ms, max_seats=max_seats, command=command, log=log,
                           delay_ms=delay_ms)
    if taken and command:
        await _wake(client, keys)  # a reservation awaiting its command: an idle bots process settles it
    return taken


async def _take(client: Any, keys: Keys, seats: list[tuple[str, str]], now_ms: int, *, max_seats: int | None,
                command: str | None = None, log: bool = False, unless_removed: bool = False, delay_ms: int = 0
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """RESERVE_SCRIPT: (the seats taken, the seats left alone as removed: only with ``unless_removed``)."""
    if not seats:
        return [], []
    members = [f"{room}{SEPARATOR}{seat}" for room, seat in seats]
    script = client.register_script(RESERVE_SCRIPT)
    answer = await script(keys=[bot_seats_key(keys.prefix), bot_pending_key(keys.prefix),
                                *(bot_removed_key(member, keys.prefix) for member in members)],
                          args=[-1 if max_seats is None else max_seats, now_ms, command or "", "1" if log else "0",
                                "1" if unless_removed else "0", delay_ms or "", *members])
    taken, held = int(answer[0]), int(answer[1])
    if taken < 0:
        raise _full(held, int(max_seats or 0))
    flags = [int(flag) for flag in answer[2:]]
    return ([one for one, flag in zip(seats, flags, strict=True) if flag == 1],
            [one for one, flag in zip(seats, flags, strict=True) if flag == 2])


# Give back reservations (KEYS[1]: bot_seats_key, KEYS[2]: bot_pending_key; ARGV: members), except a seat the room's
# log handed over meanwhile.
RELEASE_SCRIPT = """
for i = 1, #ARGV do
  local value = redis.call('HGET', KEYS[1], ARGV[i])
  local ok, entry = pcall(cjson.decode, value or '')
  if not (ok and type(entry) == 'table' and entry.log) then redis.call('HDEL', KEYS[1], ARGV[i]) end
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return #ARGV
"""


async def release_seats(client: Any, keys: Keys, seats: list[tuple[str, str]]) -> None:
    """Give back seats ``reserve_seats`` took for a handover that did not happen (a refused create or leave),
    except a seat the room's log handed over meanwhile (``hand_over``), which stays counted as ``settle_pending``
    keeps it (only ``remove_bot`` gives such a seat back)."""
    if seats:
        await client.register_script(RELEASE_SCRIPT)(keys=[bot_seats_key(keys.prefix), bot_pending_key(keys.prefix)],
                                                     args=[f"{room}{SEPARATOR}{seat}" for room, seat in seats])


async def confirm_seats(client: Any, keys: Keys, seats: list[tuple[str, str]], now_ms: int) -> list[bool]:
    """The room recorded the command ``reserve_seats`` took ``seats`` for: write them to their shards' hashes (the
    bots play them; taken in the bound first, unbounded, should it have lost them) and stop awaiting the command
    (``bot_pending_key``). Answers, per seat, whether it was new to its shard's hash."""
    added = [await add_bot(client, keys, room, seat, now_ms) for room, seat in seats]
    if seats:
        await client.hdel(bot_pending_key(keys.prefix), *[f"{room}{SEPARATOR}{seat}" for room, seat in seats])
    return added


# Delete a shard hash's member if its value is still the one given (KEYS[1]: the shard's Keys.bots; ARGV: member,
# value): a writer takes back its own write only, never one written since.
UNDO_SCRIPT = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


async def _undo(client: Any, keys: Keys, room: str, seat: str, value: str | bytes) -> None:
    await client.register_script(UNDO_SCRIPT)(keys=[keys.bots(keys.shard(room))],
                                              args=[f"{room}{SEPARATOR}{seat}", value])


async def _write_shard_seat(client: Any, keys: Keys, room: str, seat: str, now_ms: int, *, asked: bool) -> bool:
    """Write a seat taken in the bound to its shard's hash, which the bots process plays, then look whether it was
    removed meanwhile (``remove_bot``'s mark): if so, take the write back. True when the seat is new to the hash.

    ``asked``: an ask anew (``add_bot``), which cleared the seat's mark before: its value replaces any there (so
    a sync's write taken back later takes nothing of it back). Else (``sync_bound``, ``settle_pending``, which read
    the seat before writing it) only an absent seat is written. Every value is its own (``w``): a take-back
    compares it."""
    member = f"{room}{SEPARATOR}{seat}"
    value = json.dumps({"room": room, "seat": seat, "added_ms": now_ms, "w": secrets.token_hex(6)})
    shard_hash = keys.bots(keys.shard(room))
    if asked:
        new = bool(await client.hset(shard_hash, member, value))
    elif not await client.hsetnx(shard_hash, member, value):
        return False  # there already: nothing of ours to take back
    else:
        new = True
    if await client.exists(bot_removed_key(member, keys.prefix)):
        await _undo(client, keys, room, seat, value)  # removed since it was read or asked for: the removal wins
        return False
    return new


async def add_bot(client: Any, keys: Keys, room: str, seat: str, now_ms: int, *,
                  max_seats: int | None = None, log: bool = False) -> bool:
    """Hand ``seat`` of ``room`` to a bot; False when it already was. (The bot joins the seat if it is empty;
    a seat a person holds stays theirs: the bot's join is refused, and it never acts for them.)

    The seat is first taken in the deployment's bot seats against ``max_seats`` (one script: racing adds never
    pass it; SeatRefused 429 ``bot_seats_full``; None: unbounded, for a seat the room's log handed over, ``log``),
    then written to its shard's hash, which the bots process plays. The deployment's seats are so always at least
    the shards' (``remove_bot`` deletes in the other order), and the bound counts the former. An ask anew: a seat
    removed before is handed again (a removal racing this add: one of the two wins, ``remove_bot``)."""
    await reserve_seats(client, keys, [(room, seat)], now_ms, max_seats=max_seats, log=log)
    added = await _write_shard_seat(client, keys, room, seat, now_ms, asked=True)
    if added:
        await _wake(client, keys)  # after the write: the woken process finds the seat
    return added


# The end of a removal (KEYS[1]: bot_seats_key, KEYS[2]: bot_pending_key, KEYS[3]: the seat's bot_removed_key; ARGV: member,
# the removal's token): the seat's place in the bound is given back if the mark is still this removal's (an ask
# since cleared it: the seat is handed again, its place stays).
REMOVE_SCRIPT = """
if redis.call('GET', KEYS[3]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""
REMOVED_KEPT_MS = RESERVATION_GRACE_MS  # a process that read a seat before its removal, stalled longer, is dead


async def remove_bot(client: Any, keys: Keys, room: str, seat: str) -> bool:
    """Take ``seat`` of ``room`` from its bot: out of its shard's hash, then its place in the bound given back.
    True when the seat was in its shard's hash.

    The shard's hash and the bound are in two slots (a Cluster: two nodes), which no one script covers, and a
    process that read the seat before the removal may write it back after: ``sync_bound`` (the shards read, then
    the bound: it re-counts a seat it saw played, or completes one the log handed over) and ``settle_pending``. So
    the removal runs (1) mark the seat removed, in the bound's slot (``bot_removed_key``, expiring after
    ``REMOVED_KEPT_MS``), (2) delete it from its shard's hash, (3) give its place in the bound back, if the mark is
    still this removal's; and such a writer (a) takes the seat in the bound unless marked (``RESERVE_SCRIPT``,
    ``unless_removed``), (b) writes it to its shard's hash, only if absent, (c) looks at the mark, and if set takes
    its own write back (``_write_shard_seat``). Whatever the order of the two, the seat ends in neither key:

    - its shard's hash: (c) before (1) puts (b) before (2), which deletes it; (1) before (c): (c) takes (b) back.
    - the bound: (a) before (1) puts (a) before (3), which gives the place back; (1) before (a): (a) leaves it.
    - what ``sync_bound`` read in a shard's hash before (2) and found marked at (a) (the round that read the
      shards before (2) and the bound after (3)): taken back if still there (a stalled writer's), by value, so a
      later ask's own write stays.

    An ask anew (``reserve_seats``: ``add_bot``, a create, a leave) clears the mark as it takes the seat, writes
    over any value, then looks at the mark as in (c): racing a removal, one of the two wins whole, except when (1)
    comes before the ask's clearing and the ask's write before (2): the seat is counted, not played, until the
    grace gives it back (``sync_bound``). A writer stalled between (b) and (c) past ``REMOVED_KEPT_MS`` may leave a
    removed seat played (then counted: ``sync_bound`` completes it)."""
    member = f"{room}{SEPARATOR}{seat}"
    mark, token = bot_removed_key(member, keys.prefix), secrets.token_hex(8)
    await client.set(mark, token, px=REMOVED_KEPT_MS)
    removed = bool(await client.hdel(keys.bots(keys.shard(room)), member))
    await client.register_script(REMOVE_SCRIPT)(keys=[bot_seats_key(keys.prefix), bot_pending_key(keys.prefix), mark],
                                                args=[member, token])
    return removed


async def give_back(client: Any, keys: Keys, room: str, seat: str) -> None:
    """What the bots process does with the seat of a room that ended (or whose bot can never play it): the seat
    removed from the bots (``remove_bot``), and the room's bot move delay kept no longer."""
    await remove_bot(client, keys, room, seat)
    await client.hdel(keys.bot_delays(keys.shard(room)), room)


async def sync_bound(client: Any, keys: Keys, now_ms: int, grace_ms: int = RESERVATION_GRACE_MS) -> tuple[int, int]:
    """Make the deployment's bot seats (the bound's count) match the shards' bot hashes: a seat in a shard's hash
    only (written before the bound had its own key, or by hand) is added; a seat taken in the bound but in no
    shard's hash for ``grace_ms`` (a create or leave that never finished) is given back, unless the room's log
    handed it over (``hand_over``: written to its shard's hash instead, as the log decided) or it awaits its
    command's outcome (``settle_pending`` decides it). Answers (added, dropped).
    Run by the bots process now and then: every add and remove keeps them in step by itself.

    The shards are read before the bound, and a removal (``remove_bot``) may run between and beside: so a seat is
    neither added nor written back once removed (its mark), and one removed that a shard's hash still shows
    (read before the removal's delete, or written back by a stalled writer) is taken out of it, unless written
    anew since (``remove_bot`` says why every order ends removed)."""
    shard_seats = await _shard_seats(client, keys)
    played = set(shard_seats)
    counted = {_text(k): _text(v) for k, v in (await client.hgetall(bot_seats_key(keys.prefix))).items()}
    awaiting = {_text(k) for k in await client.hkeys(bot_pending_key(keys.prefix))}
    missing = sorted(played - counted.keys())
    added = 0
    for at in range(0, len(missing), 500):
        taken, removed = await _take(client, keys, [_member(m) for m in missing[at:at + 500]], now_ms,
                                     max_seats=None, unless_removed=True)
        added += len(taken)
        for room, seat in removed:
            await _undo(client, keys, room, seat, shard_seats[f"{room}{SEPARATOR}{seat}"])
    stale: list[str] = []
    handed: list[tuple[str, str]] = []
    for member, value in counted.items():
        if member in played or member in awaiting:
            continue
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            entry = json.loads(value)
            if entry.get("log"):
                handed.append(_member(member))  # the log handed it: never dropped, whatever its age
            elif now_ms - int(entry.get("added_ms", 0)) >= grace_ms:
                stale += [member, value]
    written = 0
    for room, seat in handed:  # completed as the log decided, unless removed since the bound was read
        _, removed = await _take(client, keys, [(room, seat)], now_ms, max_seats=None, log=True, unless_removed=True)
        if not removed:
            written += await _write_shard_seat(client, keys, room, seat, now_ms, asked=False)
    if written:
        await _wake(client, keys)
    dropped = 0
    if stale:
        # read again: a seat added to its shard's hash since (an add in flight) is not given back
        still = {f"{room}{SEPARATOR}{seat}" for room, seat in await bot_seats(client, keys, range(keys.shard_count))}
        stale = [x for pair in zip(stale[::2], stale[1::2], strict=True) if pair[0] not in still for x in pair]
        if stale:
            dropped = int(await client.register_script(PRUNE_SCRIPT)(keys=[bot_seats_key(keys.prefix)], args=stale))
    return added, dropped


async def _shard_seats(client: Any, keys: Keys) -> dict[str, bytes | str]:
    """Every shard's bot seats, "room\\x1fseat" -> the value written (one round trip; a Cluster: one per node)."""
    pipe = client.pipeline(transaction=False)
    for shard in range(keys.shard_count):
        pipe.hgetall(keys.bots(shard))
    return {_text(member): value for seats in await pipe.execute() for member, value in seats.items()}


async def settle_pending(client: Any, store: Any, keys: Keys, now_ms: int, *, cursor: int = 0, count: int = 200,
                         grace_ms: int = RESERVATION_GRACE_MS) -> tuple[int, int, int]:
    """Settle the bot seats taken for a command answered 202 (``bot_pending_key``), by the command's recorded outcome
    (the store keeps a command id's first outcome; a refusal kept outside its room's log, for the dedupe window only):
    refused, the seat is given back at once; accepted, it is written to its shard's hash (the bots play it); undecided
    for ``grace_ms`` (or its outcome expired first), the command never reached a room
    (its gateway died before sending it, say): given back. One page of ``count`` from ``cursor`` (HSCAN); answers
    (released, confirmed, next cursor). A gateway that answers the command itself settles its seats at once.

    Why a grace, not the moment the command can no longer be decided: the deployment knows no such moment.
    ``command_timeout_ms`` bounds the gateway's wait (then the 202), not the decision: the command stays in its
    shard's command stream, never trimmed before an engine acknowledges it (storage.retention), until an engine
    holding the shard decides it, after a backlog, a lease takeover or an outage of any length (and a command a
    gateway's own engine did not take in time goes through that stream too, engine.inbox). A seat given back at
    the timeout would so be given back under commands still to be recorded. The grace is a guess that a command
    undecided this long never reached a stream; one decided later still finds its seat given back (a create's
    bots are then never played; a leave's seat comes back by its room's log, ``hand_over``)."""
    cursor, page = await client.hscan(bot_pending_key(keys.prefix), cursor, count=count)
    waiting: list[tuple[str, str, str, int, str]] = []
    delays: dict[str, int] = {}  # a create's bot move delay, by room (``reserve_seats``' ``delay_ms``)
    for member, value in page.items():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            entry = json.loads(_text(value))
            room, _ = _member(member)
            waiting.append((_text(member), room, str(entry["command"]), int(entry.get("added_ms", 0)), _text(value)))
            if entry.get("delay_ms"):
                delays[room] = int(entry["delay_ms"])
    outcomes = await store.outcomes_many([(room, command) for _, room, command, _, _ in waiting])
    release: list[str] = []
    confirm: list[str] = []
    for (member, room, _, added_ms, value), outcome in zip(waiting, outcomes, strict=True):
        if outcome is not None and outcome.accepted:
            confirm += [member, value]
            if room in delays:  # before its seats are played: a bot never moves without its room's delay
                await set_delay(client, keys, room, min(delays.pop(room), MAX_DELAY_MS))
        elif outcome is not None or now_ms - added_ms >= grace_ms:
            release += [member, value]
    settle = client.register_script(SETTLE_SCRIPT)
    released = int(await settle(keys=[bot_seats_key(keys.prefix), bot_pending_key(keys.prefix)], args=["release", *release])) \
        if release else 0
    if confirm:
        # written to the shards' hashes first: a seat stops awaiting its command only once the bots play it
        for member in confirm[::2]:
            await _write_shard_seat(client, keys, *_member(member), now_ms, asked=False)
        await settle(keys=[bot_seats_key(keys.prefix), bot_pending_key(keys.prefix)], args=["confirm", *confirm])
    return released, len(confirm) // 2, int(cursor)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def dice_key(secret: bytes) -> bytes:
    """The bots' dice key from a deployment secret (the commitment secret): unknown outside the deployment,
    the same after a restart (so a resent command is the same command)."""
    return hmac.new(secret, DICE_DOMAIN, hashlib.sha256).digest()


async def shard_counts(client: Any, keys: Keys, shards: range | list[int]) -> list[int]:
    """How many bot seats each of ``shards`` holds (HLEN each, one round trip: no seat is read)."""
    pipe = client.pipeline(transaction=False)
    for shard in shards:
        pipe.hlen(keys.bots(shard))
    return [int(count) for count in await pipe.execute()]


async def seat_count(client: Any, keys: Keys, shards: range | list[int]) -> int:
    return sum(await shard_counts(client, keys, shards))


async def bound_count(client: Any, keys: Keys) -> int:
    """The deployment's bot seats as the bound counts them (``bot_seats_key``: at least every shard's seats)."""
    return int(await client.hlen(bot_seats_key(keys.prefix)))


def _member(member: bytes | str) -> tuple[str, str]:
    room, _, seat = (member.decode() if isinstance(member, bytes) else member).partition(SEPARATOR)
    return room, seat


async def bot_seats(client: Any, keys: Keys, shards: range | list[int]) -> list[tuple[str, str]]:
    """(room, seat) of every bot seat of ``shards``."""
    pipe = client.pipeline(transaction=False)  # one round trip for every shard (a Cluster: one per node)
    for shard in shards:
        pipe.hkeys(keys.bots(shard))
    return sorted(_member(member) for members in await pipe.execute() for member in members)


def bot_command_id(room: str, seat: str, version: int, attempt: int) -> str:
    """The id every bots process gives the seat's command at (version, attempt): sent twice, decided once."""
    digest = hashlib.sha256(f"{room}\x00{seat}\x00{version}\x00{attempt}".encode()).hexdigest()[:32]
    return f"bot-{digest}"


def bot_join_id(room: str, seat: str) -> str:
    """The id of a bot's join as bots processes before the HTTP path wrote it to the command stream themselves: a
    room whose log holds it was joined by a bot (``took_seat`` still reads such logs)."""
    return "bot-join-" + hashlib.sha256(f"{room}\x00{seat}".encode()).hexdigest()[:32]


def bot_join_client_id(key: bytes, room: str, seat: str) -> str:
    """The command id of a bot's ``POST /rooms/{room}/join`` of ``seat``: derived under the deployment's bot key
    (``dice_key``), so every bots process of the deployment sends the same (the gateway's dedupe answers a resend
    with the first outcome, and its token again), and nobody without the key can: a join resent with its long id
    gets the seat's token, so the id is as secret as the token."""
    return "bot-join-" + hmac.new(key, f"join\x00{room}\x00{seat}".encode(), hashlib.sha256).hexdigest()[:32]


RECLAIMED = "reclaimed"  # ``taken_by``: the seat was handed to a bot, then its player took it back


def taken_by(envelopes: list[Any], room: str, seat: str, key: bytes | None = None, how: str | None = None
             ) -> str | None:
    """How a bot plays the seat after ``envelopes`` (the log, or its events past where ``how`` was read):
    "joined" (its join is the bots' ``bot_join_client_id`` under ``key``, as the gateway records it), "log" (the
    room handed it to a bot, ``room.seat_to_bot``: its player left it, or it missed the room's count of deadlines;
    or a bots process before the HTTP path joined it, ``bot_join_id``), ``RECLAIMED`` (handed, then its player took
    it back with the seat key, ``room.seat_reclaimed``: a person's seat again, until the room hands it over anew),
    or None: a person took it and holds it. The one place bot seats are told from persons' seats."""
    joined = internal_command_id(room, seat, bot_join_client_id(key, room, seat)) if key is not None else None
    for envelope in envelopes:
        if envelope.type == PLAYER_JOINED and envelope.player == seat:
            how = ("joined" if envelope.command_id == joined
                   else "log" if envelope.command_id == bot_join_id(room, seat) else None)
        elif envelope.type in (SEAT_TO_BOT, SEAT_RECLAIMED) and codec.decode_event(envelope).player == seat:
            how = "log" if envelope.type == SEAT_TO_BOT else RECLAIMED
    return how


async def how_taken(store: Any, room: str, seat: str, key: bytes | None = None) -> str | None:
    """How a bot plays the seat by the room's whole log (``taken_by``; a seat its player took back: None)."""
    how = taken_by(await store.read(room), room, seat, key)
    return None if how == RECLAIMED else how


async def took_seat(store: Any, room: str, seat: str, key: bytes | None = None) -> bool:
    """Whether a bot plays the seat by the room's log (``how_taken``). A seat a person took and still holds is
    never played by a bot."""
    return await how_taken(store, room, seat, key) is not None


class SeatRefused(Exception):
    """Why a seat is not handed to a bot on a caller's ask: the API's status, code and field ("room" or "seat")."""

    def __init__(self, status: int, code: str, message: str, field: str = "seat", **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.extra = status, code, message, field, extra


async def admit_seat(client: Any, keys: Keys, store: Any, state: RoomState | None, room: str, seat: str, *,
                     max_seats: int, holder: str | None = None, owner: bool = True, key: bytes | None = None) -> str:
    """The one rule for handing ``seat`` of ``room`` (its latest ``state``) to a bot on a caller's ask, shared by
    ``POST /rooms/{room}/bots`` and the operator's ``almanac bots add``. Writes nothing; answers how it goes:
    "already" (a bot plays it by the log, or it is in the bot seats: no new seat, so no bound), "empty" (nobody holds it), "left"
    (``holder``, the player asking, holds it: their own ``hand_to_bot`` command decides it). Else SeatRefused:
    404 room_not_found, 409 room_ended, 422 no_seat_bot / no_seat, 422 no_bot_policy (``holder``'s own seat in a
    room created without a bot policy, which would refuse the leave), 409 seat_held (a person other than
    ``holder`` holds it; to a caller who is not ``owner``, any seat another joined, a bot's too: answered from the
    state, as the log read that tells a bot's join from a person's is one any player could repeat at will), 403 not_room_owner (an empty seat, and the caller is not ``owner``: the room's creator,
    an auditor, the operator), 429 bot_seats_full (the deployment's bot seats, the room's own handovers among
    them, would pass ``max_seats``)."""
    if state is None:
        raise SeatRefused(404, "room_not_found", f"room {room!r} does not exist", "room")
    if state.ended:
        raise SeatRefused(409, "room_ended", f"room {room!r} has ended; no bot can play it", "room")
    manifest = registry.at(state.ruleset, state.ruleset_version)
    if manifest.seat_bot is None:
        raise SeatRefused(422, "no_seat_bot", f"{manifest.decider.name} has no seat bot")
    seats = manifest.decider.seats(state.game)
    if seats and seat not in seats:
        raise SeatRefused(422, "no_seat", f"{seat!r} is not a seat of this room", allowed=list(seats))
    if seat in state.bot_seats:
        return "already"
    if not owner and seat != holder:  # a player naming another's seat: answered from the state, no log read
        if seat in state.players:  # (a read of the whole log any player could repeat at will)
            raise SeatRefused(409, "seat_held", f"{seat!r} is held by its player; only they can leave it to a bot")
        raise SeatRefused(403, "not_room_owner", "an empty seat is handed to a bot by the room's creator or an "
                          "auditor")
    if seat in state.players and await took_seat(store, room, seat, key):  # key: the bots' (``dice_key``)
        return "already"
    if seat in state.players and seat != holder:
        raise SeatRefused(409, "seat_held", f"{seat!r} is held by its player; only they can leave it to a bot")
    if seat not in state.players and not owner:
        raise SeatRefused(403, "not_room_owner", "an empty seat is handed to a bot by the room's creator or an "
                          "auditor")
    if await client.hexists(keys.bots(keys.shard(room)), f"{room}{SEPARATOR}{seat}"):
        return "already"  # handed, its bot not seated yet: asking again is no new seat, so no bound
    if seat in state.players and not has_bot_policy(state):
        # The room decides a leave (``hand_to_bot``) only with a bot policy recorded at its creation: refused here,
        # before anything is sent, as the room would refuse it (nothing is recorded either way).
        raise SeatRefused(422, "no_bot_policy", f"room {room!r} was created without seat bots (create with "
                          "seat_bots or bot_after_missed); its seats are not left to bots")
    # An early answer only: the seat is taken against the bound in one step when it is handed (``add_bot``,
    # ``reserve_seats``), so callers racing past this check still never pass it together.
    held = await bound_count(client, keys)
    if held + 1 > max_seats:
        raise _full(held, max_seats)
    return "left" if seat in state.players else "empty"


async def hand_over(client: Any, keys: Keys, state: RoomState, handed: set[tuple[str, str]]) -> int:
    """Write the seats the room's log hands to bots (``RoomState.bot_seats``) to the bot seats, each once per
    process (``handed``); how many were new. The log decided the handover; this only lets a bot act on it, so it
    is never refused by ``ALMANAC_MAX_BOT_SEATS`` (a seat the room handed must be played), though it counts
    against it: a caller's next ask (``admit_seat``) finds the bound that much nearer."""
    added = 0
    if state.ended:
        return 0
    # A seat its player took back (``room.seat_reclaimed``) is handed anew if the room hands it over again.
    handed.difference_update((state.room, seat) for seat in state.players if seat not in state.bot_seats)
    for seat in state.bot_seats:
        if (state.room, seat) not in handed:
            added += await add_bot(client, keys, state.room, seat, state.created_at_ms, log=True)
            handed.add((state.room, seat))
    return added


def seat_view(state: RoomState, seat: str) -> Any:
    """The seat's view, as the API's view route gives it to the seat's own token (builtins, JSON-shaped)."""
    decider = registry.decider_at(state.ruleset, state.ruleset_version)
    return codec.to_builtins(decider.view(state.game, seat))


def decide_seen(seen: dict[str, Any], seat: str, attempt: int, now_ms: int, *, key: bytes) -> dict[str, Any] | None:
    """What the seat's bot sends now (a command body), or None, from ``seen``: the answer of
    ``GET /rooms/{room}/view`` as the seat (room, rule-set and version, ``ended``, ``fork``, and ``view``: never the
    state, so a bot cannot read what the seat may not see). None: the room ended, is a sandbox fork, its rule-set
    has no bot, or the bot has nothing to do.

    The bot's dice are its own (never the room's), drawn under the deployment's ``key`` (``dice_key``) from the
    room, seat, version and attempt: any process of the deployment decides the same, and nobody without the key can.
    """
    if seen.get("ended") or seen.get("fork") is not None:
        return None
    manifest = registry.at(seen["ruleset"], seen["ruleset_version"])
    if manifest.seat_bot is None:
        return None
    dice = Dice(key, f"{seen['room']}\x00{seat}", int(seen["version"]) * ATTEMPTS + attempt)
    command = manifest.seat_bot(seen["view"], seat, dice, now_ms)
    return None if command is None else codec.encode_command(command)


def decide_for(state: RoomState, seat: str, attempt: int, now_ms: int, *, key: bytes,
               ours: bool = True) -> dict[str, Any] | None:
    """``decide_seen`` for a caller holding the room's state (the rule-sets' stories, ``almanac bench bots``):
    the seat's view is made from it as the view route makes it, and only that view reaches the bot. A seat not
    taken yet: ``join_room``; ``ours`` False (a person's seat): None."""
    if state.ended or state.game is None or state.fork is not None:
        return None
    if seat not in state.players:
        return {"kind": "join_room"}
    if not ours:
        return None
    seen = {"room": state.room, "ruleset": state.ruleset, "ruleset_version": state.ruleset_version,
            "version": state.version, "ended": False, "fork": None, "view": seat_view(state, seat)}
    return decide_seen(seen, seat, attempt, now_ms, key=key)


def ruleset_policy(ruleset: str, version: int) -> Policy:
    """The rule-set's seat bot (``RuleSet.seat_bot``, the one `almanac bots` plays with) as the client bot's policy:
    its dice drawn from the bot's own seed (client/seat_bot.py ``bot_seed``). ValueError when it has none."""
    seat_bot = registry.at(ruleset, version).seat_bot
    if seat_bot is None:
        raise ValueError(f"{ruleset}@{version} has no seat bot to play a seat with")

    def policy(view: dict, player: str, seed: bytes, now_ms: int) -> object | None:
        return seat_bot(view, player, Dice(seed, "almanac bot", 0), now_ms)

    return policy


@dataclass
class _Seat:
    version: int = -1  # the room version the seat last acted at
    attempt: int = 0
    sent_ms: int = 0
    waiting: bool = False  # nothing to do at ``version``: wait for the room to move
    moved_ms: int | None = None  # when the room reached ``version`` (its event's server_time_ms; a delay's start)
    ours: bool | None = None  # whether the bot took the seat (read from the log once it is taken)
    how: str | None = None  # ``taken_by`` as of the log's version ``checked`` (read on, before every send)
    checked: int = 0


@dataclass
class Bucket:
    """Commands per second across the process: a token bucket (``rate`` <= 0: unbounded)."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    tokens: float = 0.0
    at: float | None = None

    def take(self) -> bool:
        if self.rate <= 0:
            return True
        now = self.clock()
        if self.at is None:
            self.at = now
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class _Unheld(Held):
    """The bots keep no checkpoints or receipts from their answers: the deployment holds no evidence against itself,
    and a long-lived process would keep some for every room it ever played."""

    def keep(self, answer: Any) -> Any:
        return answer


def gateway_client(url: str, *, transport: httpx.AsyncBaseTransport | None = None) -> AsyncClient:
    """The bots' client of the deployment's gateway: no retries inside a call (a seat not served this round is
    tried again the next, so one slow seat never holds a round up), no wait for an undecided command's outcome
    (the room moving says it was decided), and nothing held."""
    api = AsyncClient(url, retries=0, pending_wait_s=0.0, timeout=HTTP_TIMEOUT_S, transport=transport)
    api.held = _Unheld()
    return api


def gateway_url(settings: Settings) -> str:
    """The gateway the bots play through: ALMANAC_BOTS_GATEWAY_URL, else this host's gateway
    (ALMANAC_HTTP_HOST and ALMANAC_HTTP_PORT; a wildcard host is reached on the loopback)."""
    if settings.bots_gateway_url:
        return settings.bots_gateway_url
    host = "127.0.0.1" if settings.http_host in ("0.0.0.0", "::", "") else settings.http_host
    return f"http://{host}:{settings.http_port}"


HTTP_TIMEOUT_S = 10.0  # a gateway call's longest wait (the gateway answers a command within ALMANAC_COMMAND_TIMEOUT_MS)
PLAYS_AT_ONCE = 32  # seats of one round played at once (each waits on the gateway: its view, then its command)
RETRY_STATUSES = (429, 503)  # the gateway's "later": the seat is tried again next round, no attempt spent


class Bots:
    """The bot seats of ``shards``, played every ``interval_s`` (at most ``max_rooms`` seats, ``rate`` commands/s)
    through the gateway's public API (``api``, ``gateway_client``): each seat's view read as that seat, its join
    and commands sent as that seat. ``signer`` (the deployment's ``TokenSigner``) mints the token of a seat the
    room's log handed to a bot, as `almanac token --room --player` does; ``store`` and ``client`` serve the
    registry and the cheap reads (the room's version, its newest event's time, who took a seat)."""

    def __init__(self, client: Any, store: Any, keys: Keys, *, key: bytes, api: AsyncClient, signer: Any,
                 shards: list[int] | None = None, max_rooms: int = 1_000, rate: float = 50.0,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000), plays_at_once: int = PLAYS_AT_ONCE
                 ) -> None:
        self.client = client
        self.keys = keys
        self.key = key
        self.api = api
        self.signer = signer
        self.shards = list(range(keys.shard_count)) if shards is None else shards
        self.max_rooms = max_rooms
        self.bucket = Bucket(rate)
        self.now_ms = now_ms
        self.store = store
        self.plays_at_once = max(1, plays_at_once)
        self.seats: dict[tuple[str, str], _Seat] = {}
        # Each seat's token (re-derivable: a restart joins again under the same id, or mints a handed seat's)
        self.tokens: dict[tuple[str, str], str] = {}
        self.sent = 0
        self.over_limit = 0
        self.failed = 0  # gateway calls of the last round that failed (unreachable, or its "later"); logged once
        self.read = 0  # seats read from Redis by the last round (bounded by max_rooms plus one HSCAN reply)
        # The cursor over the seats: the shard (index into ``shards``) and its HSCAN cursor, and the seats read
        # past the last round's window, played first next round. A round never reads every seat: a fixed window
        # (the first max_rooms in sorted order) let rooms that never move starve every other seat, and reading all
        # of them every 0.1 s cost what any player creating rooms with bots chose.
        self.shard_at = 0
        self.scan_at = 0
        self.pending: list[tuple[str, str]] = []
        self.pending_at = 0  # the HSCAN cursor over the seats awaiting a command's outcome (settle_pending)
        self.synced_ms: int | None = None  # when the bound's count was last matched to the shards' (sync_bound)
        # The last round found no seat to play and none awaiting a command: the next reads the wake stream's newest
        # id first (``woken_from``), and, idle still, ``run`` blocks on the stream from it.
        self.idle = False
        self.woken_from: str | None = None
        self.idle_wait_s = IDLE_WAIT_S

    async def _window(self, counts: list[int]) -> list[tuple[str, str]]:
        """The next ``max_rooms`` seats after the cursor (at most one HSCAN per shard holding seats per round)."""
        seats, self.pending = self.pending[: self.max_rooms], self.pending[self.max_rooms:]
        self.read = 0
        for _ in range(len(self.shards)):
            if len(seats) >= self.max_rooms:
                break
            at = self.shard_at % len(self.shards)
            if not counts[at]:  # an empty shard costs no round trip (an idle deployment: the HLEN pipeline only)
                self.shard_at, self.scan_at = (at + 1) % len(self.shards), 0
                continue
            shard = self.shards[at]
            self.scan_at, found = await self.client.hscan(self.keys.bots(shard), self.scan_at,
                                                          count=self.max_rooms - len(seats))
            if not self.scan_at:
                self.shard_at = (self.shard_at + 1) % len(self.shards)
            self.read += len(found)
            seats += [_member(member) for member in found]
        # HSCAN's COUNT is a hint (a small hash answers whole): what is past the window waits for the next round
        seats, self.pending = seats[: self.max_rooms], self.pending + seats[self.max_rooms:]
        return seats

    async def tick(self) -> int:
        """One round over the next window of bot seats; the commands sent."""
        now = self.now_ms()
        self.woken_from = None
        if self.idle:  # before the round's reads: a seat handed after them appends past this id, and wakes ``run``
            newest = await self.client.xrevrange(bot_wake_key(self.keys.prefix), count=1)
            self.woken_from = _text(newest[0][0]) if newest else "0-0"
        if self.synced_ms is None or now - self.synced_ms >= SYNC_EVERY_MS:
            self.synced_ms = now
            added, dropped = await sync_bound(self.client, self.keys, now)
            if added or dropped:
                log.info("bots.bound_synced", added=added, dropped=dropped)
        # Seats taken for a command answered 202: settled as soon as its outcome is recorded (one page a round).
        released, confirmed, self.pending_at = await settle_pending(self.client, self.store, self.keys, now,
                                                                     cursor=self.pending_at)
        if released or confirmed:
            log.info("bots.pending_settled", released=released, confirmed=confirmed)
        counts = await shard_counts(self.client, self.keys, self.shards)
        total = sum(counts)
        self.over_limit = max(0, total - self.max_rooms)
        self.idle = not total and not self.pending and not self.pending_at and not await self.client.hlen(
            bot_pending_key(self.keys.prefix))
        if self.over_limit:
            log.warning("bots.over_limit", seats=total, max_rooms=self.max_rooms)
        seats = list(dict.fromkeys(await self._window(counts)))
        while len(self.seats) > 4 * self.max_rooms + total:  # progress of seats gone: the oldest first (re-derivable)
            self.tokens.pop(gone := next(iter(self.seats)), None)
            del self.seats[gone]
        pipe = self.client.pipeline(transaction=False)
        for room, _ in seats:
            pipe.get(self.keys.version(room))
            pipe.hget(self.keys.bot_delays(self.keys.shard(room)), room)
        read = await pipe.execute() if seats else []
        versions = [int(v) if v is not None else 0 for v in read[0::2]]
        delays = [min(int(d), MAX_DELAY_MS) if d is not None else 0 for d in read[1::2]]
        await self._drop_archived([seat for seat, version in zip(seats, versions, strict=True) if not version])
        self.failed = 0
        at_once = asyncio.Semaphore(self.plays_at_once)

        async def play(room: str, seat: str, version: int, delay_ms: int) -> bool:
            async with at_once:
                return await self._play(room, seat, version, delay_ms)

        played = await asyncio.gather(*(play(room, seat, version, delay_ms) for (room, seat), version, delay_ms
                                        in zip(seats, versions, delays, strict=True) if version))
        if self.failed:
            log.warning("bots.gateway_failed", calls=self.failed, url=self.api.url)
        sent = sum(played)
        self.sent += sent
        return sent

    async def _drop_archived(self, seats: list[tuple[str, str]]) -> None:
        """Drop the seats of rooms that finished and were archived before a round saw their end (this process was
        down, or the seat waited past the archiver's window): such a room has no version key, so ``_play`` never
        loads it, and its seat would hold a place in the bound, and a field in Redis, for ever. A room archived
        because it was idle keeps its seats (it comes back when a player's command arrives)."""
        pointers = getattr(self.store, "pointers", None)  # an archiving store (every process's: services.bootstrap)
        if not seats or pointers is None:
            return
        found = await pointers(sorted({room for room, _ in seats}))
        for room, seat in seats:
            if room in found and found[room].reason == "finished":
                await self._drop(room, seat)

    async def _drop(self, room: str, seat: str) -> None:
        await give_back(self.client, self.keys, room, seat)
        self.seats.pop((room, seat), None)
        self.tokens.pop((room, seat), None)

    async def _delayed(self, room: str, mine: _Seat, now: int, delay_ms: int) -> bool:
        """Whether the room's delay since it reached ``mine.version`` has not passed yet (one read per version)."""
        if mine.moved_ms is None:
            newest = await self.store.page(room, mine.version, 1)
            mine.moved_ms = newest[0].server_time_ms if newest else 0
        return now < mine.moved_ms + delay_ms

    async def _play(self, room: str, seat: str, version: int, delay_ms: int = 0) -> bool:
        mine = self.seats.setdefault((room, seat), _Seat())
        if mine.ours is False:
            return False  # a person's seat: never played (handed by mistake; `almanac bots remove` clears it)
        now = self.now_ms()
        if version != mine.version:
            mine.version, mine.attempt, mine.sent_ms, mine.waiting, mine.moved_ms = version, 0, 0, False, None
        elif mine.waiting or (mine.sent_ms and now - mine.sent_ms < RETRY_AFTER_MS):
            return False  # nothing to do here, or the last command is still being decided
        elif mine.sent_ms:
            mine.attempt += 1  # sent, and the room did not move: refused (or lost); try another command
            if mine.attempt >= ATTEMPTS:
                mine.waiting = True
                return False
        if delay_ms and await self._delayed(room, mine, now, delay_ms):
            return False  # the room's bots wait its delay after every move (the log's clock: its event's time)
        if not self.bucket.take():
            return False
        try:
            return await self._act(room, seat, mine, version, delay_ms, now)
        except ApiError as error:
            if error.status == 401:
                self.tokens.pop((room, seat), None)  # expired (or the secret rotated): a fresh one next round
            if error.status in RETRY_STATUSES or error.status == 401:
                self.failed += 1
            else:
                log.warning("bots.gateway_refused", room=room, seat=seat, status=error.status, code=error.code)
            return False
        except httpx.HTTPError:
            self.failed += 1  # the gateway unreachable: the seat waits (nothing is sent any other way)
            return False

    async def _act(self, room: str, seat: str, mine: _Seat, version: int, delay_ms: int, now: int) -> bool:
        """The seat's turn through the gateway: joined if not taken yet, else its view read as the seat and the
        bot's command, if any, sent as the seat. Whether a command (or the join) was sent."""
        token = self.tokens.get((room, seat))
        if token is None:
            summary = await self.api.room(room)  # the public summary: who holds which seat
            if summary["ended"]:
                await self._drop(room, seat)
                return False
            if seat not in summary["players"]:
                return await self._join(room, seat, mine, now)
            token = await self._seat_token(room, seat, mine)
            if token is None:
                return False
        if not await self._still_ours(room, seat, mine, version):  # every round the room moved
            return False
        player = self.api.seat(room, seat, token)
        seen = await player.view()  # GET /rooms/{room}/view as the seat: all the bot ever reads of the room
        if seen["ended"]:
            await self._drop(room, seat)
            return False
        if delay_ms and seen["version"] != version:
            return False  # moved since the round read it: its delay starts at the newer version, next round
        body = decide_seen(seen, seat, mine.attempt, now, key=self.key)
        if body is None:
            mine.version, mine.waiting = seen["version"], True
            return False
        if not await self._still_ours(room, seat, mine, seen["version"]):
            return False
        command_id = bot_command_id(room, seat, seen["version"], mine.attempt)
        try:
            await player.command(body, command_id=command_id)  # POST /rooms/{room}/commands as the seat
        except ApiError as refused:
            if refused.status not in (409, 422) and refused.code != "outcome_unknown":
                raise
            if refused.code != "outcome_unknown":  # refused by the rules: the next draw next round
                now -= RETRY_AFTER_MS
        mine.version, mine.sent_ms = seen["version"], max(1, now)
        return True

    async def _still_ours(self, room: str, seat: str, mine: _Seat, version: int) -> bool:
        """Whether the bot still plays the seat at ``version`` (the view it decided from), read from the log's
        events since the last look (``taken_by``) just before each send. A seat its player took back
        (``room.seat_reclaimed``) is dropped: out of the registry (its place in ``ALMANAC_MAX_BOT_SEATS`` freed),
        never sent for again.

        The window left: a reclaim recorded after this read and before the gateway decides the command sent now
        (one command, sent within the round; the gateway decides it in milliseconds) lets that one command be
        accepted as the seat's. The room cannot tell it from the player's own: the bot sends with a token for the
        seat, as the player does, and no log records which holder sent a command."""
        if version > mine.checked:
            newer = await self.store.read(room, mine.checked + 1, version)
            mine.how, mine.checked = taken_by(newer, room, seat, self.key, mine.how), version
        if mine.how == RECLAIMED:
            await self._reclaimed(room, seat)
            return False
        return True

    async def _reclaimed(self, room: str, seat: str) -> None:
        """The seat's player took it back: out of the bot seats (the room's other bot seats keep its delay)."""
        log.info("bots.seat_reclaimed", room=room, seat=seat)
        await remove_bot(self.client, self.keys, room, seat)
        self.seats.pop((room, seat), None)
        self.tokens.pop((room, seat), None)

    async def _join(self, room: str, seat: str, mine: _Seat, now: int) -> bool:
        """Take the empty seat: ``POST /rooms/{room}/join`` under the bot's join id (``bot_join_client_id``). A
        refusal is for good (its id is fixed: every resend gets the same), so the seat is dropped."""
        try:
            joined = await self.api.join(room, seat, command_id=bot_join_client_id(self.key, room, seat))
        except ApiError as refused:
            if refused.status == 202:  # undecided yet: the room shows the seat taken once it is (``_seat_token``)
                mine.sent_ms = max(1, now)
                return True
            if refused.status not in (404, 422):
                raise
            log.warning("bots.join_refused", room=room, seat=seat, error=refused.code)
            await self._drop(room, seat)
            return False
        self.tokens[(room, seat)] = joined.token
        mine.ours, mine.how, mine.sent_ms = True, "joined", max(1, now)
        return True

    async def _seat_token(self, room: str, seat: str, mine: _Seat) -> str | None:
        """A token for a taken seat the room's log says a bot plays (None, and never played, a person's): the
        bot's own join sent again (the gateway answers its first outcome, with a token), or, for a seat the room
        handed to a bot (or an older bots process joined), one minted with the deployment's signing key."""
        envelopes = await self.store.read(room)
        how = taken_by(envelopes, room, seat, self.key)
        mine.how, mine.checked = how, envelopes[-1].version if envelopes else 0
        if how == RECLAIMED:
            await self._reclaimed(room, seat)
            return None
        mine.ours = how is not None
        if how is None:
            log.warning("bots.seat_held_by_a_person", room=room, seat=seat)
            return None
        if how == "joined":
            token = (await self.api.join(room, seat, command_id=bot_join_client_id(self.key, room, seat))).token
        else:
            token = self.signer.issue(room, seat)
        self.tokens[(room, seat)] = token
        return token

    async def run(self, stop: asyncio.Event, interval_s: float = 0.1) -> None:
        """A round every ``interval_s`` while there are seats to play; with none, a round when one is handed
        (the wake stream), or every ``idle_wait_s`` (the bound's sync, SYNC_EVERY_MS, still runs on time)."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception as error:  # noqa: BLE001 - Redis away: the seats wait in it, the log is the progress
                log.warning("bots.round_failed", error=f"{type(error).__name__}: {str(error)[:300]}")
                self.idle, self.woken_from = False, None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
            if self.idle and self.woken_from is not None and not stop.is_set():
                try:
                    await self._wait_for_seats(stop)
                except Exception as error:  # noqa: BLE001 - Redis away: the next round says so
                    log.warning("bots.wait_failed", error=f"{type(error).__name__}: {str(error)[:300]}")

    async def _wait_for_seats(self, stop: asyncio.Event) -> None:
        """Until a seat is handed (an entry past ``woken_from`` in the wake stream), ``stop``, or ``idle_wait_s``."""
        await read_or_stop(self.client, {bot_wake_key(self.keys.prefix): self.woken_from}, int(self.idle_wait_s * 1000), stop)


async def run(settings: Settings, redis_url: str, *, max_rooms: int, rate: float,
              shards: list[int] | None = None) -> None:
    """The bots process until SIGINT/SIGTERM, playing through ``gateway_url(settings)``."""
    from almanac.services.gateway.auth import deployment_signer  # noqa: PLC0415 - the gateway imports this module

    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL, redis_url)
    api = gateway_client(gateway_url(settings))
    bots = Bots(runtime.client, runtime.store, runtime.keys, key=dice_key(commit_secret(settings)), api=api,
                signer=deployment_signer(settings), shards=shards, max_rooms=max_rooms, rate=rate)
    log.info("bots.gateway", url=api.url)
    try:
        with bootstrap.quiet_httpx():  # a line per request would be the log's every line: its own say what failed
            await bootstrap.serve(runtime, bots.run, "bots")
    finally:
        await api.aclose()
