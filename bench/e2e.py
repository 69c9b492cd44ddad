"""`almanac bench e2e`: command round trips HTTP -> engine -> events -> answer at a fixed offered load, against a bare PING."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import uvloop
from rich.table import Table

from almanac.bench import bare_http, cores as cpu_cores
from almanac.bench.common import output_console
from almanac.bench.peer import PeerUnavailable, peer_figures
from almanac.client import ApiError
from almanac.client.aio import AsyncClient
from almanac.client.command_sender import CommandSender
from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.projections.read_model_queries import ReadModels
from almanac.services import bootstrap
from almanac.services.room_service import CommandRecord, RoomService
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack
from almanac.storage.keys import shard_of
from almanac.storage.memory_store import MemoryEventStore

CHALLENGE = "bench-e2e"
BARE_SECONDS = 4  # how long the bare HTTP baseline is offered the load (at most the run's own length)
CONNECTIONS = 256  # more than the gateway's in-flight limit: past capacity the gateway, not the client, must refuse
OVERLOAD_WINDOW_S = 2.0  # each window of the interleaved overload measurement
OVERLOAD_ROUNDS = 3  # overload windows, each between two capacity windows
CLOSED_BACKOFF_S = 0.005  # a closed-loop client refused (503/429) sends its next command this much later
DEADLINE_MS = 1_000  # goodput: commands accepted and answered within this long of their scheduled send
# A window whose sends the generator started this late (p99) or later was not offered as scheduled: its loop fell
# behind (its CPU taken by other processes) and sent in bursts, which the in-flight limit refuses but for its first
# commands, the stack idle between them (issue 28, item 19, ninth pass). Its ratio measures the generator.
GENERATOR_BEHIND_MS = 50.0
# The rooms for the overload windows: this many times the commands the windows send at the capacity measured, opened
# again before a window when those left hold less than ROOM_TOP_UP_BELOW times what the rest of the windows send.
ROOM_MARGIN = 1.5
ROOM_TOP_UP_BELOW = 1.2
CATCH_UP_WAIT_S = 120.0  # at most this long for the read side to fold the rooms' events before the clock
DRAIN_S = 10.0  # at most this long for an overload window's sends still unanswered at its end, before the next window
console = output_console()
Answer = TypeVar("Answer")


def script_ruleset() -> str:
    """The rule-set the benchmark plays: the first whose challenge rooms deal alike and that has a bot."""
    for manifest in registry.manifests():
        if manifest.shared_challenge and manifest.policy is not None:
            return manifest.name
    raise RuntimeError("no installed rule-set deals challenge rooms alike (manifest.shared_challenge) with a policy")


async def _script(ruleset: str) -> list[dict[str, Any]]:
    """One full game from the challenge, decided in memory: every room of the challenge deals the same, so
    the same moves are legal in each and every benchmark command is accepted."""
    policy = registry.manifest(ruleset).policy
    service = RoomService(MemoryEventStore())
    for number, body in enumerate(({"kind": "create_room", "ruleset": ruleset, "challenge": CHALLENGE},
                                   {"kind": "join_room"})):
        await service.handle(CommandRecord(command_id=f"s{number}", room="script", player="p", server_time_ms=0,
                                           body=body))
    script = []
    while True:
        state, _ = await service.load("script")
        command = policy(state.game, "p", Dice(b"bench", "script", state.version), 0)
        if command is None or state.ended:
            return script
        body = codec.encode_command(command)
        outcome = await service.handle(CommandRecord(command_id=f"m{len(script)}", room="script", player="p",
                                                     server_time_ms=0, body=body))
        if not outcome.accepted:
            raise RuntimeError(f"the scripted move was refused: {outcome.error}")
        script.append(body)


async def _ping_floor(redis_url: str, count: int = 2_000) -> list[float]:
    client = bootstrap.tool_client(redis_url)  # a round trip as every process's client pays it
    try:
        await client.ping()
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            await client.ping()
            samples.append(time.perf_counter() - started)
        return samples
    finally:
        await client.aclose()


async def _patiently(request: Callable[[], Awaitable[Answer]], status_of: Callable[[Answer], int]) -> Answer:
    """A well-behaved client's request: refused as overloaded (503), it comes back a little later."""
    for _ in range(99):
        answer = await request()
        if status_of(answer) != 503:
            return answer
        await asyncio.sleep(0.05)
    return await request()


async def _open_rooms(client: AsyncClient, ruleset: str, count: int, tag: str) -> list[tuple[str, str]]:
    """(room, token) for ``count`` fresh rooms of the challenge, created a few at a time (``client`` comes back a
    little later when refused as overloaded: ``_room_client``)."""
    rooms: list[tuple[str, str]] = []
    semaphore = asyncio.Semaphore(16)

    async def open_one(index: int) -> None:
        async with semaphore:
            try:
                seat = await client.create_room(ruleset, "p", challenge=CHALLENGE, room=f"e2e-{tag}-{index}")
            except ApiError as error:
                raise RuntimeError(f"creating a room answered {error}") from None
            if not seat.answer.get("joined"):
                raise RuntimeError(f"creating a room did not join it: {str(seat.answer)[:200]}")
            rooms.append((seat.room, seat.token))

    await asyncio.gather(*(open_one(i) for i in range(count)))
    return rooms


def _room_client(url: str) -> AsyncClient:
    """The client that opens the rooms: a well-behaved one, refused as overloaded (503/429) it comes back a little
    later (about ``_patiently``'s 50 ms), for as long."""
    return AsyncClient(url, timeout=30.0, retries=99, max_backoff_s=0.05)


class RoomSlots(msgspec.Struct, frozen=True):
    """Which rooms each slot of the schedule plays, and how many moves each room plays before the clock.

    The schedule sends slot after slot (command ``i`` to slot ``i % slots``), and a slot plays its rooms' moves in
    order: its first room until that room's game is over, then its next. In step, every slot has one room and
    no room has moved, so all rooms play the same move at the same moment, and every room ends a season in
    the same stretch of the run. Out of step, slot ``j``'s first room has played ``j % moves`` moves before the
    clock and, once its game is over, a fresh room follows (a slot whose first room starts at move 0 needs
    none): at every moment the rooms' moves are spread as evenly as the number of slots allows (with at least
    ``moves`` slots, each move is played by ``slots // moves`` or one more), as in real play.
    """

    rooms: list[list[int]]  # per slot, the indexes of its rooms in play order
    played_before: list[int]  # per room, moves played before the clock

    @property
    def room_count(self) -> int:
        return len(self.played_before)

    def playing(self, slot: int, done_moves: list[int], moves: int) -> int:
        """The room the slot plays now: its first whose game is not over. A slot never runs out: the schedule
        sends it at most one game's moves, and its rooms have at least that many left."""
        room = next((room for room in self.rooms[slot] if done_moves[room] < moves), None)
        if room is None:
            raise RuntimeError(f"slot {slot} ran out of rooms: it was sent more than one game's moves")
        return room

    def schedule(self, moves: int) -> dict[str, Any]:
        """The schedule as data, for the peer to play the same one (peer.py)."""
        return {"moves": moves, "slots": self.rooms, "played_before": self.played_before}

    @classmethod
    def in_step(cls, slots: int) -> RoomSlots:
        return cls([[slot] for slot in range(slots)], [0] * slots)

    @classmethod
    def out_of_step(cls, slots: int, moves: int) -> RoomSlots:
        phases = [slot % moves for slot in range(slots)]
        followed = sum(1 for phase in phases if phase)  # slots whose first room's game ends during the run
        fresh = iter(range(slots, slots + followed))
        rooms = [[slot, next(fresh)] if phase else [slot] for slot, phase in enumerate(phases)]
        return cls(rooms, phases + [0] * followed)


