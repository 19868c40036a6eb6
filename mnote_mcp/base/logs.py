"""Logging to stderr only (stdout is the MCP wire on stdio): setup, and the one line per call.

Whatever a client sends (ids, headers, tool names) can end up in a message, so in text form a record
is one line: every character that is not printable (newlines, carriage returns, other line and
paragraph separators, terminal escapes) is written as a Python-style escape, and the lines of a
traceback that follows are indented, so no line a client influences can pass for a record of its own.
In JSON form the encoder escapes them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

LogFormat = Literal["text", "json"]
LogLevel = Literal["debug", "info", "warning", "error"]
CALLS = logging.getLogger("mnote_mcp.calls")


def timestamp(record: logging.LogRecord) -> str:
    """When `record` was made: ISO 8601 in UTC to the millisecond, `2026-05-01T12:34:56.789Z` (one
    reading whatever the machine's zone, and ordered as text across replicas)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def escape(text: str) -> str:
    """`text` with every non-printable character escaped (`\\n`, `\\x1b`, `\\u2028`): one line, always."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class _TextFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return timestamp(record)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = escape(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        first, newline, rest = super().format(record).partition("\n")
        if not newline:
            return first
        return first + "\n" + "\n".join("    " + line for line in rest.split("\n"))


def configure_logging(level: str = "info", fmt: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # What no format of ours shows, not gathered for every record (the logging HOWTO's "Optimization"):
    # the thread, the process, and the caller's file and line (a walk up the stack per record).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    # The SDK logs every request at INFO; keep its noise below ours unless asked for debug.
    if level.lower() != "debug":
        for noisy in ("mcp", "httpx2", "httpcore2", "uvicorn.access", "uvicorn.error"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def log_call(
    tool: str, actor: str | None, outcome: str, latency_ms: float, ids: Mapping[str, object], **extra: object
) -> None:
    if not CALLS.isEnabledFor(logging.INFO):
        return
    fields: dict[str, object] = {
        "tool": tool,
        "actor": actor,
        "outcome": outcome,
        "latencyMs": round(latency_ms, 2),
        **ids,
        **extra,
    }
    text = " ".join(f"{key}={_value(value)}" for key, value in fields.items() if value is not None)
    CALLS.info("call %s", text, extra={"fields": fields})


def _value(value: object) -> str:
    """A field's value in a `key=value` line: quoted (JSON) when it holds a space, quote or `=`, so a
    client's id cannot add fields to the line."""
    text = str(value)
    if text and _NEEDS_QUOTES.search(text) is None:
        return text
    return json.dumps(text, ensure_ascii=False)


# A space (any character `str.isspace` calls one: `\s` of a str pattern is the same test), a quote or
# `=`: one scan in C instead of a Python generator per character (it was a third of a call's log line).
_NEEDS_QUOTES = re.compile(r'[\s"=]')


@dataclass
class _Window:
    started: float
    logged: int = 1
    left_out: int = 0


class Throttle:
    """At most `burst` lines of one kind per `window` seconds: a flood of refusals (a client retrying
    a bad token in a loop) costs a few lines a minute, not one per request. `allow(kind)` says whether
    this one may be logged, and how many of its kind were left out in the window before (said on the
    first line of the next one)."""

    def __init__(self, burst: int = 10, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.burst = burst
        self.window = window
        self.clock = clock
        self._windows: dict[str, _Window] = {}

    def allow(self, kind: str) -> tuple[bool, int]:
        now = self.clock()
        current = self._windows.get(kind)
        if current is None or now - current.started >= self.window:
            self._windows[kind] = _Window(now)
            return True, current.left_out if current is not None else 0
        if current.logged < self.burst:
            current.logged += 1
            return True, 0
        current.left_out += 1
        return False, 0
