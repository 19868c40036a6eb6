"""Pages as MCP resources: listed and read only as the actor may, never leaking a forbidden page; and
a subscriber told when a page's revision changes, whoever wrote it: the same connection, another
connection, or another server process on the same store; in both protocol eras."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError

from mnote_mcp.kernel.markdown import parse_markdown
from mnote_mcp.kernel.port import PageKey
from mnote_mcp.surface.resources import pages as resource_pages
from mnote_mcp.surface.resources.uris import page_key, page_uri
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import MODES, SECRETS, call, connect, page_args, stdio_params, write_args
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
DOC_1 = page_uri(PageKey("ws_1", "doc_1"))
SECRET = page_uri(PageKey("ws_1", "doc_secret"))
OTHER = page_uri(PageKey("ws_other", "doc_other"))
MISSING = page_uri(PageKey("ws_1", "doc_missing"))
TIMEOUT = patience(10)


class Updates:
    """Collects `notifications/resources/updated` a legacy-era client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self._arrived.set()

    async def wait(self) -> list[str]:
        with anyio.fail_after(TIMEOUT):
            await self._arrived.wait()
        self._arrived = anyio.Event()
        return self.uris


async def _uris(db: Path, mode: str, **config: Any) -> dict[str, str | None]:
    async with connect(db, mode, **config) as client:
        listing = await client.list_resources()
    assert all(resource.mime_type == "text/markdown" for resource in listing.resources)
    return {resource.uri: resource.title for resource in listing.resources}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"actor": "user_editor"}, {DOC_1}),
        ({"actor": "user_viewer"}, {DOC_1}),
        ({"actor": "user_owner"}, {DOC_1, SECRET}),
        ({"actor": "user_stranger"}, {OTHER}),
        ({"actor": "nobody"}, set()),
        ({"actor": None}, set()),
        ({"actor": "user_owner", "scopes": frozenset({Scope.ARTIFACT_WRITE})}, set()),
        ({"actor": "user_owner", "read_only": True}, {DOC_1, SECRET}),
    ],
)
async def test_resources_list_only_what_the_actor_may_read(
    db: Path, mode: str, config: dict[str, Any], expected: set[str]
) -> None:
    listed = await _uris(db, mode, **config)
    assert set(listed) == expected
    titles = {SECRET: SECRETS[0], OTHER: SECRETS[2]}
    assert not any(title in json.dumps(listed) for uri, title in titles.items() if uri not in expected)


@pytest.mark.parametrize("mode", MODES)
async def test_a_long_resource_list_comes_in_pages(
    db: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource_pages, "LIST_PAGE_SIZE", 1)
    seen: list[str] = []
    async with connect(db, mode, actor="user_owner") as client:
        cursor: str | None = None
        while True:
            listing = await client.list_resources(cursor=cursor)
            seen.extend(resource.uri for resource in listing.resources)
            cursor = listing.next_cursor
            if cursor is None:
                break
        with pytest.raises(MCPError, match="Invalid cursor"):
            await client.list_resources(cursor="nonsense")
    assert seen == [DOC_1, SECRET]


async def test_the_page_template_is_advertised(db: Path) -> None:
    async with connect(db) as client:
        templates = await client.list_resource_templates()
        capabilities = client.server_capabilities
    (template,) = templates.resource_templates
    assert template.uri_template == "mnote://workspaces/{workspaceId}/pages/{documentId}"
    assert template.mime_type == "text/markdown"
    assert capabilities.resources is not None and capabilities.resources.subscribe is True


