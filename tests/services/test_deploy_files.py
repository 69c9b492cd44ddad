"""The deployment files name only settings and commands that exist."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from almanac.services.cli import _load_commands, app
from almanac.services.settings import _ENV, RETIRED

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_every_setting_the_deploy_files_set_is_one_almanac_reads():
    """Every setting a deployment file names is one almanac reads; a retired one (refused at start) may be named only
    in the prose that says what replaced it."""
    known = set(_ENV.values())
    named = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            found = set(re.findall(r"\b((?:ALMANAC|REDIS)_[A-Z_]+)\b", path.read_text()))
            if path.suffix == ".md":
                found -= set(RETIRED)
            named |= found
    assert named and named <= known, sorted(named - known)


def test_every_command_the_deploy_files_run_exists():
    _load_commands()
    commands = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            commands |= set(re.findall(r"almanac (engine|projector|notifier|gateway|archiver|bots)\b", path.read_text()))
            commands |= set(re.findall(r'command: \["(\w+)"', path.read_text()))
    # the deployment shape: gateways that decide their shards, a projector, a notifier, the bots and the archiver
    # (`almanac engine` only named)
    assert {"projector", "notifier", "gateway", "archiver", "bots"} <= commands <= {
        "engine", "projector", "notifier", "gateway", "archiver", "bots"}
    for command in commands:
        assert CliRunner().invoke(app, [command, "--help"]).exit_code == 0, command
