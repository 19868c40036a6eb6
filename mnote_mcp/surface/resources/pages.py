"""Every page an actor may read, as an MCP resource; reads and subscriptions obey the tools' permissions.

The caller is `identity_for(ctx)`, exactly as for tools, and needs the `page.read` scope. A page that
is missing, restricted or in another workspace is the same "unknown resource" to everyone, so a
resource can never tell a caller more than the tools would.

Change notifications work in both protocol eras the SDK speaks: on the 2025-11-25 handshake a client
sends `resources/subscribe` and gets `notifications/resources/updated` on its session; on 2026-07-28
it opens a `subscriptions/listen` stream naming the page URIs, and the updates ride that stream. Both
are fed by one `PageWatcher` per server lifespan, polling revisions from the kernel.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlencode

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from mnote_mcp.base.sdkadapter import connection_of
from mnote_mcp.calls.mapping import correlate
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Kernel, PageChangeFeed, PageKey, PageQuery, PagesQuery, PageView
from mnote_mcp.surface.resources.uris import PAGE_URI_TEMPLATE, page_key, page_uri
from mnote_mcp.surface.resources.watch import DEFAULT_MAX_SUBSCRIPTIONS, Notify, PageWatcher, Watch
from mnote_mcp.tools.blockpieces import (
    Measure,
    Piece,
    Position,
    cut,
    decode_cursor,
    is_piece_cursor,
    piece_at,
    read_piece,
)
from mnote_mcp.tools.budget import DEFAULT_MAX_RESULT_CHARS, Answer, chars
from mnote_mcp.tools.pieces import body_roots, longest_piece, markdown_chars
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.scopes import Scope

Context = ServerRequestContext[Any, Any]
IdentityResolver = Callable[[Context], Identity]
MIME_TYPE = "text/markdown"
# Said at the end of a piece of a page, and when a piece's cursor is of an older revision.
_MORE = "the page goes on; read the next piece"
_STALE_PIECE = "the page changed while it was read in pieces"
_NEXT_ROOM = 400  # the line naming the next piece
LIST_PAGE_SIZE = 200
_HIDDEN = frozenset({ErrorCode.NOT_FOUND, ErrorCode.PERMISSION_DENIED, ErrorCode.UNAUTHENTICATED})
_INLINE_URIS = 64  # URIs matched on the event loop; more, on a worker thread


class PageResources:
    """The resource handlers of one server; `lifespan` runs the watcher the subscriptions share."""

    def __init__(
        self,
        kernel: Kernel,
        identity_for: IdentityResolver,
        *,
        watch_interval: float,
        still_allowed: Callable[[Identity, PageKey], bool] | None = None,
        max_chars: int = DEFAULT_MAX_RESULT_CHARS,
        max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS,
    ) -> None:
        """`still_allowed(identity, page)` is asked before every poll of a watch: whether the
        subscriber's credential may still read the page (tokens can be revoked while serving).
        `max_chars` bounds a read's text as `--max-result-chars` bounds a tool's result;
        `max_subscriptions` the pages one connection subscribes to and one listen stream names."""
        self.kernel = kernel
        self.max_chars = max_chars
        self.max_subscriptions = max_subscriptions
        self._subscribed: dict[int, set[str]] = {}  # per connection (`_connection_id`), its URIs
        self.identity_for = identity_for
        self.watch_interval = watch_interval
        self.still_allowed = still_allowed
        self._watchers: set[PageWatcher] = set()

    # -- lifespan and nudges ------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[PageWatcher]:
        watcher = PageWatcher(self.kernel, self.watch_interval)
        stop_hearing = self._hear_changes(watcher)
        async with anyio.create_task_group() as group:
            group.start_soon(watcher.run)
            self._watchers.add(watcher)
            try:
                yield watcher
            finally:
                self._watchers.discard(watcher)
                stop_hearing()
                group.cancel_scope.cancel()

    def watch_count(self) -> int:
        """Watches held now, over every watcher (one per server lifespan: an SSE connection has its own)."""
        return sum(len(watcher) for watcher in self._watchers)

    def _hear_changes(self, watcher: PageWatcher) -> Callable[[], None]:
        """With a kernel that hears writes as they commit (the embedded kernel: this process's writes
        on SQLite, any replica's on PostgreSQL), wake the watcher at once rather than at its next poll.
        A write is heard on the thread that committed it: the event loop's own (an inline write on
        SQLite) or another."""
        if not isinstance(self.kernel, PageChangeFeed):
            return lambda: None
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def heard(_key: PageKey, _revision: int) -> None:
            if not len(watcher):
                return
            if threading.get_ident() == loop_thread:
                watcher.nudge()
                return
            with contextlib.suppress(RuntimeError):  # the event loop is gone: the server is stopping
                anyio.from_thread.run_sync(watcher.nudge, token=token)

        return self.kernel.watch_changes(heard)

    def nudge(self) -> None:
        """A write went through this process: poll now rather than at the next interval."""
        for watcher in self._watchers:
            watcher.nudge()

    # -- who is asking ------------------------------------------------------------------------

    def _reader(self, ctx: Context) -> tuple[Identity, str] | None:
        """The caller and its actor id, if it may read pages at all (an actor and the page.read scope)."""
        identity = self.identity_for(ctx)
        if not identity.actor_id or Scope.PAGE_READ not in identity.scopes:
            return None
        return identity, identity.actor_id

    @staticmethod
    def _allowed(identity: Identity, key: PageKey) -> bool:
        """A token limited to some workspaces sees nothing of the others (as with the tools)."""
        return identity.workspaces is None or key.workspace_id in identity.workspaces

    async def _watches(
        self, ctx: Context, uris: list[str], notify: Callable[[str], Notify]
    ) -> dict[str, Watch]:
        """A watch for each of `uris` the caller may read now, keyed by URI; the others are left out."""
        reader = self._reader(ctx)

        def parse() -> dict[str, PageKey]:
            return {uri: key for uri in uris if (key := page_key(uri)) is not None}

        # matching a URI against the template costs tens of microseconds: many are matched off the loop
        keys = await anyio.to_thread.run_sync(parse) if len(uris) > _INLINE_URIS else parse()
        if reader is None or not keys:
            return {}
        keys = {uri: key for uri, key in keys.items() if self._allowed(reader[0], key)}
        actor_id = reader[1]
        revisions = await self.kernel.page_revisions(actor_id, list(dict.fromkeys(keys.values())))
        check = self.still_allowed
        return {
            uri: Watch(
                actor_id,
                key,
                revisions[key],
                notify(uri),
                partial(check, reader[0], key) if check is not None else None,
            )
            for uri, key in keys.items()
            if key in revisions
        }

    # -- resources/list, resources/templates/list, resources/read -----------------------------

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        reader = self._reader(ctx)
        pages = await self.kernel.list_pages(PagesQuery(reader[1])) if reader else []
        if reader is not None and reader[0].workspaces is not None:
            pages = [page for page in pages if page.workspace_id in reader[0].workspaces]
        start = list_offset(params.cursor if params else None, len(pages))
        chunk = pages[start : start + LIST_PAGE_SIZE]
        more = start + LIST_PAGE_SIZE < len(pages)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=page_uri(PageKey(page.workspace_id, page.document_id)),
                    name=f"{page.workspace_id}/{page.document_id}",
                    title=page.title,
                    mime_type=MIME_TYPE,
                )
                for page in chunk
            ],
            next_cursor=str(start + LIST_PAGE_SIZE) if more else None,
        )

    async def list_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        templates = [
            types.ResourceTemplate(
                uri_template=PAGE_URI_TEMPLATE,
                name="page",
                title="mnote page",
                description=(
                    "A page as Markdown; every block ends with its <!-- id -->. A long page comes in"
                    " pieces, each ending with the next one's URI."
                ),
                mime_type=MIME_TYPE,
            )
        ]
        start = list_offset(params.cursor if params else None, len(templates))
        return types.ListResourceTemplatesResult(resource_templates=templates[start:])

    async def read(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """The page as one Markdown document, from the piece its URI names (`?cursor=`), whole. Over
        `--max-result-chars` it is cut to a piece (`fit_read`, which the answer budget runs), of
        whole top-level blocks, the kernel's own (`mnote.page.get`'s), or within one block larger
        than the budget; each piece ends with the URI of the next, so a host that shows a model only
        the read's text (Hermes's `read_resource`) loses nothing to its own cut."""
        uri = str(params.uri)
        page, cursor = split_cursor(uri)
        query = self._query(ctx, page_key(page), uri, cursor)
        with _answered(uri, page if cursor is not None else None):
            if is_piece_cursor(cursor):
                assert cursor is not None
                view: Piece = await read_piece(self.kernel, query, decode_cursor(query, cursor))
            else:
                view = dict(await self.kernel.get_page(query))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=MIME_TYPE, text=document(view, page))]
        )

    async def fit_read(self, ctx: Context, answer: Answer, limit: int) -> Answer:
        """A `resources/read` answer over `limit` characters, as the piece of it that fits (its wire
        form: the answer budget's, `mnote_mcp/surface/answers.py`)."""
        (content,) = answer["contents"]
        uri = content["uri"]
        page, _ = split_cursor(uri)

        def measure(view: Piece) -> int:
            return chars({**answer, "contents": [{**content, "text": document(view, page)}]})

        piece = await self.piece(ctx, uri, limit, measure)
        return {**answer, "contents": [{**content, "text": document(piece, page)}]}

    async def piece(self, ctx: Context, uri: str, limit: int, measure: Measure) -> Piece:
        """The longest piece of the page `uri` names, from its cursor, whose `measure` is at most
        `limit`: whole top-level blocks (the kernel's piece), or one larger block's Markdown in
        pieces (`tools/blockpieces.py`). What `resources/read` and a prompt's attached page answer."""
        page, cursor = split_cursor(uri)
        query = self._query(ctx, page_key(page), uri, cursor)
        with _answered(uri, page if cursor is not None else None):
            if is_piece_cursor(cursor):
                assert cursor is not None
                position = decode_cursor(query, cursor)
                within = await read_piece(self.kernel, query, position)
                return cut(within, position, query, limit=limit, measure=measure)[0]
            view = dict(await self.kernel.get_page(replace(query, max_blocks=1)))
            roots = await body_roots(self.kernel, query, view) if view.get("markdown") else []
            if not roots:
                return view
            frame = {**view, "markdown": ""}
            frame.pop("nextCursor", None)
            room = limit - measure(frame) - _NEXT_ROOM
            answer, size = await longest_piece(
                self.kernel,
                query,
                roots,
                room=room,
                limit=limit,
                root_size=markdown_chars,
                measure=lambda answer: measure(dict(answer)),
            )
            if size <= limit:
                return dict(answer)
            position = Position(cursor, answer["revision"], 0, 0)
            return cut(
                piece_at(dict(answer), position, query), position, query, limit=limit, measure=measure
            )[0]

    async def view(self, ctx: Context, key: PageKey | None, uri: str) -> PageView:
        """The page `key` as Markdown (its `get_page` view, whole), read as the caller: the same
        "unknown resource" (`uri`) for a page that is missing, not readable or outside the caller's
        workspaces. What a prompt attaches (`surface/prompts/handlers.py`)."""
        query = self._query(ctx, key, uri, None)
        with _answered(uri, None):
            return await self.kernel.get_page(query)

    def _query(self, ctx: Context, key: PageKey | None, uri: str, cursor: str | None) -> PageQuery:
        """The caller's read of the page `key` (from `cursor`), or "unknown resource" if it may not."""
        reader = self._reader(ctx)
        if key is None or reader is None or not self._allowed(reader[0], key):
            raise _unknown(uri)
        identity, actor_id = reader
        return PageQuery(
            workspace_id=key.workspace_id,
            document_id=key.document_id,
            actor_id=actor_id,
            correlation=correlate({}, ctx.meta, identity),
            include_body=False,
            include_options=False,
            format="markdown",
            cursor=cursor,
        )

    # -- 2025-11-25: resources/subscribe, resources/unsubscribe -------------------------------

    async def subscribe(self, ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """A watch that lasts as long as the connection (the session): it is released when the
        connection ends, however it ends (DELETE, idle timeout, a dropped SSE stream, stdio EOF).
        A connection with nowhere to send a notification (`--stateless`: every POST is a connection of
        its own) is refused: a subscription there could only be lost, or leak."""
        uri = str(params.uri)
        if not connection_of(ctx.session).has_standalone_channel:
            raise MCPError(
                types.INVALID_REQUEST,
                "resources/subscribe needs a session (this server is stateless): open a"
                " subscriptions/listen stream, or poll the page's revision",
            )
        session = ctx.session
        connection = _connection_id(ctx)
        subscribed = self._subscribed.get(connection, set())
        if uri not in subscribed and len(subscribed) >= self.max_subscriptions:
            raise MCPError(
                types.INVALID_REQUEST,
                f"this connection holds {self.max_subscriptions} subscriptions, the most it may"
                " (--max-subscriptions): unsubscribe from one first",
            )
        watches = await self._watches(ctx, [uri], lambda u: partial(session.send_resource_updated, u))
        if uri not in watches:
            raise _unknown(uri)
        watcher: PageWatcher = ctx.lifespan_context
        key = (connection, uri)
        if connection not in self._subscribed:
            self._subscribed[connection] = subscribed
            connection_of(ctx.session).exit_stack.callback(self._subscribed.pop, connection, None)
        if key not in watcher:
            connection_of(ctx.session).exit_stack.callback(watcher.remove, key)
        subscribed.add(uri)
        watcher.add(key, watches[uri])
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        watcher: PageWatcher = ctx.lifespan_context
        connection, uri = _connection_id(ctx), str(params.uri)
        watcher.remove((connection, uri))
        self._subscribed.get(connection, set()).discard(uri)
        return types.EmptyResult()

    # -- 2026-07-28: subscriptions/listen -----------------------------------------------------

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """One listen stream; it honours only the page URIs the caller may read (the ack says which)."""
        bus = InMemorySubscriptionBus()
        requested: list[str] = []  # the first `max_subscriptions` distinct URIs (the ack names them)
        for uri in dict.fromkeys(params.notifications.resource_subscriptions or []):
            if len(requested) == self.max_subscriptions:
                break
            requested.append(uri)
        watches = await self._watches(ctx, requested, lambda uri: partial(bus.publish, ResourceUpdated(uri)))
        honored = [uri for uri in dict.fromkeys(requested) if uri in watches]
        notifications = params.notifications.model_copy(update={"resource_subscriptions": honored or None})
        watcher: PageWatcher = ctx.lifespan_context
        tokens = {uri: object() for uri in honored}
        for uri, token in tokens.items():
            watcher.add(token, watches[uri])
        try:
            return await ListenHandler(bus)(ctx, params.model_copy(update={"notifications": notifications}))
        finally:
            for token in tokens.values():
                watcher.remove(token)


def _connection_id(ctx: Context) -> int:
    """The client connection a handshake-era subscription belongs to (and its later unsubscribe).

    The watch's `notify` holds the session, hence the connection, so the id cannot be reused while it
    is watched; the connection's exit stack removes the watch when the connection ends.
    """
    return id(connection_of(ctx.session))


@contextmanager
def _answered(uri: str, piece_of: str | None) -> Iterator[None]:
    """A kernel refusal as the resource protocol answers it: a page the caller may not read is the
    same unknown resource as a missing one; a stale piece's cursor (`piece_of`: the page it is a piece
    of) says to read the page again."""
    try:
        yield
    except MnoteError as error:
        if error.code in _HIDDEN:
            raise _unknown(uri) from None
        if error.code in (ErrorCode.CONFLICT, ErrorCode.INVALID_ARGUMENT) and piece_of is not None:
            raise MCPError(types.INVALID_PARAMS, f"{_STALE_PIECE}: read {piece_of} again") from None
        raise MCPError(types.INTERNAL_ERROR, f"{error.code.value}: cannot read {uri}") from None


def _unknown(uri: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"Unknown resource or not readable: {uri}")


def list_offset(cursor: str | None, total: int) -> int:
    """Where a page of a list starts: its cursor is the offset of its first entry."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or int(cursor) > total:
        raise MCPError(types.INVALID_PARAMS, "Invalid cursor")
    return int(cursor)


def split_cursor(uri: str) -> tuple[str, str | None]:
    """A page URI and the cursor of the piece it names (`?cursor=`), if any."""
    page, _, query = uri.partition("?")
    cursors = parse_qs(query).get("cursor") if query else None
    return page, cursors[0] if cursors else None


def document(view: Mapping[str, Any], page: str) -> str:
    """The page as one Markdown document: a front matter naming it (JSON is YAML), then the body; a
    piece within one block says where it is in the block's Markdown (`piece`), and a piece ends with
    where the next one is."""
    fields: dict[str, Any] = {
        "title": view["title"],
        "workspaceId": view["workspaceId"],
        "documentId": view["documentId"],
        "revision": view["revision"],
    }
    if "blockPiece" in view:
        fields["piece"] = view["blockPiece"]
    head = "\n".join(
        f"{name}: {json.dumps(value, ensure_ascii=False, separators=(', ', ': '))}"
        for name, value in fields.items()
    )
    text = f"---\n{head}\n---\n\n{view['markdown']}"
    cursor = view.get("nextCursor")
    if cursor:
        text += f"\n<!-- {_MORE}: {piece_uri(page, cursor)} -->\n"
    return text


def piece_uri(page: str, cursor: str) -> str:
    """The URI of the piece of the page `page` that `cursor` starts."""
    return f"{page}?{urlencode({'cursor': cursor})}"
