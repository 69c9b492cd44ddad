"""Fixtures of the gateway tests: a real engine and projector per module, and the app in process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_contract import ContractCheck
from fastapi.testclient import TestClient
from gateway_stack import Stack, engine_and_projector, gateway_settings

from almanac.services.gateway import create_app


@pytest.fixture(scope="module")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Engine and projector processes on an empty Redis, stopped after the module."""
    with engine_and_projector(redis_url, tmp_path_factory.mktemp("gateway-stack")) as running:
        yield running


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[TestClient]:
    """The gateway app in process (TestClient), talking to the real engine through Redis."""
    app = create_app(gateway_settings(stack))
    # Every JSON answer any test gets must match the schema its operation declares (tests/api_contract.py).
    with TestClient(app, raise_server_exceptions=False) as client:
        client.event_hooks = {"request": [], "response": [ContractCheck(app.openapi())]}
        yield client


@pytest.fixture(scope="module")
def auditor(api: TestClient) -> str:
    from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR  # noqa: PLC0415

    return api.app.state.signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
