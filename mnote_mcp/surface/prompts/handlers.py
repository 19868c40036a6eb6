"""`prompts/list` and `prompts/get`: the page workflows of `surface/prompts/catalog.py`, as one caller sees them.

A prompt is listed to a connection that may read pages and use every tool it leads to (the same test
as `tools/list`: registered, the scope granted, not a write on a read-only server). `prompts/get`
reads what it attaches as the caller, through the page resources (`PageResources.view`) and the
kernel's history, so it can never show more than `resources/read` or `mnote.page.history` would; a
page the caller may not read is the same "unknown page" as one that does not exist. Everything is in
the session's locale (`--locale`), tool names as the server advertises them. A prompt is built whole;
over `--max-result-chars` the answer budget (`mnote_mcp/surface/answers.py`) has `fit` cut what it attaches:
the page to its first piece with a line saying how to read the rest, a run's writes to its newest.
"""

from __future__ import annotations

import mcp.types as types
import orjson
from mcp.shared.exceptions import MCPError

from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.calls.mapping import correlate
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import HistoryEntry, HistoryFilter, HistoryQuery, PageKey, PageView
from mnote_mcp.surface.prompts.catalog import PROMPTS, ArgumentKind, Attach, PromptSpec
from mnote_mcp.surface.resources.pages import (
    MIME_TYPE,
    Context,
    IdentityResolver,
    PageResources,
    document,
    list_offset,
    piece_uri,
)
from mnote_mcp.surface.resources.uris import page_key, page_uri
from mnote_mcp.tools.blockpieces import Piece
from mnote_mcp.tools.budget import Answer, chars, text_chars
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import Locale
from mnote_mcp.vocabulary.naming import respell
from mnote_mcp.vocabulary.scopes import Scope

RUN_ENTRIES = 50  # the most history entries of one run a prompt attaches
_GOES_ON: dict[Locale, str] = {
    "zh-CN": (
        "（页面太长，上面只附上了它的第一段。其余部分用 resources/read {uri} 读取，或调用 mnote.page.get"
        '（workspaceId {workspaceId}，documentId {documentId}，format "markdown"，cursor "{cursor}"），'
        "每一段都给出下一段的 cursor。）"
    ),
    "en": (
        "(The page is too long to attach whole: above is its first piece. Read the rest with resources/read"
        " {uri}, or with mnote.page.get (workspaceId {workspaceId}, documentId {documentId}, format"
        ' "markdown", cursor "{cursor}"); each piece gives the cursor of the next.)'
    ),
}
_LEFT_OUT: dict[Locale, str] = {
    "zh-CN": "（该运行还有写入没有附上：用 mnote.page.history 查看，filter.runId {runId}。）",
    "en": "(Not every write of the run is attached: see them all with mnote.page.history, filter.runId {runId}.)",
}


