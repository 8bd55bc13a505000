"""One logging setup for every command: plain text or one JSON object per line.

``DEERFLOW_LOG_FORMAT=json`` is for log shippers: each line is one object with ``ts``,
``level``, ``logger`` and ``message``, plus the attribution fields a record carries
(``extension`` on every line about an extension, ``phase``, ``run_id``, ...) and, for
uvicorn's access log, ``client``, ``method``, ``path`` and ``status``. Otherwise every line
has one text shape, uvicorn's included: ``<time> <LEVEL> <logger>: <message>``.

Tracebacks are for developers: below ``DEBUG`` an exception attached to a record is reduced
to its last line (``TypeName: message``), so a failing provider call or a broken extension
is one line in the operator's log rather than a 150-line stack per run. uvicorn reports a
failed lifespan startup with the traceback as the *message*; that is reduced the same way.
"""

from __future__ import annotations

import json
import logging
import logging.config
import time
import traceback
from typing import Any, Literal

__all__ = [
    "ATTRIBUTION_FIELDS",
    "JsonFormatter",
    "LogFormat",
    "TextFormatter",
    "configure_logging",
    "logging_config",
]

LogFormat = Literal["text", "json"]

#: ``extra=`` keys copied into JSON lines when a record carries them.
ATTRIBUTION_FIELDS = ("extension", "phase", "hook", "run_id", "thread_id", "model", "purpose")

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_TRACEBACK_HEAD = "Traceback (most recent call last)"
# Chatty per-request INFO lines of the HTTP clients model providers use.
_QUIET_BELOW_DEBUG = ("alembic", "httpx", "httpx2", "httpcore", "openai", "urllib3")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else text


def _exception_line(exc_info: Any) -> str:
    exc = exc_info[1]
    if exc is None:
        return ""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]


class _Reducing(logging.Formatter):
    """Shared rule: tracebacks only when the root logger is at DEBUG. Times are UTC."""

    @staticmethod
    def converter(seconds: float | None = None) -> time.struct_time:
        return time.gmtime(seconds)

    def _debug(self) -> bool:
        return logging.getLogger().isEnabledFor(logging.DEBUG)

    def _message(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if not self._debug() and _TRACEBACK_HEAD in message:
            head, _, tail = message.partition(_TRACEBACK_HEAD)
            message = f"{head.strip()} {_last_line(tail)}".strip()
        return message


class TextFormatter(_Reducing):
    """``<time> <LEVEL> <logger>: <message>``; an exception adds one line, or its traceback at DEBUG."""

    def __init__(self) -> None:
        super().__init__(_TEXT)

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record)} {record.levelname} {record.name}: {self._message(record)}"
        if record.exc_info and record.exc_info[1] is not None:
            if self._debug():
                line += "\n" + self.formatException(record.exc_info)
            else:
                described = _exception_line(record.exc_info)
                if described and described not in line:
                    line += f" ({described})"
        return line


class JsonFormatter(_Reducing):
    """One JSON object per line (see the module docstring for its fields)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": self._message(record),
        }
        for name in ATTRIBUTION_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                data[name] = value
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, path, _version, status = record.args
            data.update(client=client, method=method, path=path, status=status)
        if record.exc_info and record.exc_info[1] is not None:
            data["error"] = _exception_line(record.exc_info)
            if self._debug():
                data["traceback"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def logging_config(level: str = "INFO", log_format: LogFormat = "text") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` mapping for the process *and* uvicorn.

    Handed to uvicorn as its ``log_config`` too, so its error and access loggers format like
    everything else instead of with uvicorn's own colourised formatter.
    """
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    level = level.upper()
    quiet = "DEBUG" if level == "DEBUG" else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"deerflow": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "deerflow", "stream": "ext://sys.stderr"}
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.error": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.access": {"level": level, "handlers": [], "propagate": True},
            **{name: {"level": quiet} for name in _QUIET_BELOW_DEBUG},
        },
    }


def configure_logging(level: str = "INFO", log_format: LogFormat = "text") -> dict[str, Any]:
    """Install :func:`logging_config` and return it (``serve`` passes it on to uvicorn)."""
    config = logging_config(level, log_format)
    logging.config.dictConfig(config)
    return config
