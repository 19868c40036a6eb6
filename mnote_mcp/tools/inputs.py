"""Each tool's arguments, typed: what a tool declares as its `arguments`, and what its handler (or its
payload map) reads `request.args` as.

The arguments a handler sees are the call's less the envelope's fields (`mapping.ENVELOPE_FIELDS`:
page ids, correlation ids, the key, `dryRun`, `baseRevision`), checked against the accepted schema
before any handler runs; tests/unit/tools/test_inputs.py holds each type to that schema (the same
properties, the same JSON types), so the cast in `arguments_of` states what the check made true.
The contract's schemas stay as the contract writes them (`ToolSpec.contract_schema`); what the server
adds beyond the contract may derive from the type (`typed_extensions`: `mnote.page.get`'s
`format`, `blockIds`, `maxBlocks` and `cursor`).
"""

from __future__ import annotations

import copy
from typing import Annotated, Literal, NotRequired, Required, TypeVar, cast

from annotated_types import Interval
from typing_extensions import TypedDict  # pydantic reads these and needs this one on Python < 3.12

from mnote_mcp.kernel.blocks import MAX_BLOCKS, PropValue
from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.tools.typeschemas import declared_schema
from mnote_mcp.vocabulary.envelope import ToolRequest

Arguments = TypeVar("Arguments")
# A block as a caller writes it: the kernel checks it in depth (`kernel/blocks.py`, `normalize_blocks`).
CallerBlock = dict[str, object]
Position = Literal["start", "end"]


class PageGetArgs(TypedDict, total=False):
    includeBody: bool
    includeOptions: bool
    includeBlocks: bool
    format: Literal["blocks", "markdown"]
    blockIds: list[str]
    maxBlocks: Annotated[int, Interval(ge=1, le=MAX_BLOCKS)]
    cursor: str


class PageSaveArgs(TypedDict, total=False):
    content: Required[list[CallerBlock]]
    mode: Literal["replace", "append"]


class TitleArgs(TypedDict):
    title: str


class PageOptions(TypedDict, total=False):
    wideLayout: bool
    smallText: bool
    showToc: bool
    protectEditing: bool


class OptionsArgs(TypedDict):
    options: PageOptions


class Edit(TypedDict):
    oldText: str
    newText: str
    replaceAll: NotRequired[bool]


class EditTextArgs(TypedDict, total=False):
    edits: Required[list[Edit]]
    blockId: str


class SearchArgs(TypedDict, total=False):
    query: str
    limit: int
    cursor: str


class Placement(TypedDict, total=False):
    """Where blocks go (`block.py`'s `_PLACEMENT`), for an insert and a move alike."""

    afterBlockId: str
    parentId: str
    position: Position


class InsertArgs(Placement, total=False):
    blocks: Required[list[CallerBlock]]


class UpdateArgs(TypedDict, total=False):
    blockId: Required[str]
    type: str
    text: str
    props: dict[str, PropValue | None]  # null resets one


class DeleteArgs(TypedDict, total=False):
    blockIds: Required[list[str]]
    section: bool


class MoveArgs(Placement, total=False):
    blockId: Required[str]
    blockIds: list[str]
    section: bool


class HistoryFilterArgs(TypedDict, total=False):
    runId: str
    sessionId: str
    actorId: str


class HistoryArgs(TypedDict, total=False):
    filter: HistoryFilterArgs
    sinceRevision: int
    limit: int
    cursor: str


class RevertArgs(TypedDict, total=False):
    undoRunId: str
    commandId: str
    toRevision: int


class SummaryArgs(TypedDict):
    summary: str


class NoteArgs(TypedDict):
    content: str


def arguments_of(request: ToolRequest, kind: type[Arguments]) -> Arguments:
    """The call's arguments as the tool's declared type (`kind`): the accepted schema, which holds
    the type's properties and types (tests/unit/tools/test_inputs.py), checked them before any
    handler runs."""
    return cast(Arguments, request.args)


def typed_extensions(kind: object, *names: str) -> dict[str, JSONObject]:
    """The schemas of the properties `names` of the arguments' type: what a tool adds to the
    contract's input schema, derived from the type rather than written beside it."""
    properties = declared_schema(kind, lean=False)["properties"]
    assert isinstance(properties, dict)
    return {name: copy.deepcopy(cast(JSONObject, properties[name])) for name in names}
