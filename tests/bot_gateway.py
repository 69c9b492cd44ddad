"""A real gateway for the bots' stories: the gateway app served by uvicorn on a free port in the test's own event loop,
and a bots process (services/bots.py ``Bots``) that plays every seat through it, as `almanac bots` does."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from almanac.services.bots import Bots, dice_key, gateway_client
from almanac.services.checkpoints import commit_secret
from almanac.services.embedded_redis import free_port
from almanac.services.gateway import create_app
from almanac.services.gateway.auth import TokenSigner, deployment_signer
from almanac.services.gateway.connection_guard import server_options
from almanac.services.settings import Settings, load_settings
from almanac.storage.keys import Keys

# For the stories of the bot seats' registry (reservations, the bound), which a round settles in Redis before it plays
# any seat: a gateway nobody serves (the discard port), so every play of theirs waits, unsent, as with a gateway down.
NO_GATEWAY = "http://127.0.0.1:9"


@dataclass
class Served:
    url: str
    settings: Settings
    signer: TokenSigner
    app: Any


def bots_for(served_or_url: Served | str, client: Any, store: Any, keys: Keys, *, key: bytes | None = None,
             signer: TokenSigner | None = None, **options: Any) -> Bots:
    """A bots process on ``client``/``store`` playing through the gateway (``Served``, or a URL with ``signer``,
    the deployment's); ``key``: the bots' key, by default the served deployment's (``dice_key`` of its commitment
    secret, which its gateways also know a bot's join by)."""
    if isinstance(served_or_url, Served):
        url, signer = served_or_url.url, served_or_url.signer
        key = key or dice_key(commit_secret(served_or_url.settings))
    else:
        url = served_or_url
    assert key is not None
    return Bots(client, store, keys, key=key, api=gateway_client(url), signer=signer, **options)


@contextlib.asynccontextmanager
async def served_gateway(redis_url: str, **env: str) -> AsyncIterator[Served]:
    """A gateway on ``redis_url`` (holding no shard unless ``env`` gives it ALMANAC_ENGINE_SHARDS: the story's engine
    decides), serving until the block ends; the test run's data directory (or ``env``'s ALMANAC_DATA_DIR), so its
    secrets are the story's."""
    environ = {"REDIS_URL": redis_url, "ALMANAC_DATA_DIR": os.environ["ALMANAC_DATA_DIR"],
               "ALMANAC_ENGINE_SHARDS": "none", "ALMANAC_HTTP_HOST": "127.0.0.1",
               "ALMANAC_HTTP_PORT": str(free_port()), "ALMANAC_LOG_LEVEL": "warning", **env}
    settings = load_settings(environ)
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, **server_options(settings)))  # served in the test's own loop
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(600):
            if server.started or serving.done():
                break
            await asyncio.sleep(0.05)
        if not server.started:
            serving.result() if serving.done() else None
            raise RuntimeError("the gateway did not start")
        yield Served(f"http://127.0.0.1:{settings.http_port}", settings, deployment_signer(settings), app)
    finally:
        server.should_exit = True
        done, _ = await asyncio.wait({serving}, timeout=20)
        if not done:  # say what it was waiting on (one CI run of the Cluster bot-seat story saw this, once)
            raise AssertionError(f"the gateway did not stop within 20 s: {_stopping_state(server, serving)}")
        with contextlib.suppress(asyncio.CancelledError):
            serving.result()


def _stopping_state(server: uvicorn.Server, serving: asyncio.Task) -> str:
    """Where a gateway that will not stop is: uvicorn's connections and tasks left, and every task's innermost frames."""
    stacks = []
    for task in asyncio.all_tasks():
        awaiting, chain = task.get_coro(), []
        while awaiting is not None and len(chain) < 12:  # a suspended coroutine's frames, outermost first
            frame = getattr(awaiting, "cr_frame", None) or getattr(awaiting, "ag_frame", None)
            if frame is not None:
                chain.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno})")
            awaiting = getattr(awaiting, "cr_await", None) or getattr(awaiting, "ag_await", None)
        stacks.append(f"{task.get_name()}: " + " -> ".join(chain[-4:]))
    serving.cancel()
    return (f"{len(server.server_state.connections)} connections and {len(server.server_state.tasks)} tasks open, "
            f"started {server.started}; tasks:\n" + "\n".join(sorted(stacks)))
