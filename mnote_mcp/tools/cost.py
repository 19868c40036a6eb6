"""What a call costs the server, in five classes, and what each class may take (issue 32).

Every request that does work is of one class: a tool by its declaration (`ToolSpec.cost`: a write
tool is always `write`, a read tool says `read`, `search` or `heavy`), and the MCP requests that are
not tool calls by `REQUEST_COSTS` below. A tool call whose arguments are heavy (thousands of items:
`dispatch.INLINE_ARGUMENT_ITEMS`) is charged as a heavy read whatever its class, weighted by its size.

Each class has a per-actor rate (`CallLimit`: calls a minute and a burst, flags `--read-limit` ...),
and the expensive ones are **admitted** (`Cost.admitted`): besides the rate, they take a place of
`--expensive-calls` on this replica and one actor's run one at a time (`mnote_mcp.calls.admission`). A
write is never admitted: it may wait for the person's confirmation, and a place must not be held
while someone thinks. docs/security.md, "Fair share", gives the defaults and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason


class Cost(StrEnum):
    READ = "read"  # one page: mnote.page.get, resources/read, prompts/get
    WRITE = "write"  # a kernel command (every write tool)
    SEARCH = "search"  # searches and listings: mnote.page.search, resources/list
    HEAVY = "heavy"  # heavy reads: mnote.page.history; any call with heavy arguments
    COMPLETION = "completion"  # completion/complete (a listing per keystroke)

    @property
    def admitted(self) -> bool:
        """Whether calls of this class also take a place at the admission (see the module)."""
        return self in ADMITTED


ADMITTED: frozenset[Cost] = frozenset({Cost.SEARCH, Cost.HEAVY, Cost.COMPLETION})

# The MCP requests that are not tool calls but do a kernel's work, by method (tools/list, prompts/list,
# the templates and subscriptions cost next to nothing: the HTTP request limit bounds them).
REQUEST_COSTS: dict[str, Cost] = {
    "resources/read": Cost.READ,
    "prompts/get": Cost.READ,
    "resources/list": Cost.SEARCH,
    "completion/complete": Cost.COMPLETION,
}

_LIMIT = re.compile(r"^\s*(\d+)\s*/\s*(s|sec|second|m|min|minute)\s*(?:burst\s+(\d+))?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CallLimit:
    """`per_minute` calls a minute on average, with bursts of up to `burst` at once (a token bucket of
    `burst` tokens, refilled at `per_minute`)."""

    per_minute: int
    burst: int

    def __post_init__(self) -> None:
        if self.per_minute < 1 or self.burst < 1:
            raise ValueError("a call limit needs at least 1 call a minute and a burst of at least 1")

    def __str__(self) -> str:
        return f"{self.per_minute}/min burst {self.burst}"


def call_limit(value: str) -> CallLimit | None:
    """`N/min burst B`, `N/s burst B` (the burst defaults to a second's worth, at least 1), or `off`."""
    if value.strip().lower() == "off":
        return None
    found = _LIMIT.match(value)
    if found is None:
        raise ValueError(
            f"{value!r}: give N/min or N/s, optionally 'burst N' (e.g. '120/min burst 30'), or off"
        )
    count, unit, burst = int(found[1]), found[2].lower(), found[3]
    per_minute = count * 60 if unit.startswith("s") else count
    return CallLimit(per_minute, int(burst) if burst else max(1, per_minute // 60))


# Sized so that an agent working normally never meets them (docs/security.md: the agent-task benchmark
# meets none), and so that what one actor may keep busy of a replica stays a small share.
DEFAULT_LIMITS: dict[Cost, CallLimit | None] = {
    Cost.READ: CallLimit(1200, 200),
    Cost.WRITE: CallLimit(600, 100),
    Cost.SEARCH: CallLimit(120, 30),
    Cost.HEAVY: CallLimit(12, 5),
    Cost.COMPLETION: CallLimit(300, 30),
}
# Every HTTP request an actor sends (/mcp, /sse, /messages/), counted from the headers before any body
# is read: above what the call limits let through, so only a client that keeps sending after being
# told to wait meets it (429 with Retry-After).
DEFAULT_REQUEST_LIMIT: CallLimit | None = CallLimit(1200, 200)
# The admission (mnote_mcp/calls/admission.py): places on a replica, one actor's calls in flight, the wait.
DEFAULT_EXPENSIVE_CALLS = 2
DEFAULT_EXPENSIVE_PER_ACTOR = 16
DEFAULT_EXPENSIVE_WAIT = 10.0
DEFAULT_EXPENSIVE_SHARE = 0.1
DEFAULT_EXPENSIVE_BURST = 2.0  # seconds of a place an actor's calls may use before the share applies


def rate_limited(cost: Cost, reason: Reason, retry_after: float, **details: Any) -> MnoteError:
    """The refusal of a call over a limit of its class (`mnote_tool_rate_limited`, retryable): which
    limit (`details.limit`, the class), why (`reason`: rate, in_flight, busy) and the seconds to wait
    (`details.retryAfterSeconds`); nothing was run."""
    return MnoteError(
        ErrorCode.RATE_LIMITED,
        reason,
        {"limit": cost.value, "reason": reason.value, "retryAfterSeconds": retry_after, **details},
    )
