"""`completion/complete`: the arguments of the prompts and of the page resource template.

What an argument completes to is what it names (`ArgumentKind`): a workspace the caller belongs to, a
page it may read whose title or id starts with what was typed (Chinese titles as typed, other text
case-folded), a run that wrote to the page. Only what the caller could read with the tools is ever a
value, and a token limited to some workspaces completes nothing outside them. At most
`--max-completions` values come back (`hasMore` says when there were more). Pages come from the
kernel's `list_pages` asked for the typed prefix, the workspace and one more than the limit (filtered
in SQL, so the cost does not grow with the pages the caller may read); the filter here stays, so a
runtime older than those fields, which lists every readable page, still gives the right answer.
Workspaces come from the whole listing (linear in the readable pages); runs from one page's latest
writes. The event loop only routes: the kernel lists on a worker thread, and a long listing is sifted
on one too (`_sifted`), so a completion costs the loop the same at 10,000 pages as at 100 (issue 30).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import anyio.to_thread
import mcp.types as types

from mnote_mcp.calls.mapping import correlate
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import HistoryQuery, Kernel, PageRef, PagesQuery
from mnote_mcp.surface.prompts.catalog import ArgumentKind
from mnote_mcp.surface.prompts.handlers import PagePrompts
from mnote_mcp.surface.resources.pages import Context, IdentityResolver
from mnote_mcp.surface.resources.uris import PAGE_URI_TEMPLATE
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.scopes import Scope

RUN_LOOKBACK = 100  # the page's latest writes whose runs complete
_INLINE_REFS = 64  # page refs sifted on the event loop; more, on a worker thread
T = TypeVar("T")
_TEMPLATE_ARGUMENTS = (ArgumentKind.WORKSPACE, ArgumentKind.PAGE)
# (caller, what was typed, the other arguments, how many) -> values, best first
Source = Callable[[Context, Identity, str, Mapping[str, str], int], Awaitable[list[str]]]


class Completions:
    """The completion handler of one server."""

    def __init__(
        self, kernel: Kernel, prompts: PagePrompts, identity_for: IdentityResolver, *, limit: int
    ) -> None:
        self.kernel = kernel
        self.prompts = prompts
        self.identity_for = identity_for
        self.limit = limit
        self.sources: dict[ArgumentKind, Source] = {
            ArgumentKind.WORKSPACE: self.workspaces,
            ArgumentKind.PAGE: self.pages,
            ArgumentKind.RUN: self.runs,
        }

    def kinds(
        self, ctx: Context, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> tuple[ArgumentKind, ...]:
        """The arguments `ref` takes, for this caller (a prompt it is not shown takes none)."""
        if isinstance(ref, types.ResourceTemplateReference):
            return _TEMPLATE_ARGUMENTS if ref.uri == PAGE_URI_TEMPLATE else ()
        prompt = self.prompts.find(ctx, ref.name)
        return prompt.arguments if prompt is not None else ()

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        identity = self.identity_for(ctx)
        typed = params.argument.value
        kinds = {kind.value: kind for kind in self.kinds(ctx, params.ref)}
        kind = kinds.get(params.argument.name)
        source = self.sources.get(kind) if kind is not None else None
        readable = identity.actor_id and Scope.PAGE_READ in identity.scopes
        if source is None or not readable or len(typed) > self.prompts.dispatcher.registry.max_id_chars:
            return _values([], self.limit)
        context = dict(params.context.arguments or {}) if params.context is not None else {}
        return _values(await source(ctx, identity, typed, context, self.limit + 1), self.limit)

    async def readable(
        self,
        identity: Identity,
        *,
        prefix: str | None = None,
        workspace_id: str | None = None,
        limit: int | None = None,
    ) -> list[PageRef]:
        """The pages the caller may read (the kernel's `list_pages`, as `resources/list` lists them),
        within the workspaces its token allows, by workspace and id. Narrowed, the kernel is asked
        once per workspace the token allows (a runtime that ignores the narrowing lists every page,
        which this filters)."""
        assert identity.actor_id is not None
        actor_id = identity.actor_id
        within: list[str | None] = [workspace_id]
        if workspace_id is None and identity.workspaces is not None and limit is not None:
            within = [*sorted(identity.workspaces)]  # so that the limit counts only those
        refs: list[PageRef] = []
        for workspace in within:
            if limit is not None and len(refs) >= limit:
                break
            refs += await self.kernel.list_pages(PagesQuery(actor_id, prefix, workspace, limit))
        return await _sifted(refs, lambda: [ref for ref in refs if _allowed(identity, ref.workspace_id)])

    async def workspaces(
        self, ctx: Context, identity: Identity, typed: str, context: Mapping[str, str], limit: int
    ) -> list[str]:
        """The workspaces holding a page the caller may read, by the start of their id."""
        refs = await self.readable(identity)

        def sift() -> list[str]:
            ids = dict.fromkeys(ref.workspace_id for ref in refs)
            return [workspace for workspace in ids if _starts(workspace, typed)][:limit]

        return await _sifted(refs, sift)

    async def pages(
        self, ctx: Context, identity: Identity, typed: str, context: Mapping[str, str], limit: int
    ) -> list[str]:
        """Pages the caller may read whose title or id starts with what was typed, in the workspace
        already chosen (or in all of the caller's)."""
        workspace_id = context.get(ArgumentKind.WORKSPACE)
        refs = await self.readable(
            identity, prefix=typed or None, workspace_id=workspace_id or None, limit=limit
        )

        def sift() -> list[str]:
            found = [
                ref.document_id
                for ref in refs
                if (not workspace_id or ref.workspace_id == workspace_id)
                and (_starts(ref.title, typed) or _starts(ref.document_id, typed))
            ]
            return list(dict.fromkeys(found))[:limit]

        return await _sifted(refs, sift)

    async def runs(
        self, ctx: Context, identity: Identity, typed: str, context: Mapping[str, str], limit: int
    ) -> list[str]:
        """The runs among the page's latest writes (the page named by the other arguments), newest first."""
        workspace_id, document_id = context.get(ArgumentKind.WORKSPACE), context.get(ArgumentKind.PAGE)
        if not workspace_id or not document_id or not _allowed(identity, workspace_id):
            return []
        assert identity.actor_id is not None
        try:
            history = await self.kernel.page_history(
                HistoryQuery(
                    workspace_id=workspace_id,
                    document_id=document_id,
                    actor_id=identity.actor_id,
                    correlation=correlate({}, ctx.meta, identity),
                    limit=RUN_LOOKBACK,
                )
            )
        except MnoteError:
            return []  # missing or not readable: nothing completes, as for a page nobody wrote to
        folded = typed.casefold()
        runs = (str(entry.get("runId") or "") for entry in history.get("entries", []))
        matching = [run for run in dict.fromkeys(runs) if run and run.casefold().startswith(folded)]
        return matching[:limit]


async def _sifted(refs: list[PageRef], sift: Callable[[], T]) -> T:
    """`sift()` (a pass over `refs`) on the event loop for a few refs, on a worker thread for many."""

    def sift_and_drop() -> T:
        try:
            return sift()
        finally:
            refs.clear()

    return await anyio.to_thread.run_sync(sift_and_drop) if len(refs) > _INLINE_REFS else sift_and_drop()


def _starts(value: str, typed: str) -> bool:
    """Whether `value` starts with `typed`, case-folded (Chinese has no case: it matches as typed)."""
    return value.casefold().startswith(typed.casefold())


def _allowed(identity: Identity, workspace_id: str) -> bool:
    return identity.workspaces is None or workspace_id in identity.workspaces


def _values(found: list[str], limit: int) -> types.CompleteResult:
    return types.CompleteResult(
        completion=types.Completion(values=found[:limit], has_more=len(found) > limit)
    )
