"""Scraping a `Metrics` registry through its `/metrics` endpoint, as Prometheus would."""

from __future__ import annotations

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from mnote_mcp.base.telemetry.metrics import Metrics
from mnote_mcp.transports.observe import metrics_app

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape's text, by name and sorted labels (prometheus_client's own parser)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(metrics: Metrics) -> Samples:
    """One scrape of `metrics`' endpoint (in process, no token)."""
    app = metrics_app(metrics.asgi(), None)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as http:
        answer = await http.get("/metrics")
    assert answer.status_code == 200, answer.text
    return samples(answer.text)
