"""The `almanac` command line: one typer app; each module below adds its own commands."""

from __future__ import annotations

import os
import sys

import typer

from almanac.services.heap import collect_less_often
from almanac.services.terminal import fit_help_to_output

app = typer.Typer(
    name="almanac",
    help="Almanac: an event-sourced backend for season-based strategy games on Redis Streams.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _each_invocation() -> None:
    from almanac.services.cli.common import fit_console  # noqa: PLC0415 - loaded with the commands

    fit_console()


# Each module registers its commands on `app` (or adds a sub-app) when imported: the top-level names it registers
# (tests/services/test_cli_command_modules.py holds each module to its names).
_COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "almanac.services.cli.engine_commands": ("engine",),
    "almanac.services.cli.sim_commands": ("sim",),
    "almanac.services.cli.log_state_commands": ("log", "state"),
    "almanac.services.cli.verify_commands": ("verify", "nonce"),
    "almanac.services.cli.player_signing_commands": ("player-key", "sign"),
    "almanac.services.cli.audit_commands": ("audit",),
    "almanac.services.cli.fork_diff_commands": ("fork", "diff"),
    "almanac.services.cli.explain_bisect_commands": ("explain", "bisect"),
    "almanac.services.cli.export_import_commands": ("export", "import"),
    "almanac.services.cli.dispute_commands": ("dispute", "verify-bundle", "player-bundle", "verify-player-bundle"),
    "almanac.services.cli.key_commands": ("keys", "checkpoints"),
    "almanac.services.cli.projection_commands": ("projector", "projections"),
    "almanac.services.cli.archive_commands": ("archive", "archiver"),
    "almanac.services.cli.gateway_commands": ("gateway", "token", "up", "demo"),
    "almanac.services.cli.notifier_commands": ("notifier",),
    "almanac.services.cli.bot_commands": ("bots",),
    "almanac.services.cli.seat_bot_command": ("bot",),
    "almanac.services.cli.api_document_commands": ("openapi", "asyncapi"),
    "almanac.services.cli.bench_commands": ("bench",),
}


def _load_commands(command: str | None = None) -> None:
    """Register the module of ``command``, or every module (no command, help, a name no module has: typer then lists
    them all). A process imports only what its own command needs: the engines, projectors and gateways the tests and
    `almanac up` start took 0.15-0.25 s more each to import every other command's modules."""
    import importlib  # noqa: PLC0415

    wanted = [module for module, names in _COMMAND_MODULES.items() if command in names]
    for module in wanted or _COMMAND_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise


def main() -> None:
    """The CLI's one exception boundary: anything unexpected is one line on stderr and exit code 1
    (the traceback too, bounded, with ALMANAC_LOG_LEVEL=debug)."""
    # Every almanac process (engine, gateway, projector, the benchmarks' load generator) is a server
    # or a load loop: it collects garbage less often than CPython's defaults (services/heap.py).
    collect_less_often()
    fit_help_to_output()
    _load_commands(sys.argv[1] if len(sys.argv) > 1 else None)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as error:  # typer already turned usage errors and typer.Exit into exit codes
        from almanac.services.logging import bounded_traceback  # noqa: PLC0415

        if os.environ.get("ALMANAC_LOG_LEVEL", "").lower() == "debug":
            sys.stderr.write(bounded_traceback(error))
        detail = " ".join(str(error).split())[:300]
        sys.stderr.write(f"error: unexpected {type(error).__name__}: {detail} "
                         "(ALMANAC_LOG_LEVEL=debug shows the traceback)\n")
        sys.exit(1)
