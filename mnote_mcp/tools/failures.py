"""The errors a tool declares: what can go wrong for a caller who may call it, when, and what to do.

Each `ErrorCase` is a code and the reason that picks its words (the catalogue in
`vocabulary/messages.py` says them), when it happens and the recovery, as cyanheads'
obsidian-mcp-server declares each tool's errors. Where the refusal's words declare a hint
(`vocabulary.messages.REFUSALS`), that hint is the recovery, said once: a case gives its own words
only where there is none, and a case that says it again is refused at import. Where one call shows
it, the case carries that call (`example`: changes to the tool's first example), and
tests/unit/tools/test_registry.py makes it and holds the answer to the case. The refusals of callers who may not call the tool are the tool's `Permissions`;
what any tool can answer (`EVERY_TOOL`) is listed once. docs/errors.md's per-tool list is generated
from all three.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.tools.examples import Arg
from mnote_mcp.vocabulary.messages import hint_of


@dataclass(frozen=True)
class ErrorCase:
    code: ErrorCode
    reason: Reason
    when: str
    # What to do: the refusal's hint in `REFUSALS` where it declares one (its `{placeholders}` named as
    # the `details` they are), else the case's own words.
    recovery: str = ""
    # Changes to the tool's first example that make this error (None: leave that argument out), or
    # None where one call cannot (a reused key, a store at its size limit, a runtime outage).
    example: Mapping[str, Arg] | None = None

    def __post_init__(self) -> None:
        hint = hint_of(self.code, self.reason)
        said = None if hint is None else re.sub(r"\{(\w+)\}", r"`details.\1`", hint["en"])
        if said is None and not self.recovery:
            raise ValueError(
                f"{self.code.value} ({self.reason.value}): say what to do; its words have no hint"
            )
        if said is not None and self.recovery not in ("", said):
            raise ValueError(
                f"{self.code.value} ({self.reason.value}): its hint says what to do, say it once"
            )
        object.__setattr__(self, "recovery", self.recovery or said)

    def given(self, example: Mapping[str, Arg]) -> ErrorCase:
        """This case, shown by these changes to the tool's first example."""
        return replace(self, example=example)


_C, _R = ErrorCode, Reason

# -- what any tool can answer (docs only: every tool has them) ----------------------------------------
EVERY_TOOL: tuple[ErrorCase, ...] = (
    ErrorCase(
        _C.INVALID_ARGUMENT,
        _R.SCHEMA,
        "the arguments do not match the input schema or the block model",
        "fix the argument at `details.pointer` (`details.reason` says what is wrong)",
    ),
    ErrorCase(
        _C.PERMISSION_DENIED,
        _R.ACTOR_MISMATCH,
        "`actorId` is given and is not the connection's actor",
        "leave `actorId` out: the actor is the connection's",
    ),
    ErrorCase(
        _C.RUNTIME_UNAVAILABLE,
        _R.GENERIC,
        "the runtime cannot be reached, answered badly or too slowly (`details.cause`)",
    ),
    ErrorCase(
        _C.RUNTIME_UNAVAILABLE,
        _R.STORE_BUSY,
        "the embedded store stayed locked by another writer past its busy timeout",
    ),
    ErrorCase(
        _C.INTERNAL,
        _R.UNEXPECTED,
        "a bug; logged on stderr with the trace id, nothing leaked",
        "report the `traceId`",
    ),
)

# -- what any tool that acts on a page can answer when `documentId` is a title (tools/titles.py; docs only) --
NAMED_PAGE: tuple[ErrorCase, ...] = (
    ErrorCase(
        _C.INVALID_ARGUMENT,
        _R.TITLE_AMBIGUOUS,
        "`documentId` is a title that more than one page the caller may read has (`details.matches`,"
        " `details.candidates`: up to 5 `{workspaceId, documentId, title}`); nothing is done",
    ),
)

