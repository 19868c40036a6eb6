"""Logging to stderr only (stdout is the MCP wire on stdio): setup, and the one line per call."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, Literal

LogFormat = Literal["text", "json"]
CALLS = logging.getLogger("mnote_mcp.calls")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
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


def configure_logging(level: str = "info", fmt: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The SDK logs every request at INFO; keep its noise below ours unless asked for debug.
    if level.lower() != "debug":
        for noisy in ("mcp", "httpx2", "httpcore2", "uvicorn.access", "uvicorn.error"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def log_call(
    tool: str, actor: str | None, outcome: str, latency_ms: float, ids: Mapping[str, str], **extra: Any
) -> None:
    if not CALLS.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "tool": tool,
        "actor": actor,
        "outcome": outcome,
        "latencyMs": round(latency_ms, 2),
        **ids,
        **extra,
    }
    text = " ".join(f"{key}={value}" for key, value in fields.items() if value is not None)
    CALLS.info("call %s", text, extra={"fields": fields})
