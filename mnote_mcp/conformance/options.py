"""What a run of the kit may be told, and its defaults: light, so `config.py` declares the flags from
them without importing the kit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mnote_mcp.conformance.seed import DEFAULT_TAG
from mnote_mcp.kernel.limits import PageLimits

ReportFormat = Literal["text", "json"]
DEFAULT_REQUEST_TIMEOUT = 60.0  # a write of a page at the default byte limit carries 8 MiB
DEFAULT_TOTAL_TIMEOUT = 900.0
DEFAULT_SHOWN_CHARS = 1500


@dataclass(frozen=True)
class KitOptions:
    tag: str = DEFAULT_TAG
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT
    limits: PageLimits = field(default_factory=PageLimits)  # the runtime's page size limit
    shown_chars: int = DEFAULT_SHOWN_CHARS  # of a failure's request, expected and actual answer each
    skip: tuple[str, ...] = ()  # globs of check names not to run