async def _play_before_clock(lean: CommandSender, rooms: list[tuple[str, str]], bodies: list[bytes],
                             played: list[int], server_of: Callable[[str], int | None]) -> None:
    """Play each room's first ``played[i]`` moves, a few rooms at a time, before the load is measured (each sent
    where the load will send the room's later ones: ``server_of``)."""
    semaphore = asyncio.Semaphore(64)

    async def play(index: int) -> None:
        room, token = rooms[index]
        async with semaphore:
            for move in range(played[index]):
                status, payload, _ = await _patiently(
                    lambda move=move: lean.command(room, bodies[move], token, server_of(room)),
                    lambda answer: answer[0])
                if status != 200:
                    raise RuntimeError(f"a move before the clock answered {status}: {payload[:200]!r}")

    await asyncio.gather(*(play(index) for index, count in enumerate(played) if count))


def commands_sent_by(plan: list[tuple[str, float, float]], capacity: float) -> float:
    """The commands ``plan``'s windows send when the stack accepts ``capacity`` commands/s: a closed window about the
    capacity, an open one ``m`` times it (each of its sends uses up a command of the rooms, refused or not)."""
    return sum((value if kind == "open" else 1.0) * capacity * seconds for kind, value, seconds in plan)


def commands_to_add(plan: list[tuple[str, float, float]], capacity: float, left: int) -> int:
    """The commands the rooms must be given before ``plan``'s windows (the rest of the run) so that none of them runs
    out at ``capacity``: none while the ``left`` they still hold cover ``ROOM_TOP_UP_BELOW`` times what the windows
    send, else enough for ``ROOM_MARGIN`` times (a capacity window can beat the last one: the issue 28 run whose rooms,
    sized from --rate, ran out in its last windows and averaged a 0/s capacity window into its ratio)."""
    needed = commands_sent_by(plan, capacity)
    if left >= ROOM_TOP_UP_BELOW * needed:
        return 0
    return max(0, math.ceil(ROOM_MARGIN * needed) - left)


class _Block(msgspec.Struct):
    """Rooms opened together and the schedule's commands they hold: ``first`` to ``first + count``, command ``i`` to
    slot ``(i - first) % slots``. More rooms for later windows come as a block of their own, so the slots already
    playing keep their order (a slot never sent more than one game's moves)."""

    first: int
    count: int
    slots: RoomSlots
    rooms: list[tuple[str, str]]
    done_moves: list[int]
    locks: list[asyncio.Lock]
    in_load: set[int]  # the rooms the load sent to (out of step, the last fresh rooms may get none)


async def _await_caught_up(url: str, redis_url: str | None, wait_s: float = CATCH_UP_WAIT_S) -> None:
    """Wait (at most ``wait_s``) until the projector has applied every shard's feed to its end, and say how long that
    took: the rooms opened and moved before the clock leave it a backlog which, still being folded in the first
    windows, took the stack's CPU from the gateway there (issue 28 item 19: 0.42 of its pinned core with the stack
    waiting 2.9 s for a CPU, out of step). Each shard's ``caught_up`` is the product's own (``/status``'s projector
    part, ``ReadModels.status``), read from ``redis_url`` where known, else through the gateway."""
    started = time.perf_counter()
    client = bootstrap.tool_client(redis_url) if redis_url else None
    try:
        while True:
            if client is not None:
                settings = bootstrap.settings()
                queries = ReadModels(client, settings.shard_count, keys=bootstrap.process_keys(settings.shard_count))
                projector = await queries.status()
            else:
                async with _room_client(url) as status_client:
                    projector = (await status_client.request("GET", "/status"))["projector"]
            behind = [shard["shard"] for shard in projector["shards"] if not shard["caught_up"]]
            took = time.perf_counter() - started
            if not behind or took >= wait_s:
                break
            await asyncio.sleep(0.05)
    finally:
        if client is not None:
            await client.aclose()
    if behind:
        console.print(f"the projector did not catch up with the rooms' events within {wait_s:g} s (behind on "
                      f"{len(behind)} shards): the first windows fold the rest", soft_wrap=True)
    else:
        console.print(f"the projector caught up with the rooms' events before the clock in {took:.2f} s",
                      soft_wrap=True)


