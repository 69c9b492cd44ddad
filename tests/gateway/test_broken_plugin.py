"""A rule-set package that cannot load does not take the API documents down with it.

A CI run caught the gateway answering /openapi.json and /asyncapi.json 500 while another test uninstalled a plugin:
its entry point was still listed, its module gone. Any installation can be broken so (a package half installed or
removed, a module that raises on import); the documents and the listing describe the rule-sets that load.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from almanac.events import registry
from almanac.services.bootstrap import default_settings
from almanac.services.gateway import create_app
from almanac.services.gateway.asyncapi import asyncapi_document


@pytest.fixture
def broken_installation(tmp_path: Path) -> Iterator[str]:
    """An installed distribution whose entry point names a module that is not there (as mid-uninstall)."""
    info = tmp_path / "almanac_broken_game-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: almanac-broken-game\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\nbroken_game = broken_game_gone:MANIFEST\n")
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    registry.refresh()
    try:
        yield "broken_game"
    finally:
        sys.path.remove(str(tmp_path))
        importlib.invalidate_caches()
        registry.refresh()


def test_the_documents_and_the_listing_describe_the_rule_sets_that_load_beside_one_that_cannot(
        broken_installation: str, tmp_path: Path) -> None:
    # Given an installed entry point whose module is gone, beside the built-in rule-sets
    assert broken_installation in registry.installed()
    with pytest.raises(ModuleNotFoundError):
        registry.default(broken_installation)  # it fails where it is named
    # When the gateway's documents and its rule-set listing are asked for
    app = create_app(default_settings(redis_url="redis://127.0.0.1:1", data_dir=str(tmp_path)))
    http = TestClient(app, raise_server_exceptions=False)  # no lifespan: neither needs Redis
    openapi, listing = http.get("/openapi.json"), http.get("/rulesets")
    asyncapi = asyncapi_document()
    # Then each is answered, describing the rule-sets that load and not the broken one
    assert openapi.status_code == 200, openapi.text
    assert listing.status_code == 200, listing.text
    hosted = {row["ruleset"] for row in listing.json()["rulesets"]}
    assert {"board", "claim", "realm", "sectors"} <= hosted and broken_installation not in hosted
    schemas = openapi.json()["components"]["schemas"]
    assert "RealmCommand" in schemas or any(name.startswith("Realm") for name in schemas)
    assert not any(name.lower().startswith("brokengame") for name in schemas)
    assert asyncapi["components"]["messages"]
