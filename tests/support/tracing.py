"""OpenTelemetry spans recorded in memory, for the tests that look at traces.

OpenTelemetry's API sets its global tracer provider once per process, and every tracer handed out
before (the SDK's, mnote's) keeps the provider it first found. So one provider is made for the whole
test process and installed only while a test records (`recorded_spans`): outside, the process has no
provider (`tracing_on()` is false, as in a server without `--otlp-endpoint`), and a tracer a proxy
kept makes no span at all. (Setting the global directly is what OpenTelemetry's own
test utilities do, `opentelemetry.test.globals_test.reset_trace_globals`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _WhileRecording(trace.Tracer):
    """A tracer of the test provider while a test records, a no-op tracer otherwise: a tracer handed
    out while recording (and kept by a proxy) makes no span, not even an unrecorded one, afterwards
    (a span would still be propagated: the SDK's client would send it as `traceparent`)."""

    def __init__(self, real: trace.Tracer) -> None:
        self.real = real
        self.off = trace.NoOpTracer()

    def _now(self) -> trace.Tracer:
        return self.real if _RECORDING[0] else self.off

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._now().start_span(*args, **kwargs)

    @contextmanager  # (OpenTelemetry's ProxyTracer overrides it the same way)
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:  # type: ignore[override]
        with self._now().start_as_current_span(*args, **kwargs) as span:
            yield span


class _Provider(trace.TracerProvider):
    def __init__(self) -> None:
        self.sdk = TracerProvider()
        self.sdk.add_span_processor(SimpleSpanProcessor(_EXPORTER))

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _WhileRecording(self.sdk.get_tracer(*args, **kwargs))


_RECORDING = [False]
_EXPORTER = InMemorySpanExporter()
_PROVIDER = _Provider()


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every finished span kept by the exporter yielded; off again afterwards."""
    assert trace._TRACER_PROVIDER is None, "a tracer provider is set up already in this process"
    _EXPORTER.clear()
    _RECORDING[0] = True
    trace._TRACER_PROVIDER = _PROVIDER
    try:
        yield _EXPORTER
    finally:
        trace._TRACER_PROVIDER = None
        _RECORDING[0] = False


def trace_hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, f"{name}: {[span.name for span in spans]}"
    return found[0]