# -- what a write can answer when the person is asked to confirm it (`--confirm`, docs only) -----------
CONSENT_ERRORS: tuple[ErrorCase, ...] = (
    ErrorCase(
        _C.PERMISSION_DENIED,
        _R.DECLINED,
        "the person declined the write they were asked to confirm (`details.confirmation`: `declined`)",
    ),
    ErrorCase(
        _C.PERMISSION_DENIED,
        _R.CANCELLED,
        "the person dismissed the question, or the client could not show it (`cancelled`)",
    ),
    ErrorCase(
        _C.PERMISSION_DENIED,
        _R.CONFIRM_TIMEOUT,
        "no answer within `--confirm-timeout` (`timeout`, `details.timeoutSeconds`)",
    ),
    ErrorCase(
        _C.PERMISSION_DENIED,
        _R.CONFIRM_UNAVAILABLE,
        "the write needs confirmation, the client cannot ask and `--confirm-fallback` is `refuse` (`unavailable`)",
    ),
    ErrorCase(
        _C.CONFLICT,
        _R.PLAN_CHANGED,
        "the page kept changing while the person was asked (asked 3 times, `details.questions`)",
    ),
)

# -- shared by the tools they apply to --------------------------------------------------------------
PAGE_NOT_FOUND = ErrorCase(
    _C.NOT_FOUND,
    _R.PAGE,
    "the page does not exist (said to members of the workspace only)",
    "check `documentId`; mnote.page.search finds pages by title and text",
    example={"documentId": "doc_that_does_not_exist"},
)
BLOCK_NOT_FOUND = ErrorCase(
    _C.NOT_FOUND,
    _R.BLOCK,
    "a block id the call names is not on the page (`details.blockId`, `details.pointer`)",
    "read the page again (mnote.page.get) for its current block ids",
)
STALE_REVISION = ErrorCase(
    _C.CONFLICT,
    _R.REVISION,
    "`baseRevision` is not the page's revision: another write came first",
    example={"baseRevision": 0},
)
STALE_BLOCKS = ErrorCase(
    _C.CONFLICT,
    _R.BLOCKS,
    "`baseRevision` is stale and a block the edit relies on changed since (`details.conflicts`)",
)
STALE_CURSOR = ErrorCase(
    _C.CONFLICT,
    _R.CURSOR,
    "the page changed between two pieces of one read: the cursor is of an older revision",
)
KEY_REUSED = ErrorCase(
    _C.IDEMPOTENCY_CONFLICT,
    _R.GENERIC,
    "the `idempotencyKey` was used before, by this tool, with other arguments",
)
KEY_OF_ANOTHER_TOOL = ErrorCase(
    _C.IDEMPOTENCY_CONFLICT,
    _R.OTHER_COMMAND,
    "the `idempotencyKey` was used before by another tool (`details.usedBy`)",
)
PAGE_TOO_LARGE = ErrorCase(
    _C.INVALID_ARGUMENT,
    _R.PAGE_TOO_LARGE,
    "the page would grow past `--max-page-blocks` or `--max-page-bytes`; nothing was written",
    "write less, or split the content over several pages",
)
BLOCK_TYPE = ErrorCase(
    _C.INVALID_ARGUMENT,
    _R.BLOCK_TYPE,
    "a block's `type` is not one of the supported types (`details.supportedTypes`)",
)
BAD_CURSOR = ErrorCase(
    _C.INVALID_ARGUMENT,
    _R.SCHEMA,
    "`cursor` is not one this tool returned for the same arguments",
    "leave `cursor` out to start again",
    example={"cursor": "not-a-cursor"},
)

# Every write: a stale revision, a key used before.
WRITE_ERRORS: tuple[ErrorCase, ...] = (STALE_REVISION, KEY_REUSED, KEY_OF_ANOTHER_TOOL)
# A block edit (the block tools, the text edit): a stale baseRevision is a conflict only where its blocks
# changed since (every seeded block changed at revision 1, after 0); a baseRevision the page has not
# reached is always one.
BLOCK_WRITE_ERRORS: tuple[ErrorCase, ...] = (
    STALE_BLOCKS.given({"baseRevision": 0}),
    STALE_REVISION.given({"baseRevision": 1_000_000}),
    KEY_REUSED,
    KEY_OF_ANOTHER_TOOL,
)
