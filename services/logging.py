"""Structured logs with structlog, for our loggers and every library's: JSON off a terminal, short tracebacks."""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any, TextIO

import structlog

# An error's log entry stays cheap whatever raised it: the last frames only, no local variables, and a
# size cap (a rich traceback with locals measured 450-610 KB and 3-5 s of a blocked event loop).
TRACEBACK_FRAMES = 20
TRACEBACK_CHARS = 8_000


def bounded_traceback(error: BaseException) -> str:
    """The traceback of ``error`` as text: its last TRACEBACK_FRAMES frames, at most TRACEBACK_CHARS characters."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__, limit=-TRACEBACK_FRAMES))
    if len(text) > TRACEBACK_CHARS:
        text = "...(cut)...\n" + text[-TRACEBACK_CHARS:]
    return text


def _bounded_exc_info(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """Replaces ``exc_info`` (structlog's or a stdlib record's) with a bounded plain-text ``exception``."""
    exc_info = event_dict.pop("exc_info", None)
    if exc_info is True:
        exc_info = sys.exc_info()
    if isinstance(exc_info, BaseException):
        error: BaseException | None = exc_info
    elif isinstance(exc_info, tuple) and len(exc_info) == 3:
        error = exc_info[1]
    else:
        error = None
    if error is not None:
        event_dict["exception"] = bounded_traceback(error)
    return event_dict


def configure_logging(log_format: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library's logging (uvicorn, FastAPI, FastStream...) once per process.

    ``log_format`` is auto (JSON unless stderr is a terminal), json or console; ``stream`` defaults to stderr.
    """
    stream = stream or sys.stderr
    use_console = log_format == "console" or (log_format == "auto" and stream.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
        if use_console else structlog.processors.JSONRenderer()
    )
    numeric_level = getattr(logging, level.upper(), logging.INFO)
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, _add_logger_name, _bounded_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=lambda *args: _NamedPrintLogger(stream, str(args[0]) if args else "almanac"),
        cache_logger_on_first_use=True,
    )
    # Every standard-library logger goes through the same processors and renderer, one line per record.
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, _bounded_exc_info, renderer],
    ))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(numeric_level)
    for logger in list(logging.root.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):  # libraries that installed their own handlers (FastStream, uvicorn)
            logger.handlers.clear()
            logger.propagate = True


def get_logger(name: str = "almanac", **context: object) -> Any:
    """A logger that takes its configuration at first use: modules create theirs at import, before the
    process has called configure_logging (binding then froze structlog's default console renderer, with
    rich tracebacks and local variables, whatever ALMANAC_LOG_FORMAT said)."""
    return structlog.get_logger(name, **context)


class _NamedPrintLogger(structlog.PrintLogger):
    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name


def _add_logger_name(logger: Any, _: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    name = getattr(logger, "name", None)
    if name and "logger" not in event_dict:
        event_dict["logger"] = name
    return event_dict
