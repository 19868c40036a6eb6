"""What the per-call cuts of issue 14 rely on in the SDK, pinned so that an SDK upgrade fails here.

- The SDK's `Server` ships one OpenTelemetry middleware, first in `Server.middleware`; mnote's server
  runs it only while a tracer provider is configured (`server.SpansWhenTraced`), checked per message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server import Server
from opentelemetry import trace

from mnote_mcp.server import SpansWhenTraced
from tests.helpers import MODES, call, connect, make_app, page_args

pytestmark = pytest.mark.anyio


def test_the_sdk_server_ships_one_opentelemetry_middleware() -> None:
    layers = Server("probe").middleware
    assert [type(layer).__name__ for layer in layers] == ["OpenTelemetryMiddleware"]
    assert type(layers[0]).__module__ == "mcp.server._otel"


def test_mnote_wraps_it_and_keeps_any_other_layer(db: Path) -> None:
    server = make_app(db).server()
    assert len(server.middleware) == 1
    wrapped = server.middleware[0]
    assert isinstance(wrapped, SpansWhenTraced)
    assert type(wrapped.spans).__name__ == "OpenTelemetryMiddleware"


class _Counting:
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        self.methods.append(ctx.method)
        return await call_next(ctx)


class _Provider(trace.NoOpTracerProvider):
    """Stands for a configured provider (the OpenTelemetry SDK's, say): anything but the proxy."""


@pytest.mark.parametrize("mode", MODES)
async def test_spans_run_only_while_a_tracer_provider_is_configured(
    db: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = _Counting()
    monkeypatch.setattr(SpansWhenTraced, "__init__", lambda self, spans: setattr(self, "spans", counting))
    assert type(trace.get_tracer_provider()) is trace.ProxyTracerProvider, "no provider in the tests"
    async with connect(db, mode) as client:
        first = await call(client, "mnote.page.get", **page_args())
        assert counting.methods == [], "no provider: the SDK's span middleware is skipped"
        monkeypatch.setattr(trace, "get_tracer_provider", lambda: _Provider())
        second = await call(client, "mnote.page.get", **page_args())
        assert "tools/call" in counting.methods, "a provider set up while serving gets its spans"
    assert first["result"] == second["result"]
