"""Each tool's result, typed: what a tool declares as its `output`, and the compact JSON Schema its
`tools/list` entry carries in `outputSchema.result` (the envelope around it, `OUTPUT_SCHEMA`, is the
contract's).

The types are the shapes the handlers and the kernel really answer, including what the result budget
and the caller's scopes make of them: a page read in pieces (`blockPiece`, `warnings`), a list cut
with a cursor (`warnings`), a write's report trimmed (`warnings`), a dry run's plan (`dryRun`,
`currentRevision`), a write-only caller's diff without the title's text (`from`/`to` left out).
tests/conftest.py holds every result of the test suite to its tool's schema (`resultcheck.py`).

The schemas are derived by pydantic (`tools/typeschemas.py`), once per type, when the first listing
is built.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict  # pydantic reads these and needs this one on Python < 3.12

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.diff import UpdatedField
from mnote_mcp.kernel.port import HistoryView, OutcomeData, SearchResult
from mnote_mcp.vocabulary.messages import RenderedWarning

# One item of a write's `diff`: the kernel's ops (kernel/diff.py) said as one object, its `op` saying
# which fields it has; a union of the seven would be four times the bytes in every listing.
DiffOp = TypedDict(
    "DiffOp",
    {
        "op": Literal["append", "insert", "move", "delete", "update", "set", "create", "confirm"],
        "blocks": NotRequired[int],  # append: how many blocks, children included
        "blockId": NotRequired[str],
        "after": NotRequired[str | None],  # insert, move: the sibling before it (None: first)
        "parentId": NotRequired[str],
        "fields": NotRequired[list[UpdatedField]],  # update
        "field": NotRequired[Literal["title"]],  # set (a revert): the title ...
        "option": NotRequired[str],  # ... or a page option
        "from": NotRequired[str | bool | None],  # left out for a caller who may not read the page
        "to": NotRequired[str | bool | None],
        "artifact": NotRequired[Literal["summary", "ai_note"]],
        "artifactId": NotRequired[str],
        "edge": NotRequired[Literal["reference"]],
        "edgeId": NotRequired[str],
    },
)


class WriteAnswer(OutcomeData, TypedDict):
    """What every write tool answers (`results.write_result`, then `trim_result` and the disclosure):
    a write's report (`revision`), or a dry run's plan (`dryRun`, `currentRevision`, `warnings`), the
    command's `data` keys beside (`OutcomeData`). One object rather than a union of the two: half the
    bytes in every listing, and `dryRun` says which it is."""

    commandName: str
    changed: bool
    diff: list[DiffOp]
    revision: NotRequired[int]  # a write's: the page's revision after it
    dryRun: NotRequired[Literal[True]]  # a dry run's: nothing written
    currentRevision: NotRequired[int]  # a dry run's: the revision it was planned against
    warnings: NotRequired[list[RenderedWarning]]  # always in a dry run's
    idempotentReplay: NotRequired[Literal[True]]  # this key's first write, not another
    commandId: NotRequired[str | None]  # a dry run's replay: the write it would replay


class BlockPiece(TypedDict, total=False):
    """Where a piece within one block is (`tools/blockpieces.py`): a run of siblings under
    `parentId`, or `length` characters of `blockId`'s text (its Markdown) from `offset`."""

    blockId: str
    parentId: str
    offset: int
    length: int


class PageRead(TypedDict):
    """`mnote.page.get`: the kernel's `PageView`, its blocks typed, or a piece of it (`tools/pieces.py`)."""

    documentId: str
    workspaceId: str
    title: str
    revision: int
    bodySummary: NotRequired[str]
    pageOptions: NotRequired[dict[str, bool | None]]
    blocks: NotRequired[list[Block]]
    markdown: NotRequired[str]
    nextCursor: NotRequired[str]
    blockPiece: NotRequired[BlockPiece]
    warnings: NotRequired[list[RenderedWarning]]


class Found(SearchResult):
    """`mnote.page.search`: the kernel's hits, fewer with a `result_list` warning over the budget."""

    warnings: NotRequired[list[RenderedWarning]]


class HistoryRead(HistoryView):
    """`mnote.page.history`: the kernel's entries, fewer (or one cut) with a warning over the budget."""

    warnings: NotRequired[list[RenderedWarning]]
