"""What the HTTP app holds now, for `/healthz` (unauthenticated, always answered) and for the gauges
of `--metrics-listen`: sessions, listen streams, resource watches, calls in flight, readiness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse

from mnote_mcp import __version__
from mnote_mcp.calls.dispatch import InFlight
from mnote_mcp.calls.fairshare import FairShare
from mnote_mcp.surface.resources.pages import PageResources
from mnote_mcp.transports.limits import SessionCaps
from mnote_mcp.transports.observe import Readiness

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from mnote_mcp.base.telemetry.metrics import Metrics


@dataclass(frozen=True)
class Health:
    """The figures `/healthz` and the gauges report, read when asked."""

    caps: SessionCaps
    listens: SessionCaps
    pages: PageResources
    inflight: InFlight
    readiness: Readiness
    fair: FairShare

    async def healthz(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "server": "mnote-mcp",
                "version": __version__,
                "sessions": sum(self.caps.counts().values()),
                "listenStreams": sum(self.listens.counts().values()),
                "watches": self.pages.watch_count(),
                "callsInFlight": self.inflight.count,
            }
        )

    def gauges(self, metrics: Metrics) -> None:
        """What the app holds now, read when scraped."""
        inflight, caps, listens, readiness = self.inflight, self.caps, self.listens, self.readiness
        metrics.gauge("mnote_tool_calls_in_flight", "Tool calls being answered", lambda: inflight.count)
        metrics.gauge(
            "mnote_http_sessions",
            "Open sessions (stateful streamable HTTP and legacy SSE)",
            lambda: sum(caps.counts().values()),
        )
        metrics.gauge(
            "mnote_http_listen_streams",
            "Open subscriptions/listen streams (2026-07-28 protocol)",
            lambda: sum(listens.counts().values()),
        )
        metrics.gauge("mnote_resource_watches", "Pages watched for subscribers", self.pages.watch_count)
        metrics.gauge(
            "mnote_ready",
            "1 when the last readiness check found the store answering (see /readyz), else 0",
            lambda: 0.0 if readiness.reason else 1.0,
        )
        metrics.gauge(
            "mnote_ready_check_seconds",
            "How long the last readiness round trip took",
            lambda: readiness.check_seconds,
        )
        admission_gauges(metrics, self.fair)


def admission_gauges(metrics: Metrics, fair: FairShare) -> None:
    """The expensive calls holding a place and waiting (`mnote_mcp/calls/admission.py`), read when scraped."""
    admission = fair.admission
    if admission is None:
        return

    def states() -> list[tuple[dict[str, str], float]]:
        running, waiting = admission.counts()
        return [({"state": "running"}, running), ({"state": "waiting"}, waiting)]

    metrics.sampled(
        "mnote_admitted_calls",
        "Expensive calls (searches, listings, history, completions) at the admission, running or waiting",
        "gauge",
        states,
    )