async def _offer_load(urls: list[str], rate: int, seconds: int, on_load_start: Any = None,
                      route_by_shard: bool = False, out_of_step: bool = False,
                      phases: list[tuple[str, float, float]] | None = None,
                      on_window: Callable[[int, bool], None] | None = None,
                      redis_url: str | None = None) -> dict[str, Any]:
    """Open rooms, then (after ``on_load_start()``) offer ``rate`` commands/s for ``seconds``, open loop.

    With several gateway ``urls`` the requests go to them in turn, as a round-robin load balancer sends them;
    ``route_by_shard``: each to the gateway whose engine group holds the room's shard (deciding gateways
    split the shards ``i/N``: shard s to gateway s % N), as a load balancer that routes by shard would.
    ``out_of_step``: the rooms are spread over the game's moves instead of all playing the same one
    (``RoomSlots``). Before the clock, the read side is given the time to fold the rooms' events (``_await_caught_up``,
    through ``redis_url`` where known).

    ``phases``: instead, windows back to back on the same rooms and connections, each (kind, value, seconds):
    ``("closed", n, s)``: ``n`` clients each sending its next command when its last is answered (a refused one after
    ``CLOSED_BACKOFF_S``), which measures the capacity without offering more than it, so without shedding;
    ``("open", m, s)``: open loop at ``m`` times the commands/s the last closed window had accepted. ``rate`` then
    is the capacity the rooms are first sized for (``commands_to_add``); before each later window, more rooms are
    opened (outside the windows) when those left would not hold the rest at the capacity last measured. An open
    window's sends still unanswered at its end are waited for (at most ``DRAIN_S``) before the next window begins,
    so that they do not load it; each is counted to the window it was scheduled in.
    ``on_window(k, ending)`` is called as window ``k`` begins and as it ends (its sends answered);
    ``figures["phases"]`` holds each window's answers (status, latency from the send's scheduled time),
    ``figures["phase_rates"]`` what each offered (commands sent per second), ``figures["phase_ran_out"]`` whether
    it wanted more commands than the rooms held, ``figures["phase_spill"]`` how many of its sends were unanswered
    at its end (and ``phase_drain_s`` how long they took, ``phase_stragglers`` how many were still unanswered as the
    next window began).
    """
    windowed = phases is not None
    phases = phases or [("open", 1.0, seconds)]
    shard_count = bootstrap.settings().shard_count  # the stack's processes read the same environment

    def owner(room: str) -> int | None:
        return shard_of(room, shard_count) % len(urls) if route_by_shard else None

    url = urls[0]
    ruleset = script_ruleset()
    script = await _script(ruleset)
    moves = len(script)
    answers: list[list[tuple[int, float]]] = [[] for _ in phases]
    phase_refusals: list[dict[str, int]] = [{} for _ in phases]  # each window's refusals by kind (admission's reason)
    phase_rates: list[float] = []
    # Each window's sends: how late the generator started each (s), and how many found every connection busy.
    phase_late: list[list[float]] = [[] for _ in phases]
    phase_waits = [0] * len(phases)
    ran_out = [False] * len(phases)
    spill, drain_s, stragglers = [0] * len(phases), [0.0] * len(phases), [0] * len(phases)
    lean = CommandSender(urls, CONNECTIONS)
    bodies = [CommandSender.body(move) for move in script]
    blocks: list[_Block] = []
    tag = str(int(time.time()))

    async def open_block(commands: int) -> _Block:
        """Rooms for ``commands`` more commands, played partway out of step, as the schedule's next block."""
        # Enough slots that a slot's next move is due long after its previous answer (no self-made conflicts).
        slot_count = max(1, -(-commands // moves))
        slots = (RoomSlots.out_of_step(slot_count, moves) if out_of_step else RoomSlots.in_step(slot_count))
        async with _room_client(url) as client:
            rooms = await _open_rooms(client, ruleset, slots.room_count, f"{tag}-{len(blocks)}")
        if any(slots.played_before):
            answered = list(lean.answered)
            await _play_before_clock(lean, rooms, bodies, slots.played_before, owner)
            lean.answered = answered  # the load's answers only
        first = blocks[-1].first + blocks[-1].count if blocks else 0
        # A slot takes one game's moves at most (``RoomSlots.playing``): the block holds that many per slot.
        block = _Block(first, slot_count * moves, slots, rooms, list(slots.played_before),
                       [asyncio.Lock() for _ in range(slot_count)], set())
        blocks.append(block)
        return block

    def room_total() -> int:
        return blocks[-1].first + blocks[-1].count if blocks else 0

    if windowed:
        await open_block(commands_to_add(phases, rate, 0))
    else:
        await open_block(rate * seconds)
    await _await_caught_up(url, redis_url)
    latencies: list[float] = []
    # Accepted commands that were their room's first request, apart: a gateway meets each room (its rules, its
    # player's token) on its first command, and in step this benchmark sends every room's first command in the
    # same opening stretch (room after room), which the later commands do not share.
    first_latencies: list[float] = []
    later_latencies: list[float] = []
    failures: dict[str, int] = {}
    retry_after: list[str] = []
    late: list[float] = []

    async def send(index: int, due: float, window: int = 0) -> int:
        # How late the generator itself starts the send (its own loop behind schedule on the shared cores):
        # counted in the latencies, and printed apart so that it is not mistaken for the server's.
        late.append(time.perf_counter() - due)
        phase_late[window].append(late[-1])
        if all(idle.empty() for idle in lean.idle) and min(lean.opened) >= lean.size:
            phase_waits[window] += 1  # queued here for a connection: the generator's wait, not the stack's
        block = next(block for block in reversed(blocks) if block.first <= index)
        slot = (index - block.first) % len(block.locks)
        async with block.locks[slot]:  # a slot's moves in order, as one player would send them
            room_index = block.slots.playing(slot, block.done_moves, moves)
            # Its first command: the gateways have not met the room, before the clock or earlier in the load.
            first = not block.slots.played_before[room_index] and room_index not in block.in_load
            block.in_load.add(room_index)
            room, token = block.rooms[room_index]
            status, payload, retry = await lean.command(room, bodies[block.done_moves[room_index]], token, owner(room))
            # Measured from the scheduled send time: a late start counts against us (no coordinated omission).
            latencies.append(time.perf_counter() - due)
            answers[window].append((status, latencies[-1]))
            if status == 200:
                block.done_moves[room_index] += 1
                (first_latencies if first else later_latencies).append(latencies[-1])
            else:
                if retry is not None:
                    retry_after.append(retry)
                code = failure_kind(status, msgspec.json.decode(payload))
                failures[code] = failures.get(code, 0) + 1
                phase_refusals[window][code] = phase_refusals[window].get(code, 0) + 1
            return status

    if on_load_start is not None:
        on_load_start()  # CPU is counted from here: the load, not the room creation
    tasks = []
    with _no_collection_while_offering():
        started = time.perf_counter()
        if not windowed:
            for index in range(rate * seconds):
                due = started + index / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send(index, due)))
        else:
            sent = 0  # commands sent so far: the next one's index (its slot)
            capacity = float(rate)  # commands/s the last closed window accepted (first: the estimate the caller gave)
            for window, (kind, value, window_s) in enumerate(phases):
                more = commands_to_add(phases[window:], capacity, room_total() - sent) if window else 0
                if more:  # outside the windows: the next one begins once the read side has folded them
                    opening = time.perf_counter()
                    block = await open_block(more)
                    console.print(f"more rooms before window {window}: {len(block.rooms)} for {block.count} commands "
                                  f"(the capacity last measured: {capacity:.0f}/s), opened in "
                                  f"{time.perf_counter() - opening:.1f} s", soft_wrap=True)
                    await _await_caught_up(url, redis_url)
                if on_window is not None:
                    on_window(window, False)
                opened = time.perf_counter()
                if kind == "closed":
                    async def client(window: int = window, opened: float = opened, window_s: float = window_s) -> None:
                        nonlocal sent
                        index = None
                        while time.perf_counter() - opened < window_s:
                            if index is None:
                                if sent >= room_total():
                                    ran_out[window] = True
                                    return
                                index, sent = sent, sent + 1
                            if await send(index, time.perf_counter(), window) in (429, 503):
                                # The same command again (its room did not move): a refusal uses up no room's move.
                                await asyncio.sleep(CLOSED_BACKOFF_S)
                            else:
                                index = None

                    before = sent
                    await asyncio.gather(*(client() for _ in range(int(value))))
                    took = time.perf_counter() - opened
                    phase_rates.append((sent - before) / took)
                    # Its rate, also when the rooms ran out early: what sizes the rooms for the windows after it.
                    capacity = sum(1 for status, _ in answers[window] if status == 200) / took
                else:
                    window_rate = max(1.0, value * capacity)
                    phase_rates.append(window_rate)
                    window_tasks = []
                    for number in range(round(window_rate * window_s)):
                        if sent >= room_total():
                            ran_out[window] = True
                            break
                        due = opened + number / window_rate
                        delay = due - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                        window_tasks.append(asyncio.create_task(send(sent, due, window)))
                        sent += 1
                    tasks += window_tasks
                    # The window lasts its length, also when the rooms ran out (then it says so: fewer sent).
                    await asyncio.sleep(max(0.0, opened + window_s - time.perf_counter()))
                    # Its sends still queued here or unanswered (the generator's spill) are answered before the next
                    # window: they loaded the capacity window after it, which counted them to neither.
                    unanswered = [task for task in window_tasks if not task.done()]
                    spill[window] = len(unanswered)
                    draining = time.perf_counter()
                    if unanswered:
                        _, pending = await asyncio.wait(unanswered, timeout=DRAIN_S)
                        stragglers[window] = len(pending)
                    drain_s[window] = time.perf_counter() - draining
                if on_window is not None:
                    on_window(window, True)
            if any(ran_out):
                console.print(f"the rooms ran out after {sent} commands in window(s) "
                              f"{', '.join(str(number) for number, out in enumerate(ran_out) if out)}: those are not "
                              "counted", soft_wrap=True)
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    await lean.close()
    return {"answered_per_gateway": lean.answered, "latencies": latencies, "accepted_latencies": first_latencies + later_latencies,
            "first_latencies": first_latencies, "later_latencies": later_latencies,
            "failures": failures, "retry_after": retry_after, "elapsed": elapsed,
            "rooms": sum(len(block.in_load) for block in blocks),
            "late": late, "out_of_step": out_of_step, "schedule": blocks[0].slots.schedule(moves),
            "script": moves, "ruleset": ruleset, "first_move": script[0], "phases": answers,
            "phase_rates": phase_rates, "phase_refusals": phase_refusals, "phase_late": phase_late,
            "phase_waits": phase_waits, "phase_ran_out": ran_out, "phase_spill": spill, "phase_drain_s": drain_s,
            "phase_stragglers": stragglers}


async def _bare_http_cpu(url: str, pid: int, rate: int, seconds: float, body: bytes) -> float:
    """Server CPU (ms) per request of ``bare_http``'s app, offered ``rate``/s for ``seconds`` open loop by the
    same client as the commands (the baseline of ``CPU per command``)."""
    lean = CommandSender([url], CONNECTIONS)
    try:
        await lean.command("bare", body, "token")  # connected and answering before the clock starts
        cpu_before = cpu_seconds(pid)
        with _no_collection_while_offering():  # as for the commands: the same client, the same schedule
            started, tasks = time.perf_counter(), []
            for index in range(int(rate * seconds)):
                delay = started + index / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(lean.command("bare", body, "token")))
            answers = await asyncio.gather(*tasks)
        used = cpu_seconds(pid) - cpu_before
    finally:
        await lean.close()
    if any(status != 200 for status, _, _ in answers):
        raise RuntimeError("the bare HTTP server refused a request")
    return used / len(answers) * 1000


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc); 0 where unavailable."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")



