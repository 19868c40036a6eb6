"""Scenarios that read: page views, listings, revisions, search; and who may read and write what.

Listings and searches see every page an actor may read, including the pages other scenarios write, so
they are compared on the pages nothing writes (`seed.STABLE_PAGES`), and a listing is also held to
naming nothing outside the scratch workspaces (its actors belong to nothing else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnote_mcp.conformance.checks import Registry
from mnote_mcp.conformance.seed import (
    OTHER_NOTES,
    OTHER_PAGE,
    READ_PAGE,
    SEARCH_PAGE,
    SECRET_PAGE,
    STABLE_PAGES,
)
from mnote_mcp.conformance.session import Session
from mnote_mcp.kernel.port import (
    AuthorizeQuery,
    CommandName,
    HistoryQuery,
    PageKey,
    PagesQuery,
    RevisionsQuery,
    SearchQuery,
)
from mnote_mcp.kernel.protocol import (
    AUTHORIZE,
    EXECUTE,
    GET_PAGE,
    LIST_PAGES,
    PAGE_HISTORY,
    PAGE_REVISIONS,
    SEARCH_PAGES,
)
from mnote_mcp.kernel.scopes import Scope

if TYPE_CHECKING:
    from pydantic import JsonValue

registry = Registry()


def _stable(refs: JsonValue) -> JsonValue:
    if not isinstance(refs, list):
        return refs
    return [ref for ref in refs if isinstance(ref, dict) and ref.get("documentId") in STABLE_PAGES]


def _stable_hits(result: JsonValue) -> JsonValue:
    if not isinstance(result, dict) or not isinstance(result.get("hits"), list):
        return result
    return {**result, "hits": _stable(result["hits"])}


@registry.check(
    "reads.page_view",
    guarantees="get_page answers the page as asked: whole, without body, options or blocks, as Markdown, a"
    " subset of blocks, and in pieces (maxBlocks, then the cursor it gave), as the embedded kernel",
    breaks="get_page: the page as the query asks to see it (docs/kernel.md, reading a page)",
    operations=("get_page",),
)
async def page_view(s: Session) -> str | None:
    await s.call(GET_PAGE, s.query(READ_PAGE))
    await s.call(
        GET_PAGE, s.query(READ_PAGE, include_body=False, include_options=False, include_blocks=False)
    )
    await s.call(GET_PAGE, s.query(READ_PAGE, format="markdown"))
    await s.call(GET_PAGE, s.query(READ_PAGE, block_ids=("p_2",)))
    piece = s.query(READ_PAGE, max_blocks=2)
    first = await s.call(GET_PAGE, piece)
    await s.rest(GET_PAGE, piece, first, "a read of 2 of 3 blocks names a cursor")
    return "whole, brief, Markdown, a subset, two pieces"


@registry.check(
    "reads.list_pages",
    guarantees="list_pages lists exactly the pages an actor may read (never a restricted page, another"
    " workspace's or any outside the scratch workspaces), narrowed by prefix (case-folded), workspace and"
    " limit, as the embedded kernel",
    breaks="list_pages: the pages an actor may read",
    operations=("list_pages",),
)
async def list_pages(s: Session) -> str | None:
    scratch = {s.ws, s.scratch.other_ws}
    for role in ("owner", "editor", "viewer", "stranger", "nobody"):
        answer = await s.call(
            LIST_PAGES, PagesQuery(s.actor(role)), keep=_stable, why=f"the pages {role} may read"
        )
        foreign = [ref for ref in answer.value if ref.get("workspaceId") not in scratch]
        s.expect(not foreign, f"{role} is a member of the scratch workspaces only", actual=foreign)
    await s.call(LIST_PAGES, PagesQuery(s.actor("editor"), prefix="pROJECT P"))
    await s.call(LIST_PAGES, PagesQuery(s.actor("editor"), prefix="KIT-SECRET"), why="a restricted page")
    await s.call(LIST_PAGES, PagesQuery(s.actor("owner"), prefix="kit-secret", workspace_id=s.ws))
    await s.call(LIST_PAGES, PagesQuery(s.actor("owner"), workspace_id=s.scratch.other_ws))
    await s.call(LIST_PAGES, PagesQuery(s.actor("stranger"), limit=1))
    await s.call(LIST_PAGES, PagesQuery(s.actor("stranger"), limit=0))
    return "five actors, narrowed five ways"


@registry.check(
    "reads.page_revisions",
    guarantees="page_revisions answers the revision of each named page the actor may read, leaving out"
    " missing, restricted and foreign pages alike",
    breaks="page_revisions: a watcher cannot tell a missing page from an unreadable one",
    operations=("page_revisions",),
)
async def page_revisions(s: Session) -> str | None:
    pages = (
        PageKey(s.ws, READ_PAGE),
        PageKey(s.ws, SECRET_PAGE),
        PageKey(s.ws, "missing"),
        PageKey(s.scratch.other_ws, OTHER_PAGE),
    )
    for role in ("editor", "owner", "stranger", "nobody"):
        await s.call(PAGE_REVISIONS, RevisionsQuery(s.actor(role), pages), why=f"what {role} may watch")
    await s.call(PAGE_REVISIONS, RevisionsQuery("", pages), why="no actor reads nothing")
    return "four actors and none"


@registry.check(
    "search.hits",
    guarantees="search_pages finds the readable pages that match (Latin, a Chinese phrase, one Chinese"
    " character), with the same snippets and order as the embedded kernel, finds a write at once, never"
    " a restricted page, lists and pages through with its cursor, refuses a workspace the actor is no"
    " member of and a bad query, limit or cursor with its pointer",
    breaks="search_pages (docs/search.md)",
    operations=("search_pages", "execute"),
)
async def search(s: Session) -> str | None:
    def ask(actor: str = "editor", **fields: Any) -> SearchQuery:
        return SearchQuery(s.actor(actor), s.correlation(), **{"workspace_id": s.ws, **fields})

    found = await s.call(SEARCH_PAGES, ask(query="aurora"))
    s.expect(
        [hit["documentId"] for hit in found.value["hits"]] == [SEARCH_PAGE],
        "an editor finds the search page, never the restricted one",
        actual=found.value,
    )
    await s.call(SEARCH_PAGES, ask("owner", query="aurora"), why="the owner finds the restricted page too")
    await s.call(SEARCH_PAGES, ask(query="海洋"))
    await s.call(SEARCH_PAGES, ask(query="海"))
    await s.call(SEARCH_PAGES, ask(query="kit-secret*"), why="a restricted page is never a hit")
    update = s.command(
        CommandName.PAGE_BLOCK_UPDATE,
        {"blockId": "a_3", "text": "A lynx crossed the glacier."},
        SEARCH_PAGE,
        "update",
    )
    await s.written(update, "a write to search")
    await s.call(SEARCH_PAGES, ask(query="lynx"), why="a write is found at once")
    await s.call(SEARCH_PAGES, ask(query="海洋"), why="replaced text is gone")
    notes = s.command(
        CommandName.PAGE_BLOCK_UPDATE,
        {"blockId": "n_1", "text": "An aurora again tonight, and a lynx."},
        OTHER_NOTES,
        "notes",
        actor="stranger",
        ws=s.scratch.other_ws,
    )
    await s.written(notes, "the most recently changed page of the other workspace")
    listing = ask("stranger", workspace_id=s.scratch.other_ws, limit=1)
    first = await s.call(SEARCH_PAGES, listing, why="the listing, most recently changed first")
    await s.rest(SEARCH_PAGES, listing, first, "a listing of 1 of 2 pages names a cursor")
    await s.call(SEARCH_PAGES, ask("stranger", query="aurora"), why="not a member of the workspace asked")
    await s.call(SEARCH_PAGES, ask(query="！？"), why="a query with nothing to search")
    await s.call(SEARCH_PAGES, ask(query="aurora", limit=0))
    await s.call(SEARCH_PAGES, ask(query="aurora", cursor="kit-junk"))
    return f"{OTHER_NOTES} and {OTHER_PAGE} listed in two pieces; refusals with their pointers"


@registry.check(
    "permissions.checkpoints",
    guarantees="authorize answers the checkpoints in the contract's order for every scope: no actor,"
    " not a member (the same for a missing page), a missing page, page read, page write, artifact write",
    breaks="authorize: bad arguments never hide a permission refusal (the dispatcher asks it first)",
    operations=("authorize",),
)
async def checkpoints(s: Session) -> str | None:
    asked = [
        ("editor", READ_PAGE, Scope.PAGE_WRITE),
        ("viewer", READ_PAGE, Scope.PAGE_READ),
        ("commenter", READ_PAGE, Scope.ARTIFACT_WRITE),
        ("", READ_PAGE, Scope.PAGE_READ),
        ("stranger", READ_PAGE, Scope.PAGE_READ),
        ("stranger", "missing", Scope.PAGE_READ),
        ("editor", "missing", Scope.PAGE_WRITE),
        ("editor", SECRET_PAGE, Scope.PAGE_WRITE),
        ("viewer", READ_PAGE, Scope.PAGE_WRITE),
        ("viewer", READ_PAGE, Scope.ARTIFACT_WRITE),
        ("commenter", READ_PAGE, Scope.PAGE_WRITE),
        ("owner", SECRET_PAGE, Scope.PAGE_WRITE),
    ]
    for role, page, scope in asked:
        actor = s.actor(role) if role else ""
        await s.call(
            AUTHORIZE, AuthorizeQuery(actor, s.ws, page, scope), why=f"{role or 'no actor'}, {page}, {scope}"
        )
    return f"{len(asked)} questions"


@registry.check(
    "permissions.non_member",
    guarantees="an actor who is no member of the workspace is refused not_member on every operation, the"
    " same for a page that exists and one that does not; no actor is refused unauthenticated",
    breaks="the permission checkpoints: a non-member learns nothing about the workspace",
    operations=("get_page", "execute", "page_history", "search_pages"),
)
async def non_member(s: Session) -> str | None:
    refusals = []
    for page in (READ_PAGE, "missing"):
        refusals.append(await s.call(GET_PAGE, s.query(page, "stranger")))
        note = s.command(
            CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, page, f"note_{page}", actor="stranger"
        )
        refusals.append(await s.call(EXECUTE, note))
        history = HistoryQuery(s.ws, page, s.actor("stranger"), s.correlation())
        refusals.append(await s.call(PAGE_HISTORY, history))
    for answer in refusals:
        s.expect_refused(
            answer, "a non-member is refused not_member", "mnote_tool_permission_denied", "not_member"
        )
    for existing, missing in zip(refusals[:3], refusals[3:], strict=True):
        s.expect(
            existing.error == missing.error,
            "a non-member's refusal is the same for a page that exists and one that does not",
            request=[existing.request, missing.request],
            expected=existing.error,
            actual=missing.error,
        )
    await s.call(GET_PAGE, s.query(READ_PAGE, ""), why="no actor")
    await s.call(
        EXECUTE, s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "t"}, READ_PAGE, "anon", actor="")
    )
    return "reads, writes and history refused alike"


@registry.check(
    "permissions.role_writes",
    guarantees="a viewer's page and artifact writes are refused page_write and artifact_write, a"
    " commenter's page write page_write (dry runs alike), a commenter writes artifacts; nothing else"
    " is written",
    breaks="the roles: page write and artifact write permissions",
    operations=("execute", "get_page"),
)
async def role_writes(s: Session) -> str | None:
    page = "permissions"
    refused: list[tuple[str, str, dict[str, object]]] = [
        ("viewer", CommandName.PAGE_BODY_SAVE, {"content": [{"type": "paragraph", "text": "x"}]}),
        ("viewer", CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}),
        ("viewer", CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "x"}),
        ("commenter", CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "t"}),
        ("commenter", CommandName.PAGE_REVERT, {"toRevision": 1}),
    ]
    for index, (role, name, payload) in enumerate(refused):
        for dry in (True, False):
            answer = await s.call(
                EXECUTE, s.command(name, payload, page, f"w{index}", actor=role, dry_run=dry)
            )
            s.expect_refused(answer, f"a {role} may not {name}", "mnote_tool_permission_denied")
    await s.expect_revision(page, 1, "the refused writes wrote nothing")
    note = s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "c"}, page, "note", actor="commenter")
    await s.written(note, "a commenter writes artifacts")
    return f"{len(refused)} writes refused (dry runs too), a commenter's note written"


@registry.check(
    "permissions.restricted_page",
    guarantees="a page restricted to its members is refused page_read to a workspace member who is not"
    " one (reads, history, writes), left out of listings, revisions and searches, and read by its member",
    breaks="page read permission (restricted pages)",
    operations=("get_page", "page_history", "execute", "list_pages", "search_pages"),
)
async def restricted(s: Session) -> str | None:
    for role in ("editor", "viewer"):
        answer = await s.call(GET_PAGE, s.query(SECRET_PAGE, role))
        s.expect(
            answer.refusal == ("mnote_tool_permission_denied", "page_read"),
            f"{role} may not read it",
            actual=answer.error or answer.value,
        )
    await s.call(PAGE_HISTORY, HistoryQuery(s.ws, SECRET_PAGE, s.actor("editor"), s.correlation()))
    save = s.command(
        CommandName.PAGE_BODY_SAVE,
        {"mode": "append", "content": [{"type": "paragraph", "text": "x"}]},
        SECRET_PAGE,
        "save",
    )
    await s.call(EXECUTE, save, why="page read comes before page write")
    await s.call(EXECUTE, s.variant(save, dry_run=True), why="a dry run is refused alike")
    await s.call(GET_PAGE, s.query(SECRET_PAGE, "owner"), why="its member reads it")
    await s.call(LIST_PAGES, PagesQuery(s.actor("editor"), workspace_id=s.ws), keep=_stable)
    await s.call(
        SEARCH_PAGES, SearchQuery(s.actor("viewer"), s.correlation(), "aurora", s.ws), keep=_stable_hits
    )
    return "refused to the editor and the viewer, read by its owner"
