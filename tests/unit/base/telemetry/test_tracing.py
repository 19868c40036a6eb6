"""A tool call's trace (issue 23): the SDK's span of the request, the tool call's span and one span per
kernel port call, all in the trace the envelope's `traceId` names, recorded with OpenTelemetry's
in-memory exporter; the call's log line carries the span's id; without a tracer provider nothing is
wrapped and no span is made."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.shared.jsonrpc_dispatcher
import pytest
from mcp import Client
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, use_span

from mnote_mcp.app import open_app
from mnote_mcp.base.telemetry.tracing import TracingSetupError, env_endpoint, setup_tracing, tracing_on
from mnote_mcp.base.tracecontext import w3c_trace_id
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.traced import TracedKernel
from tests.support.helpers import call, page_args, write_args
from tests.support.tracing import by_name, recorded_spans, trace_hex

pytestmark = pytest.mark.anyio

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@asynccontextmanager
async def client_of(db: Path) -> AsyncIterator[Client]:
    """The server as `serve` wires it (open_app), over the SDK's in-memory transport."""
    config = ServerConfig(db=db, locale="en", demo=False, actor="user_editor")
    async with open_app(config) as app, Client(app.server(), mode="legacy") as client:
        yield client


def untraced(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments without a `traceId`: the server finds or generates one."""
    return {key: value for key, value in arguments.items() if key != "traceId"}


async def test_a_generated_trace_id_is_the_trace_of_the_call_and_its_kernel_spans(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends no trace context (the test's SDK client would: it runs in this traced
    process) gets the trace id of the SDK's span of its request as its envelope's `traceId`."""
    monkeypatch.setattr(mcp.shared.jsonrpc_dispatcher, "inject_trace_context", lambda meta: None)
    with recorded_spans() as exporter:
        async with client_of(db) as client:
            envelope = await call(client, "mnote.page.update_title", **untraced(write_args("k1", title="T")))
        spans = exporter.get_finished_spans()
    assert envelope["ok"], envelope
    request = by_name(spans, "tools/call mnote.page.update_title")  # the SDK's
    tool = by_name(spans, "execute_tool mnote.page.update_title")
    # A rename asks first where someone else writes the page (issue 25): its dry run is a span too.
    planned, command = (span for span in spans if span.name == "kernel execute page.head.updateTitle")
    assert planned.attributes is not None and "mnote.command_id" not in planned.attributes
    assert request.kind is SpanKind.SERVER
    assert trace_hex(request) == trace_hex(tool) == trace_hex(command) == envelope["traceId"]
    assert tool.parent is not None and request.context is not None
    assert tool.parent.span_id == request.context.span_id
    assert command.parent is not None and tool.context is not None
    assert command.parent.span_id == tool.context.span_id
    assert tool.attributes is not None and command.attributes is not None
    assert tool.attributes["mnote.trace_id"] == envelope["traceId"]
    assert tool.attributes["gen_ai.tool.call.id"] == "call_t"
    assert tool.attributes["mnote.command_id"] == envelope["audit"]["commandId"]
    assert command.attributes["mnote.command_id"] == envelope["audit"]["commandId"]
    assert command.attributes["mnote.document_id"] == "doc_1"
    assert command.attributes["mnote.revision"] == envelope["result"]["revision"]


async def test_a_traceparent_in_meta_puts_the_call_in_the_callers_trace(db: Path) -> None:
    """A traced client sends its span as `traceparent` in `_meta` (the SDK's client does, from the
    caller's current span, here one of trace PARENT_TRACE)."""
    caller = SpanContext(int(PARENT_TRACE, 16), 0x00F067AA0BA902B7, is_remote=True, trace_flags=TraceFlags(1))
    with recorded_spans() as exporter:
        async with client_of(db) as client:
            with use_span(NonRecordingSpan(caller)):
                envelope = await call(client, "mnote.page.get", **untraced(page_args()))
        spans = exporter.get_finished_spans()
    assert envelope["traceId"] == PARENT_TRACE
    sent = by_name(spans, "MCP send tools/call mnote.page.get")  # the client's, carried in _meta
    request = by_name(spans, "tools/call mnote.page.get")
    tool = by_name(spans, "execute_tool mnote.page.get")
    read = by_name(spans, "kernel get_page")
    assert {trace_hex(span) for span in (sent, request, tool, read)} == {PARENT_TRACE}
    assert sent.parent is not None and sent.parent.span_id == 0x00F067AA0BA902B7
    assert tool.parent is not None and request.context is not None
    assert tool.parent.span_id == request.context.span_id
    assert not tool.links


async def test_a_trace_id_of_the_callers_own_names_the_trace_and_links_the_request(db: Path) -> None:
    with recorded_spans() as exporter:
        async with client_of(db) as client:
            envelope = await call(client, "mnote.page.get", **page_args())  # traceId "trace_t"
        spans = exporter.get_finished_spans()
    assert envelope["traceId"] == "trace_t"
    tool = by_name(spans, "execute_tool mnote.page.get")
    request = by_name(spans, "tools/call mnote.page.get")
    assert trace_hex(tool) == trace_hex(by_name(spans, "kernel get_page")) == w3c_trace_id("trace_t")
    assert request.context is not None
    assert [link.context.span_id for link in tool.links] == [request.context.span_id]


async def test_a_refusal_is_recorded_on_the_spans_and_only_a_server_failure_is_an_error(db: Path) -> None:
    with recorded_spans() as exporter:
        async with client_of(db) as client:
            envelope = await call(client, "mnote.page.get", **page_args("doc_missing"))
        spans = exporter.get_finished_spans()
    assert envelope["error"]["code"] == "mnote_tool_not_found"
    tool = by_name(spans, "execute_tool mnote.page.get")
    read = by_name(spans, "kernel get_page")
    for span in (tool, read):
        assert span.attributes is not None
        assert span.attributes["error.type"] == "mnote_tool_not_found"
        assert span.status.status_code is StatusCode.UNSET  # the caller's answer, not a fault


async def test_the_calls_log_line_carries_the_span(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mnote_mcp.calls")
    with recorded_spans() as exporter:
        async with client_of(db) as client:
            await call(client, "mnote.page.get", **page_args())
        tool = by_name(exporter.get_finished_spans(), "execute_tool mnote.page.get")
    [record] = [r for r in caplog.records if r.name == "mnote_mcp.calls"]
    fields = record.fields  # type: ignore[attr-defined]
    assert tool.context is not None
    assert fields["traceId"] == "trace_t"
    assert fields["spanId"] == format(tool.context.span_id, "016x")
    assert fields["w3cTraceId"] == w3c_trace_id("trace_t")


async def test_without_a_tracer_provider_nothing_is_wrapped_or_recorded(db: Path) -> None:
    config = ServerConfig(db=db, locale="en", demo=False, actor="user_editor")
    async with open_app(config) as app:
        assert not isinstance(app.kernel, TracedKernel)
        assert not isinstance(app.dispatcher.kernel, TracedKernel)
        async with Client(app.server(), mode="legacy") as client:
            envelope = await call(client, "mnote.page.get", **page_args())
    assert envelope["ok"]


def test_an_otlp_endpoint_without_the_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(TracingSetupError, match=r"pip install -e '\.\[otel\]'"):
        setup_tracing("http://127.0.0.1:4318/v1/traces")
    assert not tracing_on()


def test_the_standard_variables_name_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert env_endpoint() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert env_endpoint() == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/custom")
    assert env_endpoint() == "http://traces:4318/custom"
