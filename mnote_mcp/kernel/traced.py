"""The kernel port with an OpenTelemetry span per call: `kernel execute page.block.insert`, `kernel
get_page`, ... as children of the tool call's span, whichever adapter answers (the embedded kernel on
SQLite or PostgreSQL, or a relay: its span covers the hop to the runtime, which is sent the trace as a
`traceparent` header; the runtime process makes no spans of its own).

Wrapped only while tracing is on (`app.open_kernel`, the runtime): without a tracer provider the port
is the adapter itself, with nothing in between. Anything else of the adapter (the page-change feed,
the store's figures) is passed through.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from mnote_mcp.base.telemetry.tracing import TRACER
from mnote_mcp.kernel import port
from mnote_mcp.kernel.errors import RETRYABLE_CODES, ErrorCode, MnoteError
from mnote_mcp.kernel.scopes import Scope


@contextmanager
def kernel_span(operation: str, **attributes: AttributeValue) -> Iterator[Span]:
    """One port call's span; a refusal is recorded (`error.type`, the reason) and raised on; an
    ERROR status only for the store's or runtime's own failures."""
    shown = {f"mnote.{key}": value for key, value in attributes.items() if value is not None}
    with TRACER.start_as_current_span(
        f"kernel {operation}",
        kind=SpanKind.INTERNAL,
        attributes=shown,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except MnoteError as error:
            span.set_attribute("error.type", error.code.value)
            span.set_attribute("mnote.error.reason", error.reason.value)
            if error.code in RETRYABLE_CODES or error.code is ErrorCode.INTERNAL:
                span.set_status(StatusCode.ERROR, f"{error.code.value}: {error.reason.value}")
            raise
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise


def _ids(correlation: port.Correlation) -> dict[str, str]:
    return {"trace_id": correlation.trace_id, "tool_call_id": correlation.tool_call_id}


def _on_page(call: port.PageQuery | port.HistoryQuery | port.Command | port.Refusal) -> dict[str, str]:
    """What every span of a call on one page carries, named alike whichever call it is."""
    return {"workspace_id": call.workspace_id, "document_id": call.document_id, **_ids(call.correlation)}


class TracedKernel:
    """`inner` with a span around each port call."""

    def __init__(self, inner: port.Kernel) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the optional parts of an adapter (PageChangeFeed, ...)

    async def get_page(self, query: port.PageQuery) -> port.PageView:
        with kernel_span("get_page", format=query.format, **_on_page(query)) as span:
            view = await self.inner.get_page(query)
            span.set_attribute("mnote.revision", view["revision"])
            return view

    async def execute(self, command: port.Command) -> port.CommandOutcome:
        with kernel_span(
            f"execute {command.name}",
            command=command.name,
            dry_run=command.dry_run,
            base_revision=command.base_revision,
            **_on_page(command),
        ) as span:
            outcome = await self.inner.execute(command)
            span.set_attribute("mnote.revision", outcome.revision)
            span.set_attribute("mnote.changed", outcome.changed)
            span.set_attribute("mnote.replayed", outcome.replayed)
            if outcome.command_id:
                span.set_attribute("mnote.command_id", outcome.command_id)
            return outcome

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        with kernel_span("authorize", workspace_id=workspace_id, document_id=document_id, scope=scope.value):
            await self.inner.authorize(actor_id, workspace_id, document_id, scope)

    async def list_pages(self, query: port.PagesQuery) -> list[port.PageRef]:
        with kernel_span("list_pages"):
            return await self.inner.list_pages(query)

    async def page_revisions(self, actor_id: str, pages: Sequence[port.PageKey]) -> dict[port.PageKey, int]:
        with kernel_span("page_revisions", pages=len(pages)):
            return await self.inner.page_revisions(actor_id, pages)

    async def page_history(self, query: port.HistoryQuery) -> port.HistoryView:
        with kernel_span("page_history", **_on_page(query)):
            return await self.inner.page_history(query)

    async def search_pages(self, query: port.SearchQuery) -> port.SearchResult:
        with kernel_span("search_pages", workspace_id=query.workspace_id, **_ids(query.correlation)):
            return await self.inner.search_pages(query)

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[port.AuditRecord]:
        with kernel_span("audit_trail"):
            return await self.inner.audit_trail(trace_id=trace_id, command_id=command_id, limit=limit)

    async def record_refusal(self, refusal: port.Refusal) -> port.AuditRecord:
        with kernel_span(
            f"record_refusal {refusal.name}",
            command=refusal.name,
            outcome=refusal.outcome.value,
            **_on_page(refusal),
        ) as span:
            record = await self.inner.record_refusal(refusal)
            span.set_attribute("mnote.command_id", record["commandId"])
            return record

    async def aclose(self) -> None:
        await self.inner.aclose()


def traced(kernel: port.Kernel) -> port.Kernel:
    """`kernel` with spans, or as it is when already traced."""
    return kernel if isinstance(kernel, TracedKernel) else TracedKernel(kernel)
