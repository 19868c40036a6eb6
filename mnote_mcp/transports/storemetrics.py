"""The store's figures as Prometheus metrics (`mnote_store_*`, docs/deploy.md "Watching it run"):
one `StoreFigures` reading per scrape, from the kernel when it has a store of its own (`Measured`: the
embedded kernel on SQLite or PostgreSQL, traced or not); a relay has none and exports none of them.
Nothing is counted per call for them: the dialect keeps the counts anyway (kernel/store/figures.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mnote_mcp.base.telemetry.metrics import Metrics
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.kernel.store.figures import Measured, StoreFigures

logger = logging.getLogger("mnote_mcp")


def store_metrics(metrics: Metrics, kernel: Kernel) -> None:
    """Serve `kernel`'s store figures with `metrics`, if it has a store."""
    if isinstance(kernel, Measured):
        metrics.registry.register(StoreCollector(kernel))


class StoreCollector(Collector):
    """The families of one reading (a figure the database has no meaning for is left out)."""

    def __init__(self, store: Measured) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        try:
            figures = self.store.store_figures()
        except Exception:  # a store closing: no store figures in this scrape
            logger.debug("store figures could not be read", exc_info=True)
            return
        yield from _pool(figures)
        yield from _postgres(figures)
        yield from _sqlite(figures)


def _gauge(name: str, words: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, words, value=value)


def _counter(name: str, words: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, words, value=value)


def _pool(figures: StoreFigures) -> Iterator[Metric]:
    yield _gauge("mnote_store_pool_size", "Connections the store's pool may open", figures.pool_size)
    connections = GaugeMetricFamily(
        "mnote_store_pool_connections", "The pool's open connections, idle or in use", labels=["state"]
    )
    connections.add_metric(["idle"], figures.pool_idle)
    connections.add_metric(["in_use"], figures.pool_in_use)
    yield connections
    yield _gauge(
        "mnote_store_pool_waiting", "Transactions waiting for a pooled connection", figures.pool_waiting
    )
    yield _counter(
        "mnote_store_pool_timeouts", "Waits for a pooled connection that ran out", figures.pool_timeouts
    )


def _postgres(figures: StoreFigures) -> Iterator[Metric]:
    if figures.connection_errors is not None:
        yield _counter(
            "mnote_store_connection_errors", "Connections the pool failed to open", figures.connection_errors
        )
    if figures.connections_lost is not None:
        yield _counter(
            "mnote_store_connections_lost", "Pooled connections found dead", figures.connections_lost
        )
    if figures.unreachable is not None:
        yield _gauge(
            "mnote_store_unreachable",
            "1 while the database cannot be reached (calls answer store_unreachable), else 0",
            float(figures.unreachable),
        )


def _sqlite(figures: StoreFigures) -> Iterator[Metric]:
    if figures.checkpoints is not None and figures.catch_ups is not None:
        checkpoints = CounterMetricFamily(
            "mnote_store_checkpoints",
            "Checkpoints of the write-ahead log, by the checkpointer thread or a write catching up",
            labels=["by"],
        )
        checkpoints.add_metric(["checkpointer"], figures.checkpoints)
        checkpoints.add_metric(["writer"], figures.catch_ups)
        yield checkpoints
    if figures.checkpoint_frames is not None:
        yield _gauge(
            "mnote_store_checkpoint_frames",
            "Log frames the checkpointer's last checkpoint found copied",
            figures.checkpoint_frames,
        )
    if figures.checkpoint_seconds is not None:
        yield _gauge(
            "mnote_store_checkpoint_seconds",
            "How long the checkpointer's last checkpoint took",
            figures.checkpoint_seconds,
        )
    if figures.wal_bytes is not None:
        yield _gauge("mnote_store_wal_bytes", "The write-ahead log file's size", figures.wal_bytes)