@contextlib.contextmanager
def _no_collection_while_offering() -> Any:
    """The load generator does not collect garbage while it offers the load: it is the measuring instrument.

    Its heap (every request's task is kept until the end) made a full collection take 130 ms at 1,000/s,
    twice in an 8 s run: every request due meanwhile was sent that late, and the lateness counted in the
    stack's latencies (its lateness p99 at 3,500/s: 58-83 ms collecting, 4.2-5.9 ms not; docs/capacity.md,
    ninth pass). What exists before the load is frozen out of later collections; what the load leaves is
    collected after; the collector is left as it was found.
    """
    enabled, frozen_before = gc.isenabled(), gc.get_freeze_count()
    if not frozen_before:  # frozen already (by whoever runs this): left as it was found
        gc.collect()
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if not frozen_before:
            gc.unfreeze()


def _run_loop(coroutine: Any) -> Any:
    """Run on uvloop, as the gateway does: the load generator shares the cores with the stack it measures."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def _first_and_later(first: list[float], later: list[float]) -> dict[str, float | int]:
    """p50 / p99 (ms) of the accepted commands that were their room's first of the load, and of the others."""
    figures: dict[str, float | int] = {"first_count": len(first), "later_count": len(later)}
    for name, samples in (("first", first), ("later", later)):
        figures[f"{name}_p50_ms"] = _quantile(samples, 0.50) * 1000 if samples else float("nan")
        figures[f"{name}_p99_ms"] = _quantile(samples, 0.99) * 1000 if samples else float("nan")
    return figures


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(rate: int = 500, seconds: int = 10, url: str | None = None, engines: int = 0,
         gateways: int = 1, route_by_shard: bool = False,
         out_of_step: bool = False, peer: bool = False, overload: float = 0.0,
         deadline_ms: int = DEADLINE_MS, pin: bool | None = None) -> dict[str, Any]:
    """Start the stack (unless ``url`` names a running gateway), offer ``rate`` commands/s for ``seconds``, print.

    ``gateways`` > 1 starts that many gateway processes; ``engines`` 0 (the product's shape): the gateways decide
    the commands of the shards they hold; ``engines`` > 0: gateways that hold no shard (ALMANAC_ENGINE_SHARDS=none)
    and that many `almanac engine` processes (shard groups), the layout before the gateways decided;
    ``route_by_shard``: each command to the gateway holding its room's shard (see ``_offer_load``);
    ``out_of_step``: the rooms spread over the game's moves instead of all on the same one (``RoomSlots``);
    ``peer``: then offer the same schedule to boardgame.io's server and print the two side by side (peer.py);
    ``overload``: then, on the same stack, offer that many times what the first load achieved (its capacity, when
    ``rate`` is at or past it) in windows interleaved with capacity windows, and print the goodput (accepted within
    ``deadline_ms``) against the capacity measured on either side of each (``_with_overload``);
    ``pin``: a stack of its own and the load generator on disjoint CPUs (``cores.split``), where there are two or more;
    None: with ``overload`` (the generator offers several times the capacity there, and would take its CPU from the
    stack in the overload windows only), not without (the figures kept since before pinning compare).
    """
    settings = bootstrap.settings()
    running = None
    if url is None:
        running = bootstrap.running_stack(settings.data_dir)
        url = running["url"] if running else None
    if url is not None:
        redis_url = running["redis_url"] if running else (settings.redis_url or "")
        figures = _with_overload(lambda offered: _run([url], redis_url, offered, seconds, out_of_step=out_of_step),
                                 rate, overload, lambda plan, most: _run_windows([url], plan, most, out_of_step=out_of_step),
                                 deadline_ms)
    else:
        figures = _run_on_own_stack(settings, rate, seconds, engines, gateways, route_by_shard, out_of_step, overload,
                                    deadline_ms, bool(overload) if pin is None else pin)
    if peer:  # after our stack has stopped: the peer gets the machine as our stack had it
        offer_peer(figures, rate, seconds)
    return figures


def _run_on_own_stack(settings: Settings, rate: int, seconds: int, engines: int, gateways: int,
                      route_by_shard: bool, out_of_step: bool, overload: float = 0.0,
                      deadline_ms: int = DEADLINE_MS, pin: bool = False) -> dict[str, Any]:
    """``_run`` on a stack of our own (Redis, engines, projector, gateways) in a temporary folder, stopped after."""
    with tempfile.TemporaryDirectory(prefix="almanac-bench-") as data_dir:
        stack_settings = settings.model_copy(update={"data_dir": data_dir, "http_port": 0, "log_level": "warning"})
        os.environ.setdefault("ALMANAC_LOG_LEVEL", "warning")
        console.print(f"starting Redis, {engines} engine(s), a projector and {gateways} gateway(s)"
                      f"{' holding no shard' if engines else ' deciding the commands of the shards they hold'} "
                      f"(ALMANAC_DURABILITY={settings.durability}) ...")
        cores = cpu_cores.split(os.sched_getaffinity(0)) if pin else None
        # Redis starts as the stack is entered: the stack's CPUs from before then, so its threads inherit them.
        with cpu_cores.kept_apart(cores), Stack(stack_settings, engines=engines, gateways=gateways,
                                                say=console.print) as stack:
            stack.start()
            pids = {name: child.pid for name, child in stack.children.items()}
            marker = stack.data_dir / "redis.running"  # written by the embedded Redis: "<pid> <url>"
            if marker.exists():
                pids["redis"] = int(marker.read_text().split()[0])
            if cores is not None:
                cpu_cores.generate(cores, pids.values())
            console.print(f"pinning: {cores.describe()}" if cores is not None else
                          f"pinning: none (the stack and the load generator share {len(os.sched_getaffinity(0))} "
                          "CPUs" + (", the fewest that can be split: 2)" if pin else ")"), soft_wrap=True)
            return _with_overload(lambda offered: _run(stack.urls, stack.redis_url, offered, seconds, pids,
                                                       route_by_shard, out_of_step, cores), rate, overload,
                                  lambda plan, most: _run_windows(stack.urls, plan, most, pids, route_by_shard,
                                                                   out_of_step, stack.redis_url),
                                  deadline_ms)


def _with_overload(run: Callable[[int], dict[str, Any]], rate: int, overload: float,
                   windows: Callable[[list[tuple[str, float, float]], int], list[dict[str, Any]]] | None = None,
                   deadline_ms: int = DEADLINE_MS) -> dict[str, Any]:
    """``run(rate)``; with ``overload``, then interleaved windows on the same stack, rooms and connections:
    capacity, overload, capacity, ... (``windows(plan)``, ``OVERLOAD_ROUNDS`` overload windows each between two
    capacity windows), and the goodput of each overload window judged against the capacity windows on either
    side of it, seconds apart (``judge_windows``; ``figures["overload"]``).

    The capacity is measured around each overload window, not once: on a machine shared with other work the
    stack's capacity moved by up to 7x between two runs a minute apart (docs/capacity.md, issue 28), which a
    before-and-after pair cannot tell from the gateway's own behaviour. Each window also reports the CPU the
    stack, the load generator and everything else on the machine used, and the load average, so a run on a
    loaded machine says so; and the goodput per CPU second of the stack, which the others' load moves far less."""
    figures = run(rate)
    if not overload:
        return figures
    if windows is None:
        raise ValueError("an overload measurement needs the windows' runner")
    plan = [("closed", 0.0, OVERLOAD_WINDOW_S), ("open", overload, OVERLOAD_WINDOW_S)] * OVERLOAD_ROUNDS
    plan.append(("closed", 0.0, OVERLOAD_WINDOW_S))
    console.print(f"overload, the same stack: windows of {OVERLOAD_WINDOW_S:g} s alternating capacity (closed loop: "
                  f"as many clients as the gateways admit commands, each sending its next when answered) and "
                  f"{overload:g}x the capacity just measured (open loop); goodput = answered 200 within {deadline_ms} "
                  "ms ...", soft_wrap=True)
    # The rooms are sized for the windows at the capacity this estimates, with a margin, and more are opened between
    # windows when a capacity window measured more (``commands_to_add``). Twice what the first run achieved (past
    # capacity, a first run's own collapse is rarely deeper), at most the offered rate: rooms for the whole offered
    # rate took minutes to open on a loaded machine.
    most = min(rate, max(1, round(2 * figures["achieved_per_s"])))
    verdict = judge_windows(windows(plan, most), deadline_ms / 1000)
    overloads = [window["offered_per_s"] for window in verdict["windows"] if window["kind"] == "overload"]
    verdict.update(offered_per_s=round(statistics.fmean(overloads)) if overloads else 0, multiple=overload,
                   first_run_per_s=figures["achieved_per_s"], deadline_ms=deadline_ms)
    figures["overload"] = verdict
    _print_windows(verdict)
    return figures


