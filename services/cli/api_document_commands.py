"""`almanac openapi` and `almanac asyncapi`: the API documents as JSON, for generators of typed clients."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from almanac.services.cli import app

Out = Annotated[Path | None, typer.Option(help="Write it here (default: standard output).")]


def _document(which: str) -> dict:
    # The documents come from the routes and the installed rule-sets alone: no Redis is reached.
    from almanac.services.bootstrap import default_settings  # noqa: PLC0415
    from almanac.services.gateway import create_app  # noqa: PLC0415
    from almanac.services.gateway.asyncapi import asyncapi_document  # noqa: PLC0415

    if which == "asyncapi":
        return asyncapi_document()
    with tempfile.TemporaryDirectory() as data_dir:
        return create_app(default_settings(redis_url="redis://127.0.0.1:1", data_dir=data_dir)).openapi()


def _write(document: dict, out: Path | None) -> None:
    text = json.dumps(document, indent=2, sort_keys=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)


@app.command("openapi")
def openapi_command(out: Out = None) -> None:
    """Print the gateway's OpenAPI document (what /openapi.json answers), e.g. for clients/typescript."""
    _write(_document("openapi"), out)


@app.command("asyncapi")
def asyncapi_command(out: Out = None) -> None:
    """Print the AsyncAPI document of the streams, channels and live feed (what /asyncapi answers)."""
    _write(_document("asyncapi"), out)
