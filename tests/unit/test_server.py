"""What the per-call cuts of issue 14 rely on in the SDK, pinned so that an SDK upgrade fails here.

- The SDK's `Server` ships one OpenTelemetry middleware, first in `Server.middleware`; mnote's server
  runs it only while a tracer provider is configured (`server.SpansWhenTraced`), checked per message.
- The SDK's runner passes every result through `mcp_types.methods.serialize_server_result`; for a
  `tools/call` result mnote built, `server.serialize_result` keeps what that pass would keep without
  walking the envelope. Compared here with the SDK's own pass on every protocol version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import mcp_types.methods
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server import Server
from opentelemetry import trace

import mnote_mcp.server as mnote_server
from mnote_mcp.calls.fairshare import FairRequests
from mnote_mcp.server import SpansWhenTraced, serialize_result
from mnote_mcp.surface.delivery import RESULT_FORMS, Delivery
from mnote_mcp.vocabulary.envelope import Envelope
from tests.support.helpers import MODES, call, connect, make_app, page_args, write_args

pytestmark = pytest.mark.anyio


def test_the_sdk_server_ships_one_opentelemetry_middleware() -> None:
    layers = Server("probe").middleware
    assert [type(layer).__name__ for layer in layers] == ["OpenTelemetryMiddleware"]
    assert type(layers[0]).__module__ == "mcp.server._otel"


def test_mnote_wraps_it_and_keeps_any_other_layer(db: Path) -> None:
    server = make_app(db).server()
    # then the fair share of requests that are not tool calls, the SDK's requestState boundary
    # (elicitation.py), and the answer budget, innermost (answers.py)
    wrapped, fair, sealing, budget = server.middleware
    assert isinstance(wrapped, SpansWhenTraced)
    assert type(wrapped.spans).__name__ == "OpenTelemetryMiddleware"
    assert isinstance(fair, FairRequests)
    assert type(sealing).__name__ == "RequestStateBoundary"
    assert type(budget).__name__ == "WithinBudget"


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


VERSIONS = sorted(version for method, version in mcp_types.methods.SERVER_RESULTS if method == "tools/call")


def _sdk(version: str, data: dict[str, Any]) -> dict[str, Any]:
    return mnote_server._SDK_SERIALIZE("tools/call", version, dict(data))


def _same(envelope: dict[str, Any]) -> None:
    for form in RESULT_FORMS:
        for refusals in ("error", "result"):
            result = Delivery(refusals=refusals, form=form).call_result(cast(Envelope, envelope))
            for version in VERSIONS:
                fast, slow = (
                    serialize_result("tools/call", version, dict(result)),
                    _sdk(version, dict(result)),
                )
                assert fast == slow, (version, form)
                assert orjson.dumps(fast) == orjson.dumps(slow), "the same keys in the same order"


def test_the_sdk_knows_the_versions_and_runs_our_pass(db: Path) -> None:
    assert "2025-11-25" in VERSIONS and len(VERSIONS) >= 4
    make_app(db).server()
    assert mcp_types.methods.serialize_server_result is serialize_result
    runner = Path(mcp_types.methods.__file__).parent.parent / "mcp" / "server" / "runner.py"
    assert "_methods.serialize_server_result(method, version, dumped)" in runner.read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", MODES)
async def test_real_envelopes_come_out_as_the_sdk_makes_them(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelopes = [
            await call(client, "mnote.page.get", **page_args()),
            await call(client, "mnote.page.get", **page_args(format="markdown")),
            await call(
                client,
                "mnote.page.save",
                **write_args("k1", content=[{"type": "paragraph", "text": "é ✓ \u2028"}]),
            ),
            await call(client, "mnote.page.get", **page_args("doc_secret")),  # refused
            await call(client, "mnote.page.get", **page_args(cursor="bogus")),  # invalid
        ]
    assert [e["ok"] for e in envelopes] == [True, True, True, False, False]
    for envelope in envelopes:
        _same(envelope)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(result=_JSON, ok=st.booleans(), extra=st.dictionaries(st.text(max_size=6), _JSON, max_size=3))
def test_any_json_envelope_comes_out_as_the_sdk_makes_it(
    result: Any, ok: bool, extra: dict[str, Any]
) -> None:
    envelope = {**extra, "ok": ok, "result": result, "error": None if ok else {"code": "mnote_tool_conflict"}}
    _same(envelope)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_spares_the_envelope_the_sdk_pass(
    db: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    real = mnote_server._SDK_SERIALIZE

    def spy(method: str, version: str, data: Any, **options: Any) -> Any:
        if method == "tools/call" and not options:  # (with options: the client's own check)
            seen.append(data.get("structuredContent"))
        return real(method, version, data, **options)

    monkeypatch.setattr(mnote_server, "_SDK_SERIALIZE", spy)
    monkeypatch.setattr(mnote_server, "_SIEVES", {})
    async with connect(db, mode) as client:
        for _ in range(3):
            envelope = await call(client, "mnote.page.get", **page_args())
            assert envelope["ok"]
    assert seen == [{}], "the SDK saw one stand-in per shape, never an envelope"


def _quoted_as_before(text: str) -> bool:
    """The log line's rule as it was written first: a space, a quote or `=` anywhere quotes the value."""
    return not text or any(char.isspace() or char in '"=' for char in text)


@pytest.mark.slow
def test_every_whitespace_character_still_quotes_a_log_value() -> None:
    from mnote_mcp.base.logs import _value

    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        text = f"a{char}b"
        assert (_value(text) != text) is _quoted_as_before(text), hex(code)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(exclude_categories=["Cs"]), max_size=30))
def test_a_log_value_is_quoted_exactly_when_it_was(text: str) -> None:
    from mnote_mcp.base.logs import _value

    assert (_value(text) != text) is _quoted_as_before(text)
