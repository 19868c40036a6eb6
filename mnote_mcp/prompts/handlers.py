"""`prompts/list` and `prompts/get`: the page workflows of `prompts/catalog.py`, as one caller sees them.

A prompt is listed to a connection that may read pages and use every tool it leads to (the same test
as `tools/list`: registered, the scope granted, not a write on a read-only server). `prompts/get`
reads what it attaches as the caller, through the page resources (`PageResources.view`) and the
kernel's history, so it can never show more than `resources/read` or `mnote.page.history` would; a
page the caller may not read is the same "unknown page" as one that does not exist. Everything is in
the session's locale (`--locale`), tool names as the server advertises them.
"""

from __future__ import annotations

import mcp.types as types
import orjson
from mcp.shared.exceptions import MCPError

from mnote_mcp.dispatch import Dispatcher
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import HistoryEntry, HistoryFilter, HistoryQuery, PageKey, PageView
from mnote_mcp.mapping import correlate
from mnote_mcp.prompts.catalog import PROMPTS, ArgumentKind, Attach, PromptSpec
from mnote_mcp.resources.pages import MIME_TYPE, Context, IdentityResolver, PageResources, document
from mnote_mcp.resources.uris import page_uri
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import Locale
from mnote_mcp.vocabulary.naming import respell
from mnote_mcp.vocabulary.scopes import Scope

RUN_ENTRIES = 50  # the most history entries of one run a prompt attaches
_TOO_LONG: dict[Locale, str] = {
    "zh-CN": "（页面太长，没有附上：用 mnote.page.get 分段读取它，maxBlocks 与 cursor。）",
    "en": "(The page is too long to attach: read it in pieces with mnote.page.get, maxBlocks and cursor.)",
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
                for prompt in self.visible(self.identity_for(ctx))
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
            self._page(view, uri, locale)
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

    def _page(self, view: PageView, uri: str, locale: Locale) -> list[types.ContentBlock]:
        """The page as an embedded resource, or, longer than one result may be, a link to it."""
        text = document(view, uri)
        if len(text) <= self.dispatcher.max_result_chars:
            resource = types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=text)
            return [types.EmbeddedResource(type="resource", resource=resource)]
        style = self.dispatcher.registry.style
        return [
            types.ResourceLink(
                type="resource_link",
                uri=uri,
                name=view["documentId"],
                title=view["title"],
                mime_type=MIME_TYPE,
            ),
            types.TextContent(type="text", text=respell(_TOO_LONG[locale], style)),
        ]

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
        kept = list(entries)
        while kept and len(_json(kept)) > self.dispatcher.max_result_chars:
            kept = kept[: len(kept) // 2]
        blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=_json(kept))]
        if len(kept) < len(entries) or history.get("nextCursor"):
            note = _LEFT_OUT[locale].format(runId=run_id)
            blocks.append(types.TextContent(type="text", text=respell(note, self.dispatcher.registry.style)))
        return blocks


def _json(entries: list[HistoryEntry]) -> str:
    """The run's history entries as the tools' compact JSON (`{"entries": [...]}`)."""
    return orjson.dumps({"entries": entries}).decode("utf-8")