@pytest.mark.parametrize("mode", MODES)
async def test_a_page_reads_as_markdown_with_block_ids(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        page = await call(client, "mnote.page.get", **page_args())
        read = await client.read_resource(DOC_1)
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == DOC_1 and content.mime_type == "text/markdown"
    front, body = content.text.split("\n---\n\n", 1)
    assert front.splitlines() == [
        "---",
        'title: "Project plan"',
        'workspaceId: "ws_1"',
        'documentId: "doc_1"',
        f"revision: {page['result']['revision']}",
    ]
    assert parse_markdown(body) == page["result"]["blocks"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("uri", [SECRET, OTHER, MISSING, "mnote://workspaces/ws_1", "https://example.com/"])
async def test_unreadable_resources_are_all_the_same_unknown(db: Path, mode: str, uri: str) -> None:
    async with connect(db, mode, actor="user_editor") as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
    assert str(caught.value) == f"Unknown resource or not readable: {uri}"
    assert caught.value.error.code == types.INVALID_PARAMS
    assert not any(secret in str(caught.value.error) for secret in SECRETS)


async def test_legacy_subscribers_hear_of_writes_from_their_own_and_other_connections(db: Path) -> None:
    updates = Updates()
    async with (
        connect(db, "legacy", message_handler=updates, watch_interval=0.1) as subscriber,
        connect(db, "legacy") as writer,
    ):
        await subscriber.subscribe_resource(DOC_1)
        await call(
            writer, "mnote.block.update", **write_args("k1", blockId="p_1", text="by another connection")
        )
        assert await updates.wait() == [DOC_1]
        await call(subscriber, "mnote.page.update_title", **write_args("k2", title="by the subscriber"))
        assert await updates.wait() == [DOC_1, DOC_1]
        await subscriber.unsubscribe_resource(DOC_1)
        await call(writer, "mnote.block.delete", **write_args("k3", blockIds=["p_2"]))
        await anyio.sleep(0.5)
    assert updates.uris == [DOC_1, DOC_1], "no update after unsubscribing"


async def test_a_write_through_the_same_server_is_announced_without_waiting_for_a_poll(db: Path) -> None:
    updates = Updates()
    async with connect(db, "legacy", message_handler=updates, watch_interval=3600) as client:
        await client.subscribe_resource(DOC_1)
        await call(client, "mnote.block.insert", **write_args("k", blocks=[{"type": "quote", "text": "q"}]))
        assert await updates.wait() == [DOC_1]


async def test_a_dry_run_or_a_read_announces_nothing(db: Path) -> None:
    updates = Updates()
    async with connect(db, "legacy", message_handler=updates, watch_interval=0.05) as client:
        await client.subscribe_resource(DOC_1)
        await call(client, "mnote.block.update", **write_args("k", dry_run=True, blockId="p_1", text="x"))
        await call(client, "mnote.page.get", **page_args())
        await anyio.sleep(0.5)
    assert updates.uris == []


@pytest.mark.parametrize("uri", [SECRET, OTHER, MISSING])
async def test_a_legacy_subscription_to_an_unreadable_page_is_refused(db: Path, uri: str) -> None:
    async with connect(db, "legacy", actor="user_editor") as client:
        with pytest.raises(MCPError, match="Unknown resource or not readable"):
            await client.subscribe_resource(uri)


async def test_a_listen_stream_carries_updates_for_readable_pages_only(db: Path) -> None:
    async with (
        connect(db, "auto", watch_interval=0.1) as subscriber,
        connect(db, "auto") as writer,
        subscriber.listen(resource_subscriptions=[DOC_1, SECRET, MISSING]) as stream,
    ):
        assert stream.honored.resource_subscriptions == [DOC_1], "the ack names what will be delivered"
        await call(writer, "mnote.block.update", **write_args("k", blockId="p_1", text="changed"))
        with anyio.fail_after(TIMEOUT):
            event = await anext(stream)
    assert event.uri == DOC_1  # type: ignore[union-attr]


async def _writer_process(db: Path, write: Callable[[Client], Any]) -> None:
    async with Client(
        stdio_params(db, "--actor", "user_editor"), read_timeout_seconds=patience(30)
    ) as client:
        await write(client)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
async def test_a_write_from_another_process_reaches_the_subscriber(db: Path, mode: str) -> None:
    async def write(client: Client) -> None:
        envelope = await call(
            client, "mnote.block.update", **write_args("k_proc", blockId="p_1", text="remote")
        )
        assert envelope["ok"], envelope["error"]

    if mode == "legacy":
        updates = Updates()
        async with connect(db, mode, message_handler=updates, watch_interval=0.1) as subscriber:
            await subscriber.subscribe_resource(DOC_1)
            await _writer_process(db, write)
            assert await updates.wait() == [DOC_1]
    else:
        async with (
            connect(db, mode, watch_interval=0.1) as subscriber,
            subscriber.listen(resource_subscriptions=[DOC_1]) as stream,
        ):
            await _writer_process(db, write)
            with anyio.fail_after(TIMEOUT):
                event = await anext(stream)
            assert event.uri == DOC_1  # type: ignore[union-attr]


async def test_a_failing_poll_is_survived_and_retried(db: Path) -> None:
    from mnote_mcp.kernel.sqlite.opening import open_kernel
    from mnote_mcp.surface.resources.watch import PageWatcher, Watch

    kernel = open_kernel(db)
    calls: list[str] = []
    heard = anyio.Event()
    real = kernel.page_revisions

    async def flaky(actor_id: str, pages: Any) -> Any:
        calls.append(actor_id)
        if len(calls) == 1:
            raise RuntimeError("disk on fire")
        return await real(actor_id, pages)

    async def notify() -> None:
        heard.set()

    kernel.page_revisions = flaky  # type: ignore[method-assign]
    watcher = PageWatcher(kernel, interval=0.05)
    watcher.add("t", Watch("user_editor", PageKey("ws_1", "doc_1"), revision=0, notify=notify))
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watcher.run)
            with anyio.fail_after(TIMEOUT):
                await heard.wait()
            group.cancel_scope.cancel()
    finally:
        await kernel.aclose()
    assert len(calls) >= 2, "the loop kept polling after the failure"


async def test_a_write_of_this_process_outside_the_tools_wakes_the_watcher_at_once(db: Path) -> None:
    """The kernel's change feed (on SQLite: this process's writes, told after COMMIT) wakes the watcher,
    not only the server's nudge after its own tool calls: a write made on the same kernel by anything
    else in the process (here the kernel port itself) is announced at once, not at the next poll."""
    from mnote_mcp.kernel.port import Command, Correlation
    from tests.support.helpers import make_app

    updates = Updates()
    app = make_app(db, watch_interval=3600)
    try:
        async with Client(app.server(), mode="legacy", message_handler=updates) as client:
            await client.subscribe_resource(DOC_1)
            update = {"blockId": "p_1", "text": "written beside the tools"}
            await app.kernel.execute(
                Command(
                    "page.block.update",
                    "ws_1",
                    "doc_1",
                    "user_editor",
                    Correlation("s", "r", "c", "t"),
                    "k1",
                    False,
                    update,
                )
            )
            assert await updates.wait() == [DOC_1]
    finally:
        await app.kernel.aclose()


async def test_subscriptions_of_one_connection_are_bounded(db: Path) -> None:
    """Issue 30's sweep: each subscription is a watch polled while it lasts (`--max-subscriptions`)."""
    async with connect(db, "legacy", actor="user_owner", max_subscriptions=1) as client:
        await client.subscribe_resource(DOC_1)
        await client.subscribe_resource(DOC_1)  # the same page again is the same subscription
        with pytest.raises(MCPError, match="--max-subscriptions"):
            await client.subscribe_resource(SECRET)
        await client.unsubscribe_resource(DOC_1)
        await client.subscribe_resource(SECRET)


async def test_a_listen_stream_honours_at_most_max_subscriptions(db: Path) -> None:
    too_long = page_uri(PageKey("ws_1", "x" * 5_000))
    async with (
        connect(db, "auto", actor="user_owner", max_subscriptions=2) as client,
        client.listen(resource_subscriptions=[too_long, DOC_1, DOC_1, SECRET, MISSING]) as stream,
    ):
        assert stream.honored.resource_subscriptions == [DOC_1], "the first two distinct, if readable"


def test_a_uri_longer_than_any_page_uri_names_no_page() -> None:
    assert page_key(page_uri(PageKey("ws_1", "x" * 5_000))) is None
    assert page_key(DOC_1) == PageKey("ws_1", "doc_1")