class PagePrompts:
    """The prompt handlers of one server."""

    def __init__(self, dispatcher: Dispatcher, pages: PageResources, identity_for: IdentityResolver) -> None:
        self.dispatcher = dispatcher
        self.pages = pages
        self.identity_for = identity_for

    @property
    def locale(self) -> Locale:
        return self.dispatcher.locale

    def visible(self, identity: Identity) -> list[PromptSpec]:
        """The prompts this caller may use: it reads pages and may use every tool the prompt leads to."""
        if Scope.PAGE_READ not in identity.scopes:
            return []
        registry = self.dispatcher.registry
        return [
            prompt
            for prompt in PROMPTS
            if all(
                (spec := registry.find(tool)) is not None and self.dispatcher.exposes(spec, identity.scopes)
                for tool in prompt.tools
            )
        ]

    def find(self, ctx: Context, name: str) -> PromptSpec | None:
        return next((p for p in self.visible(self.identity_for(ctx)) if p.name == name), None)

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        locale = self.locale
        visible = self.visible(self.identity_for(ctx))
        start = list_offset(params.cursor if params else None, len(visible))  # a page the budget cut
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=prompt.name,
                    title=prompt.title[locale],
                    description=prompt.description[locale],
                    arguments=[
                        types.PromptArgument(
                            name=kind.value, description=prompt.argument_words(kind, locale), required=True
                        )
                        for kind in prompt.arguments
                    ],
                )
                for prompt in visible[start:]
            ]
        )

    async def get_prompt(self, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = self.find(ctx, params.name)
        if prompt is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
        given = params.arguments or {}
        limit = self.dispatcher.registry.max_id_chars
        arguments: dict[str, str] = {}
        for kind in prompt.arguments:
            value = given.get(kind.value, "")
            if not value:
                raise MCPError(types.INVALID_PARAMS, f"Missing argument: {kind.value}")
            if len(value) > limit:
                raise MCPError(
                    types.INVALID_PARAMS, f"Argument {kind.value} is longer than {limit} characters"
                )
            arguments[kind.value] = value
        key = PageKey(arguments[ArgumentKind.WORKSPACE], arguments[ArgumentKind.PAGE])
        uri = page_uri(key)
        try:
            view = await self.pages.view(ctx, key, uri)
        except MCPError as error:
            raise MCPError(types.INVALID_PARAMS, f"Unknown page or not readable: {uri}") from error
        locale, style = self.locale, self.dispatcher.registry.style
        text = prompt.text[locale].format(title=view["title"], revision=view["revision"], **arguments)
        attached = (
            self._page(view, uri)
            if prompt.attach is Attach.PAGE
            else await self._run(ctx, key, arguments[ArgumentKind.RUN], locale)
        )
        return types.GetPromptResult(
            description=prompt.description[locale],
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=respell(text, style))
                ),
                *(types.PromptMessage(role="user", content=content) for content in attached),
            ],
        )

    def _page(self, view: PageView, uri: str) -> list[types.ContentBlock]:
        """The page as an embedded resource, as `resources/read` gives it (whole: `fit` cuts it)."""
        resource = types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=document(view, uri))
        return [types.EmbeddedResource(type="resource", resource=resource)]

    async def _run(self, ctx: Context, key: PageKey, run_id: str, locale: Locale) -> list[types.ContentBlock]:
        """The run's writes on the page, newest first, as JSON, within the result budget."""
        identity = self.identity_for(ctx)
        assert identity.actor_id is not None  # `pages.view` let the caller in
        try:
            history = await self.dispatcher.kernel.page_history(
                HistoryQuery(
                    workspace_id=key.workspace_id,
                    document_id=key.document_id,
                    actor_id=identity.actor_id,
                    correlation=correlate({}, ctx.meta, identity),
                    filter=HistoryFilter(run_id=run_id),
                    limit=RUN_ENTRIES,
                )
            )
        except MnoteError as error:
            raise MCPError(
                types.INVALID_PARAMS, f"Cannot read the page's history: {error.code.value}"
            ) from None
        entries: list[HistoryEntry] = history.get("entries", [])
        blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=_json(entries))]
        if history.get("nextCursor"):
            blocks.append(types.TextContent(type="text", text=self._left_out(run_id)))
        return blocks

    def _left_out(self, run_id: str) -> str:
        return respell(_LEFT_OUT[self.locale].format(runId=run_id), self.dispatcher.registry.style)

    # -- over the answer budget ---------------------------------------------------------------

    async def fit(self, ctx: Context, answer: Answer, limit: int) -> Answer:
        """A `prompts/get` answer over `limit` characters (its wire form) cut to fit: the attached
        page to the piece that fits with a line saying how to read the rest (its resource URI, or
        `mnote.page.get` with the piece's cursor); a run's writes to the newest that fit, with the
        line naming the rest. The prompt's own text is never cut."""
        text, *attached = answer["messages"]
        if not attached:
            return answer
        content = attached[0]["content"]
        if content.get("type") == "resource":
            return await self._fit_page(ctx, answer, text, content["resource"], limit)
        return self._fit_run(answer, text, content, limit)

    async def _fit_page(
        self, ctx: Context, answer: Answer, text: Answer, resource: Answer, limit: int
    ) -> Answer:
        uri = resource["uri"]
        key = page_key(uri)
        assert key is not None  # the handler attached a page it read

        def with_piece(view: Piece) -> Answer:
            attached = {
                "role": "user",
                "content": {"type": "resource", "resource": {**resource, "text": document(view, uri)}},
            }
            messages = [text, attached]
            cursor = view.get("nextCursor")
            if cursor:
                note = _GOES_ON[self.locale].format(
                    uri=piece_uri(uri, cursor),
                    workspaceId=key.workspace_id,
                    documentId=key.document_id,
                    cursor=cursor,
                )
                style = self.dispatcher.registry.style
                messages.append({"role": "user", "content": {"type": "text", "text": respell(note, style)}})
            return {**answer, "messages": messages}

        piece = await self.pages.piece(ctx, uri, limit, lambda view: chars(with_piece(view)))
        return with_piece(piece)

    def _fit_run(self, answer: Answer, text: Answer, content: Answer, limit: int) -> Answer:
        entries: list[HistoryEntry] = orjson.loads(content["text"])["entries"]
        run_id = str(entries[0].get("runId")) if entries else ""
        note = {"role": "user", "content": {"type": "text", "text": self._left_out(run_id)}}

        def with_entries(count: int) -> Answer:
            shown = {"role": "user", "content": {**content, "text": _json(entries[:count])}}
            return {**answer, "messages": [text, shown, note]}

        room = limit - chars(with_entries(0))
        count, used = 0, 0
        while count < len(entries) - 1:  # each entry's JSON, as a string holds it, and a comma
            used += text_chars(orjson.dumps(entries[count]).decode("utf-8")) + 1
            if used > room:
                break
            count += 1
        while count > 0 and chars(with_entries(count)) > limit:
            count -= 1
        return with_entries(count)


def _json(entries: list[HistoryEntry]) -> str:
    """The run's history entries as the tools' compact JSON (`{"entries": [...]}`)."""
    return orjson.dumps({"entries": entries}).decode("utf-8")
