"""A lean command sender: prepared command bodies POSTed over keep-alive HTTP/1.1, for load generators.

    from almanac.client.command_sender import CommandSender

    sender = CommandSender(["http://127.0.0.1:8000"], connections=64)
    body = CommandSender.body({"kind": "place", ...}, command_id="c1")   # encoded once, sent many times
    status, payload, retry_after = await sender.command(room, body, token)
    await sender.close()

The ``Client``/``AsyncClient`` calls decide for their caller (command ids drawn, 429/503 waited out and resent, a
202 followed, refusals raised). A load generator must see every answer as it came and spend less CPU than the
server it measures (httpx spent several times the gateway's CPU per request in ``almanac bench e2e``): this sender
writes a prepared body on an idle connection and reads the status, the body and ``Retry-After``; nothing retried,
decoded or raised for a refusal. It speaks the same public route as ``Seat.command`` (``POST /rooms/{room}/commands``
with the seat's bearer token) and nothing else. A signed seat's body is ``signed_command_body``'s (the same
signature ``Seat`` sends). Plain ``http://`` URLs only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from almanac.client import _seg
from almanac.client.signing import PlayerKey

__all__ = ["CommandSender"]


class CommandSender:
    """Keep-alive connections to one or more gateways; ``connections`` in all, shared out among them.

    Requests go to the gateways in turn, as a round-robin load balancer sends them (not by connection: at a low
    rate one connection carries everything), or to the one a call names (``server``: an index of ``urls``)."""

    def __init__(self, urls: list[str], connections: int) -> None:
        self.servers = []
        for url in urls:
            scheme, _, rest = url.partition("://")
            if scheme != "http":
                raise ValueError(f"CommandSender speaks plain HTTP/1.1 only, not {url!r}")
            host, _, port = rest.rstrip("/").partition(":")
            self.servers.append((host, int(port or 80)))
        self.host = self.servers[0][0]
        self.answered = [0] * len(self.servers)  # answers per server: shows the load was spread
        self.idle: list[asyncio.Queue] = [asyncio.Queue() for _ in self.servers]
        self.size = max(1, connections // len(self.servers))
        self.opened = [0] * len(self.servers)
        self._turn = 0

    @staticmethod
    def body(command: dict[str, Any] | msgspec.Struct, command_id: str | None = None) -> bytes:
        """A command's request body, encoded once (a Struct of the rule-set as ``Seat.command`` sends it); without
        a command id the server draws one (a resend is then another command)."""
        body: dict[str, Any] = {"command": command}
        if command_id is not None:
            body["command_id"] = command_id
        return msgspec.json.encode(body)

    @staticmethod
    def signed_command_body(key: PlayerKey, room: str, player: str, command: dict[str, Any], command_id: str,
                            seen_version: int) -> bytes:
        """A signed seat's command body: the command, its id, the version the seat saw and its signature over them
        (``PlayerKey.sign_command``, as ``Seat`` signs)."""
        return msgspec.json.encode({"command": command, "command_id": command_id, "seen_version": seen_version,
                                    "signature": key.sign_command(room, player, command_id, command, seen_version)})

    async def command(self, room: str, body: bytes, token: str, server: int | None = None
                      ) -> tuple[int, bytes, str | None]:
        """A seat's command (``body``: ``body()``'s or ``signed_command_body()``'s): (status, answer body,
        Retry-After or None), whatever the status."""
        return await self.post(f"/rooms/{_seg(room)}/commands", body, token, server)

    async def _connection(self, server: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
        if server is None:
            server = self._turn
            self._turn = (server + 1) % len(self.servers)
        if self.idle[server].empty() and self.opened[server] < self.size:
            self.opened[server] += 1
            try:
                return (*await asyncio.open_connection(*self.servers[server]), server)
            except BaseException:
                self.opened[server] -= 1
                raise
        return await self.idle[server].get()

    async def post(self, path: str, body: bytes, token: str, server: int | None = None
                   ) -> tuple[int, bytes, str | None]:
        """(status, body, Retry-After header or None) of a POST; to ``server`` (an index of the URLs), else the
        next in turn."""
        reader, writer, server = await self._connection(server)
        try:
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
            )
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            retry = None
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
                elif line[:12].lower() == b"retry-after:":
                    retry = line[12:].strip().decode()
            payload = await reader.readexactly(length)
        except BaseException:
            writer.close()
            self.opened[server] -= 1
            raise
        self.idle[server].put_nowait((reader, writer, server))
        self.answered[server] += 1
        return status, payload, retry

    async def close(self) -> None:
        for idle in self.idle:
            while not idle.empty():
                _, writer, _ = idle.get_nowait()
                writer.close()
