"""Prometheus metrics of one server process (prometheus_client), in a registry of its own.

Counted as they happen: tool calls by tool, outcome, error code and reason, with their latency; HTTP
requests and connections refused, by status and reason. Read when scraped (`sampled`): calls in
flight, sessions, listen streams, watches, readiness, and the store's pool and checkpoint figures
(`transports/storemetrics.py`, a collector of its own: one reading of the store per scrape). The
process's own (CPU, memory, file descriptors, garbage collection) come from prometheus_client's
collectors. Made only when `--metrics-listen` serves them: without it the dispatcher has no observer
and nothing is counted (docs/deploy.md, "Watching it run").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    make_asgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp

from mnote_mcp import __version__

logger = logging.getLogger("mnote_mcp")

# A tool call takes milliseconds (a read) to the call timeout (60 s by default).
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Every refusal reason the server gives (transports/observe.py, httpguard.py), shown at 0 from the
# start so that a rate over them is defined before the first one happens.
REFUSAL_REASONS: dict[str, int] = {
    "unauthorized": 401,
    "forbidden": 403,
    "unknown_session": 404,
    "body_timeout": 408,
    "header_timeout": 408,
    "evicted": 408,
    "body_too_large": 413,
    "headers_too_large": 400,
    "too_many_for_token": 429,
    "rate_limited": 429,
    "too_many": 503,
}
Kind = Literal["gauge", "counter"]

# `_created` series double every counter's lines and no dashboard needs them.
disable_created_metrics()  # type: ignore[no-untyped-call]


class _Sampled(Collector):
    """Values read when scraped, from functions of the running server's state."""

    def __init__(self) -> None:
        self.samples: list[tuple[str, str, Kind, Callable[[], Iterable[tuple[dict[str, str], float]]]]] = []

    def collect(self) -> Iterator[Metric]:
        for name, words, kind, read in self.samples:
            try:
                values = list(read())
            except Exception:  # a figure that cannot be read now is left out of this scrape
                logger.debug("metric %s could not be read", name, exc_info=True)
                continue
            labels = sorted({key for labelled, _ in values for key in labelled})
            family: GaugeMetricFamily | CounterMetricFamily
            if kind == "counter":
                family = CounterMetricFamily(name, words, labels=labels)
            else:
                family = GaugeMetricFamily(name, words, labels=labels)
            for labelled, value in values:
                family.add_metric([labelled.get(key, "") for key in labels], value)
            yield family


class Metrics:
    """One server's metrics; `asgi()` is the `/metrics` endpoint's app (text or OpenMetrics, gzip)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._calls = Counter(
            "mnote_tool_calls",
            "Tool calls answered, by tool, outcome (ok or error), error code and reason",
            ("tool", "outcome", "code", "reason"),
            registry=self.registry,
        )
        self._latency = Histogram(
            "mnote_tool_call_duration_seconds",
            "Time from a tool call's arrival to its answer, by tool",
            ("tool",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._refused = Counter(
            "mnote_http_refused",
            "HTTP requests and connections refused, by status and reason",
            ("status", "reason"),
            registry=self.registry,
        )
        for reason, status in REFUSAL_REASONS.items():
            self._refused.labels(str(status), reason)
        self._limited = Counter(
            "mnote_calls_limited",
            "Calls and requests refused over a per-actor limit (fair share), by class (read, write, search,"
            " heavy, completion; request: an HTTP request) and reason (rate, in_flight, busy)",
            ("class", "reason"),
            registry=self.registry,
        )

        Info("mnote_build", "The server's version", registry=self.registry).info({"version": __version__})
        self._sampled = _Sampled()
        self.registry.register(self._sampled)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def call_answered(self, tool: str, code: str | None, reason: str | None, seconds: float) -> None:
        """`dispatch.CallObserver`: one call answered."""
        outcome = "ok" if code is None else "error"
        self._calls.labels(tool, outcome, code or "", reason or "").inc()
        self._latency.labels(tool).observe(seconds)

    def call_limited(self, limit: str, reason: str) -> None:
        """`fairshare.LimitObserver`: one call (or HTTP request) refused over a limit."""
        self._limited.labels(limit, reason).inc()

    def limits(self, series: Iterable[tuple[str, str]]) -> None:
        """Every (class, reason) a call can be limited for, shown at 0 from the start."""
        for limit, reason in series:
            self._limited.labels(limit, reason)

    def refused(self, status: int, reason: str) -> None:
        """One request (or connection) refused with `status`, for `reason` (a word of REFUSAL_REASONS,
        or the status's own for another)."""
        self._refused.labels(str(status), reason).inc()

    def gauge(self, name: str, words: str, read: Callable[[], float]) -> None:
        """A gauge read when scraped."""
        self._sampled.samples.append((name, words, "gauge", lambda: [({}, read())]))

    def sampled(
        self, name: str, words: str, kind: Kind, read: Callable[[], Iterable[tuple[dict[str, str], float]]]
    ) -> None:
        """A family read when scraped: `read()` gives (labels, value) pairs."""
        self._sampled.samples.append((name, words, kind, read))

    def asgi(self) -> ASGIApp:
        """prometheus_client's app over this registry (the `/metrics` endpoint guards it)."""
        app: ASGIApp = make_asgi_app(self.registry)
        return app