def judge_windows(windows: list[dict[str, Any]], deadline_s: float) -> dict[str, Any]:
    """Goodput per window (answered 200 within ``deadline_s`` of the scheduled send, per second) and, for each
    overload window (the odd ones), its ratio to the mean of the capacity windows on either side, raw and per CPU
    second of the stack. ``windows``: alternating capacity and overload, each {"offered_per_s", "seconds",
    "answers": [(status, latency_s)], "stack_cpu_s", "generator_cpu_s", "others_cpu_s", "elapsed_s", "load_1m"}."""
    judged = []
    for number, window in enumerate(windows):
        answers = window["answers"]
        good = sum(1 for status, latency in answers if status == 200 and latency <= deadline_s)
        accepted = sum(1 for status, _ in answers if status == 200)
        shed = sum(1 for status, _ in answers if status in (429, 503))
        elapsed = window["elapsed_s"] or window["seconds"]
        stack_cpu = window["stack_cpu_s"]
        judged.append({
            "kind": "overload" if number % 2 else "capacity", "offered_per_s": window["offered_per_s"],
            "goodput_per_s": good / window["seconds"], "accepted_per_s": accepted / window["seconds"],
            "late": accepted - good, "shed": shed, "other": len(answers) - accepted - shed,
            "stack_cores": stack_cpu / elapsed, "generator_cores": window["generator_cpu_s"] / elapsed,
            "others_cores": window["others_cpu_s"] / elapsed, "load_1m": window["load_1m"],
            "stack_runqueue_s": window.get("stack_runqueue_s", 0.0),
            # Useful commands per CPU second of the stack: what the stack does with the CPU it was given.
            "goodput_per_cpu_s": good / stack_cpu if stack_cpu > 0 else float("nan"),
            "refusals": window.get("refusals", {}), "gateway_cores": window.get("gateway_cpu_s", 0.0) / elapsed,
            "started_at": window.get("started_at"), "redis_forks": window.get("redis_forks", ""),
            "aof_mb": window.get("aof_mb", 0.0),
            "generator_late_ms": _quantile(window["generator_late"], 0.99) * 1000 if window.get("generator_late") else 0.0,
            "connection_waits": window.get("connection_waits", 0),
            "process_cores": {name: used / elapsed for name, used in window.get("process_cpu_s", {}).items()},
            # It wanted more commands than the rooms held (it offered less than planned, or ended early): its goodput
            # per planned second measures the rooms, so it is not counted (``counted_neighbours``).
            "ran_out": bool(window.get("ran_out")), "spill": window.get("spill", 0),
            "drain_s": window.get("drain_s", 0.0), "stragglers": window.get("stragglers", 0),
        })
    ratios, normalised, kept_up = [], [], []
    for number in range(1, len(judged) - 1, 2):
        window = judged[number]
        around = counted_neighbours(judged, number)
        if not around:  # it ran out of rooms, or both capacity windows beside it did: no ratio, not counted
            continue
        capacity = statistics.fmean(side["goodput_per_s"] for side in around)
        per_cpu = statistics.fmean(side["goodput_per_cpu_s"] for side in around)
        window["ratio"] = window["goodput_per_s"] / capacity if capacity else float("nan")
        window["cpu_normalised_ratio"] = window["goodput_per_cpu_s"] / per_cpu if per_cpu else float("nan")
        ratios.append(window["ratio"])
        normalised.append(window["cpu_normalised_ratio"])
        window["generator_behind"] = window["generator_late_ms"] >= GENERATOR_BEHIND_MS
        if not window["generator_behind"]:
            kept_up.append(window["ratio"])
    overloads = [window for window in judged if "ratio" in window]
    capacities = [window for window in judged if window["kind"] == "capacity" and not window["ran_out"]]
    capacity = statistics.fmean(window["goodput_per_s"] for window in capacities) if capacities else float("nan")
    goodput = statistics.fmean(window["goodput_per_s"] for window in overloads) if overloads else float("nan")
    return {"windows": judged, "capacity_per_s": capacity, "goodput_per_s": goodput,
            "ratio": goodput / capacity if capacity else float("nan"),
            "worst_window_ratio": min(ratios, default=float("nan")),
            "cpu_normalised_ratio": statistics.fmean(normalised) if normalised else float("nan"),
            "load_1m": [window["load_1m"] for window in judged],
            "others_cores_max": max(window["others_cores"] for window in judged),
            # The overload windows offered as scheduled (the generator kept up), and their mean ratio.
            "kept_up_windows": len(kept_up), "kept_up_ratio": statistics.fmean(kept_up) if kept_up else float("nan"),
            "ran_out_windows": [number for number, window in enumerate(judged) if window["ran_out"]],
            **_refusal_cost(windows, judged)}


def counted_neighbours(judged: list[dict[str, Any]], number: int) -> list[dict[str, Any]]:
    """The capacity windows an overload window (``number``, odd) is judged against: those on either side of it that did
    not run out of rooms; none when it ran out itself (then it has no ratio and is counted nowhere)."""
    if judged[number]["ran_out"]:
        return []
    return [side for side in (judged[number - 1], judged[number + 1]) if not side["ran_out"]]


def _refusal_cost(windows: list[dict[str, Any]], judged: list[dict[str, Any]]) -> dict[str, float]:
    """The gateways' CPU per accepted command (``command_cpu_us``: the capacity windows) and per refusal
    (``refusal_cpu_us``: what the overload windows used beyond their accepted commands, over their refusals), the
    multiple the overload windows were offered of the capacity beside them (``multiple_offered``), and the share of
    capacity a gateway with the same CPU in both kinds of window keeps at that multiple when refusals cost that
    much: (c - m r) / (c - r) (``refusal_bound``; docs/capacity.md, issue 28 item 19's fifth pass). Empty when the
    gateways' CPU was not measured."""
    cpu = [window.get("gateway_cpu_s", 0.0) for window in windows]
    accepted = [round(window["accepted_per_s"] * window_in["seconds"]) for window, window_in in zip(judged, windows,
                                                                                                     strict=True)]
    capacity_windows = [number for number in range(0, len(judged), 2) if not judged[number]["ran_out"]]
    capacity_cpu = sum(cpu[number] for number in capacity_windows)
    capacity_accepted = sum(accepted[number] for number in capacity_windows)
    overload = [number for number in range(1, len(judged) - 1, 2) if "ratio" in judged[number]]
    refused = sum(judged[number]["shed"] for number in overload)
    if not capacity_cpu or not capacity_accepted or not refused:
        return {}
    command = capacity_cpu / capacity_accepted
    refusal = max(0.0, sum(cpu[number] - accepted[number] * command for number in overload) / refused)
    around = [statistics.fmean(side["goodput_per_s"] for side in counted_neighbours(judged, number)) for number in overload]
    multiples = [judged[number]["offered_per_s"] / capacity for number, capacity in zip(overload, around, strict=True)
                 if capacity]
    if not multiples:
        return {}
    multiple = statistics.fmean(multiples)
    return {"command_cpu_us": command * 1e6, "refusal_cpu_us": refusal * 1e6, "multiple_offered": multiple,
            "refusal_bound": (command - multiple * refusal) / (command - refusal) if command > refusal else 0.0}


