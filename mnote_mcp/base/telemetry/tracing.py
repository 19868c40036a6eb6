"""OpenTelemetry traces: a span per tool call and per kernel port call (a relay's is its hop to the
runtime), in the trace the call's envelope `traceId` names.

Tracing is on while a tracer provider is set up in this process: `--otlp-endpoint` sets one up that
exports over OTLP/HTTP (`setup_tracing`, the `[otel]` extra), or a host process did before
(`opentelemetry-instrument`). Off, nothing here runs: callers ask `tracing_on()` (one type check) and
the kernel is not wrapped (`mnote_mcp.kernel.traced`).

Joining the envelope's ids to W3C trace context: a call's `traceId` is its W3C trace id when it is one
(32 hex digits: from a `traceparent` in `_meta`, or generated), else the stable hash of
`tracecontext.w3c_trace_id` (the relays send the same to a runtime). A generated `traceId` is the
trace id of the span the SDK opened for the request, so the envelope, the log line and the trace
agree without the client sending anything; a `traceId` the client chose puts the tool call's span in
that trace, under a remote parent, linked to the SDK's span of the request.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, StatusCode, TraceFlags

from mnote_mcp import __version__
from mnote_mcp.base.tracecontext import w3c_trace_id

logger = logging.getLogger("mnote_mcp")
TRACER = trace.get_tracer("mnote_mcp", __version__)
OTEL_EXTRA = "pip install -e '.[otel]' (from the checkout)"


class TracingSetupError(ValueError):
    """`--otlp-endpoint` cannot be served: the one line to print (the extra missing), exit 2."""


def tracing_on() -> bool:
    """A tracer provider is set up (without one, every span would be a no-op that still costs)."""
    return type(trace.get_tracer_provider()) is not trace.ProxyTracerProvider


def setup_tracing(endpoint: str) -> Callable[[], None]:
    """Export every span over OTLP/HTTP to `endpoint` (a collector's `/v1/traces` URL), in batches on a
    thread of the SDK's. The exporter's own `OTEL_EXPORTER_OTLP_*` variables (headers, timeout,
    certificate) apply; `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` name the service
    (`mnote-mcp` otherwise). Returns the function that flushes and stops it (on shutdown). A provider
    set up already (a host's) is kept: spans go where it sends them."""
    if tracing_on():
        logger.info("tracing: a tracer provider is set up already; --otlp-endpoint left to it")
        return lambda: None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingSetupError(f"--otlp-endpoint needs the OpenTelemetry SDK: {OTEL_EXTRA}") from None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = Resource.create({"service.name": "mnote-mcp", "service.version": __version__})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    logger.info("tracing: spans exported over OTLP/HTTP to %s", endpoint)
    stopped = threading.Event()

    def stop() -> None:
        if not stopped.is_set():
            stopped.set()
            provider.shutdown()

    return stop


def current_trace_id() -> str | None:
    """The W3C trace id of the current span (32 hex digits), if there is one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def new_trace_id() -> str:
    """A trace id for a call that names none: the current span's (the SDK's span of the request), so
    the envelope's `traceId` is the trace's id; else a random one."""
    return current_trace_id() or secrets.token_hex(16)


def _joined(trace_id: str) -> tuple[Context | None, list[Link]]:
    """Where a span of the call whose envelope says `trace_id` starts: in the current context when it
    is that trace already, else under a remote parent in that trace, linked to the current span."""
    wanted = int(w3c_trace_id(trace_id), 16)
    current = trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == wanted:
        return None, []
    flags = current.trace_flags if current.is_valid else TraceFlags(TraceFlags.SAMPLED)
    parent = SpanContext(wanted, int(secrets.token_hex(8), 16) or 1, is_remote=True, trace_flags=flags)
    links = [Link(current)] if current.is_valid else []
    return trace.set_span_in_context(NonRecordingSpan(parent)), links


@contextmanager
def call_span(tool: str, ids: Mapping[str, object], start_ns: int, actor: str | None) -> Iterator[Span]:
    """The span of one tool call (OpenTelemetry's `execute_tool` of generative AI), in the trace its
    envelope's `traceId` names, carrying the envelope's correlation ids (`ids`: `sessionId`, `runId`,
    `toolCallId`, `traceId`); started at `start_ns` (the call's arrival: its ids are known only once
    its arguments are read)."""
    trace_id = str(ids["traceId"])
    context, links = _joined(trace_id)
    attributes: dict[str, str] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": str(ids["toolCallId"]),
        "mnote.trace_id": trace_id,
        "mnote.session_id": str(ids["sessionId"]),
        "mnote.run_id": str(ids["runId"]),
    }
    if actor:
        attributes["mnote.actor_id"] = actor
    with TRACER.start_as_current_span(
        f"execute_tool {tool}",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        links=links,
        start_time=start_ns,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def record_outcome(
    span: Span,
    *,
    workspace_id: str | None,
    document_id: str | None,
    command_id: str | None,
    code: str | None = None,
    reason: str | None = None,
    server_fault: bool = False,
) -> None:
    """What the call answered, on its span: the page, the command, and for a failure its code and
    reason; an ERROR status only for a failure of the server's (`server_fault`: the runtime or store
    unavailable, an internal error), not for a refusal, which is the call's answer."""
    for name, value in (
        ("mnote.workspace_id", workspace_id),
        ("mnote.document_id", document_id),
        ("mnote.command_id", command_id),
        ("error.type", code),
        ("mnote.error.reason", reason),
    ):
        if value:
            span.set_attribute(name, value)
    if server_fault:
        span.set_status(StatusCode.ERROR, f"{code}: {reason}")


def span_ids(span: Span, trace_id: str) -> dict[str, str]:
    """The span's ids for the call's log line: `spanId`, and `w3cTraceId` where the envelope's
    `traceId` is not the trace's id itself (a client's own `trace_1`)."""
    context = span.get_span_context()
    if not context.is_valid:
        return {}
    ids = {"spanId": format(context.span_id, "016x")}
    w3c = format(context.trace_id, "032x")
    if w3c != trace_id:
        ids["w3cTraceId"] = w3c
    return ids


def env_endpoint() -> str | None:
    """`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`: the
    collector the standard variables name, for a deployment that sets those instead of the flag."""
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return base.rstrip("/") + "/v1/traces" if base else None
