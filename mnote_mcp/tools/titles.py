"""A page named by its title: the one readable page with that title (or id), or a refusal that lists
the candidates, never a guess.

A person names a page by its title ("add a to-do to the launch checklist"); a model that must first
search for its id spends a call and a result on it, and the filesystem server's agent opens
`<title>.md` directly. So every tool that acts on a page takes, in `documentId`, the page's id or its
whole title (case-folded), and `workspaceId` may be `""` when the model does not know the workspace:
then every workspace the caller may read (and its token allows) is looked in (docs/decisions.md,
"Naming a page by its title"). An id is tried first, as before, so a call that names a page by id
costs nothing more; only when that page is not found is the name read as a title, in the workspace
given. Several readable pages with the title (or a title that is another page's id) are
`invalid_argument`/`title_ambiguous`, with up to `MAX_CANDIDATES` of them (`workspaceId`,
`documentId`, `title`: what the next call needs, nothing of their bodies); none is the usual
`not_found`. Pages the caller may not read are never candidates, counted or named.
"""

from __future__ import annotations

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Kernel, PageRef, PagesQuery

MAX_CANDIDATES = 5


def _is_named(ref: PageRef, name: str) -> bool:
    """Filtered again here: a runtime older than `PagesQuery.named` lists every readable page."""
    return ref.document_id == name or ref.title.casefold() == name.casefold()


async def page_named(
    kernel: Kernel,
    actor_id: str,
    name: str,
    workspace_id: str | None,
    workspaces: frozenset[str] | None,
) -> PageRef:
    """The one page `actor_id` may read whose id or whole title is `name`, in `workspace_id` (None:
    any of the actor's, within `workspaces`, a token's limit). An empty name names nothing (and
    never asks the kernel: an empty `named` is no narrowing at all)."""
    missing = MnoteError(
        ErrorCode.NOT_FOUND, Reason.PAGE, {"workspaceId": workspace_id or "", "documentId": name}
    )
    if not name.strip():
        raise missing
    refs = await kernel.list_pages(PagesQuery(actor_id, workspace_id=workspace_id, named=name))
    found = [
        ref
        for ref in refs
        if _is_named(ref, name)
        and (workspace_id is None or ref.workspace_id == workspace_id)
        and (workspaces is None or ref.workspace_id in workspaces)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise missing
    raise MnoteError(
        ErrorCode.INVALID_ARGUMENT,
        Reason.TITLE_AMBIGUOUS,
        {
            "pointer": "/documentId",
            "matches": len(found),
            "candidates": [
                {"workspaceId": ref.workspace_id, "documentId": ref.document_id, "title": ref.title}
                for ref in found[:MAX_CANDIDATES]
            ],
        },
    )
