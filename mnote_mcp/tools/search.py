"""Finding pages (toolset `page`): `mnote.page.search`, list and full-text search over every page the
caller may read. It names no page, so it is the one tool admitted without `documentId`; `workspaceId`
is optional. Ranking, tokens, snippets and cursors: docs/search.md."""

from __future__ import annotations

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.port import Kernel, SearchQuery
from mnote_mcp.kernel.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS
from mnote_mcp.tools.cost import Cost
from mnote_mcp.tools.examples import Example, Stage
from mnote_mcp.tools.failures import BAD_CURSOR, ErrorCase
from mnote_mcp.tools.inputs import SearchArgs, arguments_of
from mnote_mcp.tools.lists import fit_list
from mnote_mcp.tools.outputs import Found
from mnote_mcp.tools.permissions import FIND_PAGES
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS, ToolRequest, ToolResult


async def _search(request: ToolRequest, kernel: Kernel) -> ToolResult:
    args = arguments_of(request, SearchArgs)
    workspaces = request.workspaces
    hits = await kernel.search_pages(
        SearchQuery(
            actor_id=request.actor_id,
            correlation=request.correlation,
            query=args.get("query"),
            workspace_id=request.workspace_id or None,
            workspaces=tuple(sorted(workspaces)) if workspaces is not None else None,
            limit=args.get("limit", DEFAULT_LIMIT),
            cursor=args.get("cursor"),
        )
    )
    return ToolResult(result=dict(hits), effect="read")


PAGE_SEARCH = ToolSpec(
    name="mnote.page.search",
    title="Find pages",
    description=(
        "Search or find pages by words 搜索、查找页面 in titles and text. Hits: ids, title, snippets with"
        " blockId. No query: latest."
    ),
    summary=(
        "find readable pages by title and block text (Chinese and Japanese by substring, words by word or "
        "prefix, whole words first), title matches first, with marked snippets; no query: most recently"
        " changed; paged"
    ),
    returns="`hits`: `workspaceId`, `documentId`, `title`, `revision`, `updatedAt`, `snippets`; `nextCursor`",
    toolset=Toolset.PAGE,
    cost=Cost.SEARCH,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema={
        "type": "object",
        "required": list(CORRELATION_FIELDS),
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
            "workspaceId": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
            "cursor": {"type": "string"},
        },
    },
    extensions={"workspaceId": {"description": "only this workspace"}},
    read=_search,
    fit=fit_list("hits", _search),
    page_bound=False,
    # a strict host fills every field: "" is no query (the listing), no workspace, no cursor
    empty_means_absent=frozenset({"query", "workspaceId", "cursor"}),
    permissions=FIND_PAGES,
    errors=(
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.SCHEMA,
            "`query` has nothing to search for (no letter, digit or CJK character) or too many words",
            "search for words, or leave `query` out to list the pages",
            example={"query": "!!"},
        ),
        ErrorCase(
            ErrorCode.PERMISSION_DENIED,
            Reason.NOT_MEMBER,
            "`workspaceId` names a workspace the caller is not a member of",
            "leave `workspaceId` out to search every workspace the caller belongs to",
            example={"workspaceId": "ws_that_does_not_exist"},
        ),
        BAD_CURSOR,
    ),
    examples=(
        Example({"query": "plan"}, note="pages about a word"),
        Example({}, note="the caller's pages, most recently changed first"),
    ),
    hostile=(
        Example({"query": "w*", "limit": MAX_LIMIT}, note="a prefix every page matches"),
        Example({"query": "alpha beta gamma delta", "limit": MAX_LIMIT}, note="words on every line"),
    ),
    arguments=SearchArgs,
    output=Found,
    oversized=(
        Example({"query": "plan", "limit": 50}, stage=Stage.MANY_PAGES, note="60 hits"),
        Example({"query": "q" * 50_000}, stage=Stage.MANY_PAGES, fits=True, note="a query too long"),
    ),
    asked=(
        ("search my notes for the database cutover", "搜索笔记里的数据库割接"),
        ("find the pages that mention the budget", "查找提到预算的页面"),
    ),
    budget=SizeBudget(contract=530, strict=730),
)

SEARCH_TOOLS = (PAGE_SEARCH,)
