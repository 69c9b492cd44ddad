"""The HTTP and WebSocket gateway: rooms, commands, queries, audits, a live feed, health and metrics."""

from almanac.services.gateway.http_app import create_app

__all__ = ["create_app"]
