"""One logging setup for our loggers and every library's: JSON lines, short tracebacks without local variables."""

from __future__ import annotations

import io
import json
import logging

import structlog

from almanac.services.logging import TRACEBACK_CHARS, configure_logging, get_logger


def deep_failure(depth: int) -> None:
    secret_local = "LOCAL-VALUE-" + "x" * 10_000  # noqa: F841 - must never reach a log
    if depth == 0:
        raise RuntimeError("boom at the bottom")
    deep_failure(depth - 1)


def lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


def test_a_library_error_and_ours_are_one_short_json_line_each_without_locals() -> None:
    buffer = io.StringIO()
    try:
        configure_logging("json", "info", stream=buffer)
        ours = get_logger("almanac.test")  # created after configure: takes it at first use
        try:
            deep_failure(300)
        except RuntimeError as error:
            ours.error("failed", exc_info=error)
            logging.getLogger("uvicorn.error").error("Exception in ASGI application", exc_info=True)
        logging.getLogger("fastapi").warning("library note %s", 7)
        logged = lines(buffer)
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    assert [entry["event"] for entry in logged] == ["failed", "Exception in ASGI application", "library note 7"]
    assert logged[0]["logger"] == "almanac.test" and logged[1]["logger"] == "uvicorn.error"
    for entry in logged[:2]:
        assert "boom at the bottom" in entry["exception"]
        assert len(entry["exception"]) <= TRACEBACK_CHARS + 20
        assert "LOCAL-VALUE" not in entry["exception"]
        assert entry["exception"].count("deep_failure") <= 25  # the last frames, not all 300
    assert len(buffer.getvalue()) < 3 * TRACEBACK_CHARS


def test_a_logger_created_before_configuration_follows_it() -> None:
    early = get_logger("almanac.early")  # as modules do at import time
    buffer = io.StringIO()
    try:
        configure_logging("json", "info", stream=buffer)
        early.info("hello", n=1)
        logged = lines(buffer)
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    assert logged[0]["event"] == "hello" and logged[0]["logger"] == "almanac.early" and logged[0]["n"] == 1