def _print_windows(verdict: dict[str, Any]) -> None:
    """One line per window (plain lines: a log keeps them whole), then the verdict."""
    console.print(f"overload, interleaved windows (goodput: answered 200 within {verdict['deadline_ms']} ms); CPU in "
                  "cores: the stack's, the load generator's, every other process's on the machine", soft_wrap=True)
    for number, window in enumerate(verdict["windows"]):
        ratio = (f" ratio {window['ratio']:.2f} (per CPU s {window['cpu_normalised_ratio']:.2f})"
                 if "ratio" in window else "")
        at = time.strftime("%H:%M:%S ", time.gmtime(window["started_at"])) if window.get("started_at") else ""
        console.print(f"  {number} {at}{window['kind']:8} offered {window['offered_per_s']}/s goodput "
                      f"{window['goodput_per_s']:.0f}/s late {window['late']} shed {window['shed']} other "
                      f"{window['other']}{ratio}; CPU stack {window['stack_cores']:.2f} (gateways "
                      f"{window['gateway_cores']:.2f}) generator "
                      f"{window['generator_cores']:.2f} others {window['others_cores']:.2f}; the stack waited "
                      f"{window['stack_runqueue_s']:.2f} s for a CPU; load {window['load_1m']:.2f}"
                      + _refusal_kinds(window.get("refusals", {})) + _process_cores(window.get("process_cores", {}))
                      + (f"; generator late p99 {window['generator_late_ms']:.0f} ms, {window['connection_waits']} sends "
                         "waited for a connection" if "generator_late_ms" in window else "")
                      + ("; GENERATOR BEHIND: its sends bunched, this ratio measures the generator"
                         if window.get("generator_behind") else "")
                      + (f"; AOF {window['aof_mb']:.0f} MB" if window.get("aof_mb") else "")
                      + _spill(window)
                      + ("; RAN OUT OF ROOMS: offered less than planned, not counted" if window.get("ran_out") else "")
                      + (f"; REDIS FORKED: {window['redis_forks']}" if window.get("redis_forks") else ""),
                      soft_wrap=True)
    if verdict.get("ran_out_windows"):
        console.print(f"overload: window(s) {', '.join(str(n) for n in verdict['ran_out_windows'])} ran out of rooms "
                      "and are not counted (an overload window gets no ratio; a capacity window is left out of the "
                      "capacity beside it)", soft_wrap=True)
    if "refusal_cpu_us" in verdict:
        console.print(f"overload: the gateways' CPU per accepted command {verdict['command_cpu_us']:.0f} µs (capacity "
                      f"windows), per refusal {verdict['refusal_cpu_us']:.0f} µs (overload windows, beyond their "
                      f"commands): offered {verdict['multiple_offered']:.2f}x the capacity beside them, a gateway with "
                      f"the same CPU in both keeps (c - m r) / (c - r) = {verdict['refusal_bound']:.2f} of its "
                      "capacity", soft_wrap=True)
    busy = verdict["others_cores_max"] > 0.25
    console.print(f"overload: goodput {verdict['goodput_per_s']:.0f}/s at {verdict['offered_per_s']}/s offered against "
                  f"capacity {verdict['capacity_per_s']:.0f}/s measured between its windows: ratio "
                  f"{verdict['ratio']:.2f} (worst window {verdict['worst_window_ratio']:.2f}); per CPU second of the "
                  f"stack {verdict['cpu_normalised_ratio']:.2f}; load average {min(verdict['load_1m']):.2f}-"
                  f"{max(verdict['load_1m']):.2f} on {os.cpu_count()} cores"
                  + (f"; OTHER PROCESSES used up to {verdict['others_cores_max']:.2f} cores during a window: the raw "
                     "ratio measures them too" if busy else ""), soft_wrap=True)
    overloads = sum(1 for window in verdict["windows"] if window["kind"] == "overload")
    if verdict["kept_up_windows"] < overloads:
        console.print(f"overload: the generator fell behind (its sends' p99 lateness {GENERATOR_BEHIND_MS:.0f} ms or more) "
                      f"in {overloads - verdict['kept_up_windows']} of {overloads} overload windows; ratio over the "
                      f"{verdict['kept_up_windows']} it kept up in: {verdict['kept_up_ratio']:.2f}", soft_wrap=True)


