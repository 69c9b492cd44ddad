"""The asyncio twin of ``almanac.client.Client``: the same calls, awaited (bots and services on an event loop).

    from almanac.client.aio import AsyncClient

    async with AsyncClient("http://127.0.0.1:8000") as client:
        seat = await client.create_room("realm", "alice", options={"players": ["alice", "bob"]})
        await seat.command({"kind": "end_turn"})
        async for event in seat.follow(idle_timeout_s=5):
            ...

Retries, command ids, errors, the live feed's reconnection and signed seats (``player_key``: every command signed
over the newest version seen, a ``409 version_moved`` signed again once) behave as in the synchronous client.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from almanac.client import (
    RECONNECT_CLOSE_CODES,
    RETRY_STATUSES,
    ApiError,
    CommandResult,
    Held,
    PlayerKey,
    SeatState,
    _error_of,
    _json_or_empty,
    _retry_after,
    _seg,
    create_body,
    new_command_id,
)
from almanac.client.signing import signed_join

__all__ = ["AsyncClient", "AsyncSeat"]


class AsyncClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0, retries: int = 6,
                 max_backoff_s: float = 10.0, pending_wait_s: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.retries = retries
        self.max_backoff_s = max_backoff_s
        self.pending_wait_s = pending_wait_s
        self.http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport)
        self.held = Held()  # as Client.held: checkpoints and refusal receipts per room
        self.keys: dict[str, Any] | None = None

    async def key_set(self) -> dict[str, Any]:
        """As ``Client.key_set``."""
        if self.keys is None:
            self.keys = await self.request("GET", "/.well-known/almanac-keys.json")
        return self.keys

    async def export_held(self, room: str, *, checkpoints: str | Any = None, receipts: str | Any = None,
                          keys: bool = True) -> None:
        """As ``Client.export_held``."""
        self.held.write(room, checkpoints=checkpoints, receipts=receipts, keys=await self.key_set() if keys else None)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _sleep(self, attempt: int, retry_after: float | None) -> None:
        delay = (retry_after + random.uniform(0, 0.25) if retry_after is not None
                 else min(self.max_backoff_s, 0.1 * 2**attempt) * random.uniform(0.5, 1.0))
        await asyncio.sleep(min(delay, self.max_backoff_s))

    async def request(self, method: str, path: str, *, token: str | None = None, json_body: Any = None,
                      params: dict[str, Any] | None = None, expect: tuple[int, ...] = (200, 201),
                      retry: bool = True) -> Any:
        bearer = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        attempt, pending_until = 0, 0.0
        while True:
            try:
                response = await self.http.request(method, path, headers=headers, json=json_body, params=params)
            except httpx.TransportError:
                if not retry or attempt >= self.retries:
                    raise
                await self._sleep(attempt, None)
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and retry and attempt < self.retries:
                await self._sleep(attempt, _retry_after(response))
                attempt += 1
                continue
            if response.status_code == 202 and method.upper() == "POST":
                if bearer:
                    return await self._await_outcome(response.json(), bearer)
                # A create or join (no token yet): the same body again, whose long command id gets the token
                pending_until = pending_until or time.monotonic() + self.pending_wait_s
                if time.monotonic() < pending_until:
                    await self._sleep(min(attempt, 4), None)
                    attempt += 1
                    continue
                raise _error_of(response)
            if response.status_code not in expect:
                error = _error_of(response)
                self.held.keep(error.body)  # a rule's refusal carries its receipt
                raise error
            if response.headers.get("content-type", "").startswith("application/json"):
                return self.held.keep(response.json())
            return response.text

    async def _await_outcome(self, pending: dict[str, Any], token: str | None) -> dict[str, Any]:
        deadline = time.monotonic() + self.pending_wait_s
        attempt = 0
        while True:
            try:
                return await self.request("GET", pending["outcome_url"], token=token)
            except ApiError as error:
                if error.code != "outcome_unknown" or time.monotonic() > deadline:
                    raise
            await self._sleep(min(attempt, 4), None)
            attempt += 1

    async def rulesets(self) -> list[dict[str, Any]]:
        return (await self.request("GET", "/rulesets"))["rulesets"]

    async def create_room(self, ruleset: str, player: str, *, room: str | None = None,
                          options: dict[str, Any] | None = None, setup: dict[str, Any] | None = None,
                          challenge: str | None = None, join: bool = True, dice_scheme: int | None = None,
                          nonce: str | None = None, command_id: str | None = None, bots: list[str] | None = None,
                          player_key: PlayerKey | None = None, seat_bots: bool = False,
                          bot_after_missed: int | None = None, bot_delay_ms: int = 0) -> AsyncSeat:
        """As ``Client.create_room`` (``player_key``: a signed seat; ``seat_bots``, ``bot_after_missed``: the room's
        bot policy; ``bots`` with ``bot_delay_ms``: seats a server bot plays)."""
        body = create_body(ruleset, player, room=room, options=options, setup=setup, challenge=challenge, join=join,
                           dice_scheme=dice_scheme, nonce=nonce, command_id=command_id, bots=bots,
                           player_key=player_key, seat_bots=seat_bots, bot_after_missed=bot_after_missed,
                           bot_delay_ms=bot_delay_ms)
        answer = await self.request("POST", "/rooms", json_body=body, token="")
        return AsyncSeat(self, answer["room"], player, answer["token"], answer, player_key=player_key).checked_join()

    async def join(self, room: str, player: str, *, nonce: str | None = None, command_id: str | None = None,
                   player_key: PlayerKey | None = None) -> AsyncSeat:
        """As ``Client.join`` (``player_key``: a signed seat)."""
        body: dict[str, Any] = {"player": player, "command_id": command_id or new_command_id()}
        if nonce is not None:
            body["nonce"] = nonce
        body.update(signed_join(player_key, room, player, nonce))
        answer = await self.request("POST", f"/rooms/{_seg(room)}/join", token="", json_body=body)
        return AsyncSeat(self, room, player, answer["token"], answer, player_key=player_key).checked_join()

    async def reclaim_seat(self, room: str, player: str, seat_key: str, *,
                           player_key: PlayerKey | None = None) -> AsyncSeat:
        answer = await self.request("POST", f"/rooms/{_seg(room)}/seat", token="",
                                    json_body={"player": player, "seat_key": seat_key})
        return AsyncSeat(self, room, player, answer["token"], {**answer, "seat_key": seat_key}, player_key=player_key)

    def seat(self, room: str, player: str, token: str, *, player_key: PlayerKey | None = None) -> AsyncSeat:
        return AsyncSeat(self, room, player, token, {}, player_key=player_key)

    async def room(self, room: str) -> dict[str, Any]:
        return await self.request("GET", f"/rooms/{_seg(room)}")

    async def scores(self, room: str) -> dict[str, int]:
        return (await self.request("GET", f"/rooms/{_seg(room)}/scores"))["scores"]

    async def state(self, room: str, *, token: str | None = None, version: int | None = None) -> dict[str, Any]:
        params = {"version": version} if version is not None else None
        return await self.request("GET", f"/rooms/{_seg(room)}/state", token=token, params=params)

    async def follow(self, room: str, *, token: str | None = None, from_version: int = 1,
                     idle_timeout_s: float | None = None, reconnect: bool = True) -> AsyncIterator[dict[str, Any]]:
        """As ``Client.follow``: each version once, in order, reconnecting from the last seen + 1."""
        bearer = token if token is not None else self.token
        base = "ws" + self.url[len("http"):] if self.url.startswith("http") else self.url
        next_version, attempt, refusal = from_version, 0, {}
        while True:
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            try:
                async with ws_connect(f"{base}/rooms/{_seg(room)}/live?{urlencode({'from_version': next_version})}",
                                      additional_headers=headers, open_timeout=10, max_size=2**24) as socket:
                    while True:
                        try:
                            text = await asyncio.wait_for(socket.recv(), idle_timeout_s)
                        except TimeoutError:
                            return
                        message = json.loads(text)
                        if "version" not in message:
                            refusal = message
                            continue
                        if message["version"] < next_version:
                            continue
                        next_version, attempt = message["version"] + 1, 0
                        yield self.held.keep(message)
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else 1006
                if code >= 4000:
                    reason = refusal or _json_or_empty(closed.rcvd.reason if closed.rcvd else "")
                    raise ApiError(code - 4000, str(reason.get("code", "refused")),
                                   str(reason.get("message", "the live feed was refused")), reason.get("field"),
                                   reason) from None
                if not reconnect or code not in RECONNECT_CLOSE_CODES:
                    return
            except (OSError, InvalidHandshake) as error:
                if isinstance(error, InvalidStatus) and error.response.status_code not in RETRY_STATUSES:
                    raise ApiError(error.response.status_code, "handshake_refused", str(error)) from None
                if not reconnect or attempt >= self.retries:
                    raise
            await self._sleep(attempt, None)
            attempt += 1


class AsyncSeat(SeatState):
    """A player's seat (``almanac.client.SeatState``), its calls awaited."""

    client: AsyncClient

    async def _send(self, path: str, body: dict[str, Any], signed: dict[str, Any] | None) -> Any:
        """As ``Seat._send``: signed over ``seen_version``, a first ``409 version_moved`` signed again and resent
        with the same command id, anything else raised."""
        if self.player_key is None or signed is None:
            return self.saw(await self.client.request("POST", path, token=self.token, json_body=body))
        try:
            return self.saw(await self.client.request("POST", path, token=self.token,
                                                      json_body=self.signed_body(body, signed, self.seen_version)))
        except ApiError as error:
            allowed = self.moved(error)
        if allowed is None:
            allowed = self.saw(await self.client.room(self.room))["version"]
        return self.saw(await self.client.request("POST", path, token=self.token,
                                                  json_body=self.signed_body(body, signed, allowed)))

    async def command(self, command: dict[str, Any] | msgspec.Struct, *, command_id: str | None = None) -> CommandResult:
        body = msgspec.to_builtins(command) if isinstance(command, msgspec.Struct) else command
        return CommandResult.of(await self._send(f"/rooms/{_seg(self.room)}/commands",
                                                 {"command": body, "command_id": command_id or new_command_id()}, body))

    async def reveal_nonce(self, nonce: str, *, command_id: str | None = None) -> CommandResult:
        return await self.command({"kind": "reveal_nonce", "nonce": nonce}, command_id=command_id)

    async def end(self, reason: str = "ended by a player", *, command_id: str | None = None) -> CommandResult:
        return CommandResult.of(await self._send(f"/rooms/{_seg(self.room)}/end",
                                                 {"reason": reason, "command_id": command_id or new_command_id()},
                                                 {"kind": "end_room", "reason": reason}))

    async def hand_to_bot(self, seat: str | None = None, *, command_id: str | None = None) -> dict[str, Any]:
        seat = seat or self.player
        return await self._send(f"/rooms/{_seg(self.room)}/bots",
                                {"seat": seat, "command_id": command_id or new_command_id()},
                                {"kind": "hand_to_bot"} if seat == self.player else None)

    async def view(self) -> dict[str, Any]:
        return self.saw(await self.client.request("GET", f"/rooms/{_seg(self.room)}/view", token=self.token))

    async def events(self, from_version: int = 1) -> dict[str, Any]:
        return self.saw(await self.client.request("GET", f"/rooms/{_seg(self.room)}/events", token=self.token,
                                                  params={"from_version": from_version}))

    async def follow(self, from_version: int = 1, *, idle_timeout_s: float | None = None,
                     reconnect: bool = True) -> AsyncIterator[dict[str, Any]]:
        async for message in self.client.follow(self.room, token=self.token, from_version=from_version,
                                                idle_timeout_s=idle_timeout_s, reconnect=reconnect):
            yield self.saw(message)
