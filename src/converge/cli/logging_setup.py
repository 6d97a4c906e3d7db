"""Logging for the CLI: concise lines or JSON lines on stderr, with the ``extra`` fields kept."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# Attributes every LogRecord has; anything else on a record came from ``extra={...}``.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the extra fields, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **extra_fields(record),
        }
        if record.exc_info:
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)


class ConciseFormatter(logging.Formatter):
    """``level logger: message key=value …`` and the traceback below when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{key}={value}" for key, value in extra_fields(record).items())
        line = f"{record.levelname.lower()} {record.name}: {record.getMessage()}"
        if fields:
            line += f" {fields}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


@contextmanager
def logging_to_stderr(
    *, debug: bool, log_json: bool, stream: TextIO | None = None
) -> Iterator[None]:
    """Send converge's logs to stderr while a command runs: warnings, or everything with debug.

    The logger's previous level and handlers come back afterwards, so running commands in
    one process (tests, an embedding program) leaves logging as it found it.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter() if log_json else ConciseFormatter())
    logger = logging.getLogger("converge")
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