class RedisForks:
    """The stack's Redis as the windows see it: its forks (an AOF rewrite or a snapshot: ``INFO``'s
    ``total_forks``) counted window by window, and one AOF rewrite made before the first window.

    A fork stops Redis for the fork itself (4-12 ms at 37 MB here) and its child then takes CPU from the stack's for
    the rewrite (0.2 s at 37 MB, on the stack's CPUs: it inherits them); Redis rewrites its AOF by itself when the
    file has doubled since the last rewrite, from 64 MB. On a quiet machine the stack has written most of that
    before the windows begin (its rooms, the first run) and crosses 64 MB about the first capacity and overload
    windows, where the first run's and the capacity's figures place it: in an overload window it lowers that
    window's ratio, in a capacity window it lowers the capacity and raises the ratios beside it (issue 28, item 19).
    Rewritten once just before the first window, with Redis's own rewrite held off until the last window ends
    (``auto-aof-rewrite-percentage`` 0, then as it was): every command is still appended and synced as the stack
    does, only the rewrite, a cost of the bytes written and not of the admission, falls in no window. A window with
    a fork all the same (a snapshot, a rewrite asked by another) says so."""

    def __init__(self, url: str | None, wait_s: float = 120.0) -> None:
        self.client = bootstrap.tool_sync_client(url) if url else None
        self.wait_s = wait_s
        self.rewritten = ""  # how the rewrite before the windows went, for the run's output
        self._held: str | None = None  # auto-aof-rewrite-percentage as it was, while held off

    def read(self) -> dict[str, int]:
        if self.client is None:
            return {}
        info = {**self.client.info("persistence"), **self.client.info("stats")}
        return {"forks": int(info.get("total_forks", 0)), "fork_us": int(info.get("latest_fork_usec", 0)),
                "aof_rewrites": int(info.get("aof_rewrites", 0)), "saves": int(info.get("rdb_saves", 0)),
                "rewriting": int(info.get("aof_rewrite_in_progress", 0)) or int(info.get("aof_rewrite_scheduled", 0)),
                "aof_bytes": int(info.get("aof_current_size", 0))}

    @staticmethod
    def between(before: dict[str, int], after: dict[str, int]) -> str:
        """What Redis forked for between two readings ("1 fork (AOF rewrite), the last 11.9 ms"; a rewrite still
        running at either end); "" for none, or when Redis was not read."""
        if not before or not after:
            return ""
        forks = after["forks"] - before["forks"]
        running = before["rewriting"] or after["rewriting"]
        if not forks and not running:
            return ""
        kinds = ", ".join(kind for kind, happened in (
            ("AOF rewrite", after["aof_rewrites"] - before["aof_rewrites"] or running),
            ("snapshot", after["saves"] - before["saves"])) if happened)
        return (f"{forks} fork{'' if forks == 1 else 's'} ({kinds or 'other'}), the last "
                f"{after['fork_us'] / 1000:.1f} ms" + ("; a rewrite running" if running else ""))

    def rewrite_before(self) -> None:
        """Rewrite the AOF now and wait for it (nothing is offered meanwhile); nothing without AOF."""
        if self.client is None or not int(self.client.info("persistence").get("aof_enabled", 0)):
            return
        self._held = str(self.client.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"])
        self.client.config_set("auto-aof-rewrite-percentage", 0)
        before = self.read()
        started = time.perf_counter()
        with contextlib.suppress(Exception):  # "already in progress": then that one is waited for
            self.client.bgrewriteaof()
        while time.perf_counter() - started < self.wait_s:
            now = self.read()
            if not now["rewriting"] and now["aof_rewrites"] > before["aof_rewrites"]:
                self.rewritten = (f"{before['aof_bytes'] / 1e6:.0f} MB -> {now['aof_bytes'] / 1e6:.0f} MB in "
                                  f"{time.perf_counter() - started:.1f} s, fork {now['fork_us'] / 1000:.1f} ms; its "
                                  f"own rewrites held off until the last window ends")
                return
            time.sleep(0.05)
        self.rewritten = f"not finished within {self.wait_s:g} s"

    def close(self) -> None:
        if self.client is not None:
            if self._held is not None:
                with contextlib.suppress(Exception):  # the stack may be stopping: its Redis with it
                    self.client.config_set("auto-aof-rewrite-percentage", self._held)
            self.client.close()


def _process_cores(cores: dict[str, float]) -> str:
    """Each of the stack's processes' CPU in the window, in cores ("; by process: gateway 0.61, redis 0.20, ..."):
    which of them took the stack's CPU from which, window by window."""
    return ("; by process: " + ", ".join(f"{name} {used:.2f}" for name, used in cores.items())) if cores else ""


def _spill(window: dict[str, Any]) -> str:
    """An overload window's sends still queued or unanswered at its end ("; spill: 120 sends unanswered at its end,
    drained in 0.31 s before the next window"), or nothing."""
    if not window.get("spill"):
        return ""
    left = window.get("stragglers", 0)
    return (f"; spill: {window['spill']} sends unanswered at its end, drained in {window.get('drain_s', 0.0):.2f} s "
            "before the next window" + (f" ({left} still unanswered as it began)" if left else ""))


def _refusal_kinds(refusals: dict[str, int]) -> str:
    """A window's refusals by admission's rule, short ("; refused: in flight 812, queue 40"), or nothing."""
    short = {"in flight": "in flight", "wait more": "queue", "fair share": "fair share"}
    counts: dict[str, int] = {}
    for kind, count in refusals.items():
        name = next((label for words, label in short.items() if words in kind), kind)
        counts[name] = counts.get(name, 0) + count
    return ("; refused: " + ", ".join(f"{name} {count}" for name, count in counts.items())) if counts else ""


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (every core; /proc/stat, idle and iowait excluded)."""
    try:
        fields = [int(field) for field in open("/proc/stat").readline().split()[1:]]
    except OSError:
        return 0.0
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _runqueue_wait_s(pid: int) -> float:
    """How long a process's main thread has waited, runnable, for a CPU (/proc/PID/schedstat); 0 where unavailable.
    A stack that waits for the CPU while others hold it is measured slow for reasons of the machine's."""
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _run_windows(urls: list[str], plan: list[tuple[str, float, float]], rate: int, pids: dict[str, int] | None = None,
                 route_by_shard: bool = False, out_of_step: bool = False,
                 redis_url: str | None = None) -> list[dict[str, Any]]:
    """Offer ``plan``'s windows back to back (``_offer_load``'s phases; rooms first sized for a capacity of ``rate``
    commands/s; a closed window of 0 clients: as many as the gateways admit at once): each window's answers, with the CPU the stack (``pids``),
    each of its processes, the load generator and the rest of the machine used during it, its run-queue wait, the
    load average and (``redis_url``: the stack's Redis) the forks Redis made in it (``RedisForks``), after the AOF
    was rewritten once before the first window (``RedisForks.rewrite_before``)."""
    clients = bootstrap.settings().gateway_max_inflight * len(urls)
    plan = [(kind, value or (clients if kind == "closed" else value), seconds) for kind, value, seconds in plan]
    pids = {**(pids or {}), "load generator": os.getpid()}
    marks: dict[tuple[int, bool], tuple[float, float, dict[str, float], float, float, float, dict[str, int]]] = {}
    forks = RedisForks(redis_url)

    def mark(window: int, ending: bool) -> None:
        marks[window, ending] = (time.perf_counter(), time.time(), {name: cpu_seconds(pid) for name, pid in pids.items()},
                                 _machine_busy_s(), os.getloadavg()[0],
                                 sum(_runqueue_wait_s(pid) for name, pid in pids.items() if name != "load generator"),
                                 forks.read())

    try:
        result = _run_loop(_offer_load(urls, rate, 0, forks.rewrite_before, route_by_shard, out_of_step, phases=plan,
                                       on_window=mark, redis_url=redis_url))
    finally:
        forks.close()
    if forks.rewritten:
        console.print(f"Redis: the AOF rewritten before the first window ({forks.rewritten})", soft_wrap=True)
    windows = []
    for number, ((_, _, seconds), answers, offered) in enumerate(zip(plan, result["phases"], result["phase_rates"],
                                                                    strict=True)):
        # From its start to its end (its sends answered): not the rooms opened before the next window.
        ((t0, wall0, cpu0, busy0, load0, wait0, redis0),
         (t1, _, cpu1, busy1, _, wait1, redis1)) = marks[number, False], marks[number, True]
        used = {name: cpu1[name] - cpu0[name] for name in pids}
        stack = sum(value for name, value in used.items() if name != "load generator")
        windows.append({"offered_per_s": round(offered), "seconds": seconds, "answers": answers, "elapsed_s": t1 - t0,
                        "started_at": wall0,
                        "stack_cpu_s": stack, "generator_cpu_s": used["load generator"],
                        "others_cpu_s": max(0.0, busy1 - busy0 - stack - used["load generator"]), "load_1m": load0,
                        "stack_runqueue_s": wait1 - wait0, "refusals": result["phase_refusals"][number],
                        "gateway_cpu_s": sum(value for name, value in used.items() if name.startswith("gateway")),
                        "process_cpu_s": {name: value for name, value in used.items() if name != "load generator"},
                        "redis_forks": RedisForks.between(redis0, redis1),
                        "generator_late": result["phase_late"][number],
                        "connection_waits": result["phase_waits"][number],
                        "aof_mb": redis0.get("aof_bytes", 0) / 1e6,
                        "ran_out": result["phase_ran_out"][number], "spill": result["phase_spill"][number],
                        "drain_s": result["phase_drain_s"][number], "stragglers": result["phase_stragglers"][number]})
    return windows


def _run(urls: list[str], redis_url: str, rate: int, seconds: int, pids: dict[str, int] | None = None,
         route_by_shard: bool = False, out_of_step: bool = False,
         cores: cpu_cores.CoreSplit | None = None) -> dict[str, Any]:
    console.print(f"offering {rate} commands/s for {seconds} s to {', '.join(urls)} ...")
    pids = {**(pids or {}), "load generator": os.getpid()}
    cpu_before: dict[str, float] = {}

    def on_load_start() -> None:
        cpu_before.update({name: cpu_seconds(pid) for name, pid in pids.items()})

    result = _run_loop(_offer_load(urls, rate, seconds, on_load_start, route_by_shard, out_of_step,
                                   redis_url=redis_url or None))
    cpu_used = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    stack_cpu = sum(used for name, used in cpu_used.items() if name != "load generator")
    floor = _run_loop(_ping_floor(redis_url)) if redis_url else []
    bare_ms = float("nan")
    if stack_cpu > 0:  # not for a stack started elsewhere (``--url``): its CPU is not measured here
        with bare_http.bare_server() as bare:
            bare.wait_answering(bare_http.answers, bare_http.START_TIMEOUT_S)
            if cores is not None:  # the baseline server where the stack runs, not beside the generator
                cpu_cores.pin(bare.pid, cores.stack)
            body = CommandSender.body(result["first_move"])
            bare_ms = _run_loop(_bare_http_cpu(bare.url, bare.pid, rate, min(seconds, BARE_SECONDS), body))
    latencies = result["latencies"]
    accepted = result["accepted_latencies"]
    ok = len(accepted)
    shed = {code: count for code, count in result["failures"].items() if code.startswith(("503", "429"))}
    errors_5xx = {code: count for code, count in result["failures"].items()
                  if code.startswith("5") and not code.startswith("503")}
    figures = {
        "offered_per_s": rate,
        "out_of_step": result["out_of_step"],
        "schedule": result["schedule"],
        "achieved_per_s": ok / result["elapsed"],
        "p50_ms": _quantile(latencies, 0.50) * 1000,
        "p95_ms": _quantile(latencies, 0.95) * 1000,
        "p99_ms": _quantile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000,
        "accepted_p50_ms": _quantile(accepted, 0.50) * 1000 if accepted else float("nan"),
        "accepted_p99_ms": _quantile(accepted, 0.99) * 1000 if accepted else float("nan"),
        **_first_and_later(result["first_latencies"], result["later_latencies"]),
        "shed": sum(shed.values()),
        "shed_by_code": shed,
        "errors_5xx": sum(errors_5xx.values()),
        "retry_after_present": len(result["retry_after"]),
        # Every process of the stack (engine, projector, gateway, Redis; not the load generator) per accepted
        # command, measured over the load only. Refused commands cost CPU too, and are counted in it.
        "cpu_ms_per_command": stack_cpu / ok * 1000 if ok else float("nan"),
        "bare_http_cpu_ms": bare_ms,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "failures": result["failures"],
        "ping_p50_ms": _quantile(floor, 0.5) * 1000 if floor else float("nan"),
        "answered_per_gateway": result["answered_per_gateway"],
        "generator_late_p99_ms": _quantile(result["late"], 0.99) * 1000,
    }
    table = Table(title=f"HTTP -> engine -> events -> answer: {len(latencies)} commands over {result['rooms']} "
                        f"{result['ruleset']} rooms ({result['script']} moves each; "
                        + ("out of step: each room at its own move, season ends spread)" if result["out_of_step"]
                           else "in step: every room at the same move, season ends together)"))
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("offered", f"{rate} /s")
    table.add_row("achieved (accepted)", f"{figures['achieved_per_s']:.0f} /s")
    for name in ("p50", "p95", "p99", "max"):
        table.add_row(f"{name} round trip", f"{figures[name + '_ms']:.2f} ms")
    table.add_row("shed (503/429, with Retry-After)",
                  f"{figures['shed']} ({', '.join(f'{k}: {v}' for k, v in shed.items()) or 'none'}; "
                  f"Retry-After on {figures['retry_after_present']})")
    table.add_row("p50 / p99 of accepted", f"{figures['accepted_p50_ms']:.2f} / {figures['accepted_p99_ms']:.2f} ms")
    table.add_row("same: rooms' first commands", f"{figures['first_p50_ms']:.2f} / {figures['first_p99_ms']:.2f} ms "
                  f"({figures['first_count']})")
    table.add_row("same: later commands", f"{figures['later_p50_ms']:.2f} / {figures['later_p99_ms']:.2f} ms "
                  f"({figures['later_count']})")
    table.add_row("load generator's own lateness p99", f"{figures['generator_late_p99_ms']:.2f} ms")
    table.add_row("failures", ", ".join(f"{k}: {v}" for k, v in result["failures"].items()) or "none")
    if len(urls) > 1:
        table.add_row("answers per gateway", " / ".join(str(n) for n in result["answered_per_gateway"]))
    table.add_row("floor: redis-py PING p50", f"{figures['ping_p50_ms']:.3f} ms")
    table.add_row("p50 / PING p50", f"{figures['p50_ms'] / figures['ping_p50_ms']:.1f}x")
    for name, used in cpu_used.items():
        # Includes room creation; shows which process limits throughput on a small machine.
        table.add_row(f"CPU {name}", f"{used:.1f} s ({used / result['elapsed'] * 100:.0f}% of a core)")
    figures["cpu_s"] = cpu_used
    by_service: dict[str, float] = {}
    for name, used in cpu_used.items():  # "engine-2" is an engine: per service, all its processes
        if name != "load generator":
            service = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else name
            by_service[service] = by_service.get(service, 0.0) + used
    figures["cpu_ms_per_command_by_service"] = {name: used / ok * 1000 if ok else float("nan")
                                                for name, used in by_service.items()}
    console.print(table)
    console.print(f"CPU per command across the stack: {figures['cpu_ms_per_command']:.2f} ms "
                  f"({stack_cpu:.2f} s of {', '.join(n for n in cpu_used if n != 'load generator')} "
                  f"over {ok} accepted commands)")
    if bare_ms > 0:  # (NaN when not measured; 0 when the clock's tick was too coarse for so little)
        console.print(f"baseline, the same run: a bare uvicorn app (httptools, uvloop) answering the same requests "
                      f"at the same rate costs {bare_ms:.3f} ms of CPU per request; CPU per command / bare "
                      f"request: {figures['cpu_ms_per_command'] / bare_ms:.1f}x"
                      + (" (past capacity: the stack's refusals are in its CPU, only its accepted commands in the"
                         " count)" if shed else ""))
    if shed or rate > figures["achieved_per_s"] * 1.1:
        console.print(f"past capacity: offered {rate}/s, achieved {figures['achieved_per_s']:.0f}/s, "
                      f"shed {figures['shed']}, p99 of accepted {figures['accepted_p99_ms']:.1f} ms, "
                      f"other 5xx {figures['errors_5xx']}")
    return figures


def offer_peer(figures: dict[str, Any], rate: int, seconds: int) -> None:
    """The run's schedule (``figures["schedule"]``) offered to boardgame.io's server: its figures printed beside
    Almanac's and kept in ``figures["peer"]``, or why it was not measured."""
    console.print(f"offering the same schedule, {rate} moves/s for {seconds} s, to the peer, boardgame.io's server ...")
    try:
        peer = peer_figures(rate, seconds, figures["schedule"])
    except PeerUnavailable as reason:
        console.print(f"peer: not measured ({reason})")
        return
    figures["peer"] = peer
    # Our CPU is NaN for a stack started elsewhere (``almanac up``): its processes were not measured.
    figures["cpu_to_peer"] = figures["cpu_ms_per_command"] / peer["server_cpu_ms_per_move"]
    ratio = ("not measured (a stack started elsewhere)" if math.isnan(figures["cpu_to_peer"])
             else f"{figures['cpu_to_peer']:.1f}x")
    console.print(f"peer, the same schedule: boardgame.io {peer['version']} (one Node process, matches in memory, no "
                  f"durable log, no command ids; socket.io, {peer['matches']} matches): "
                  f"{peer['achieved_per_s']:.0f} moves/s, p50 / p99 {peer['p50_ms']:.2f} / {peer['p99_ms']:.2f} ms from "
                  f"the scheduled send ({_round_trips(peer)}), "
                  f"{peer['unanswered']} unanswered; its load generator (a boardgame.io client per match) used "
                  f"{peer['load_generator_cpu_s']:.1f} s of CPU, ours {figures['cpu_s']['load generator']:.1f} s, "
                  f"lateness p99 {peer['late_p99_ms']:.2f} ms; "
                  f"{peer['server_cpu_ms_per_move']:.3f} ms of CPU per move; Almanac's CPU per command / the "
                  f"peer's: {ratio}")


def _round_trips(peer: dict[str, Any]) -> str:
    """The peer's round trips from each move's own send ("from its send 0.41 / 2.10 ms"), where load.js gave them."""
    if peer.get("round_trip_p50_ms") is None:
        return "its round trips from the send not measured"
    return f"from its send {peer['round_trip_p50_ms']:.2f} / {peer['round_trip_p99_ms']:.2f} ms"


def failure_kind(status: int, answer: dict) -> str:
    """A refusal's status and code; for ``overloaded`` also which admission rule gave it, its numbers left out
    ("503 overloaded (N commands in flight in this gateway process)"), so a run says which rule shed what."""
    kind = f"{status} {answer.get('code')}"
    reason = re.search(r"busy \((.*)\); nothing was done", str(answer.get("message", "")))
    return f"{kind} ({re.sub(r'[0-9.]+', 'N', reason.group(1))})" if reason else kind
