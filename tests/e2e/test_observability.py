"""What an operator watches a real server with (issue 23): `/metrics` on its own listener, scraped as
Prometheus would, counting tool calls and every refusal (a refused call increments its counter);
`/readyz` and `/healthz` without a token; log lines with millisecond UTC timestamps for refusals (401,
unknown session, 429) and the shutdown, never a token; a metrics listener off loopback only with a
token; traces exported over OTLP/HTTP to a collector (a receiver in the test decoding the protobuf)."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.helpers import RAW_INITIALIZE, call, page_args
from tests.support.http_helpers import (
    http_server,
    mcp_http,
    raw_connection,
    read_until_closed,
    start_failure,
    wait_until,
    write_tokens,
)
from tests.support.metrics import samples
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOKENS: dict[str, dict[str, Any]] = {"tok-a": {"actorId": "user_editor"}}
_METRICS_URL = re.compile(r"metrics on (http://\S+)")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


def metrics_url(log: str) -> str:
    match = _METRICS_URL.search(log)
    assert match, log
    return match.group(1)


def scrape(url: str, token: str | None = None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels (parsed by prometheus_client's own parser)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx2.get(url, headers=headers, timeout=patience(10))
    assert answer.status_code == 200, answer.text
    return samples(answer.text)


def refused(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], status: int, reason: str) -> float:
    return samples[("mnote_http_refused_total", (("reason", reason), ("status", str(status))))]


async def test_metrics_count_calls_and_refusals_and_the_log_says_so(db: Path, tokens: Path) -> None:
    args = ("--auth-file", str(tokens), "--metrics-listen", "127.0.0.1:0", "--max-sessions-per-token", "1")
    with http_server(db, *args, "--header-timeout", "1") as server:
        assert wait_until(lambda: "metrics on" in server.log)
        url = metrics_url(server.log)
        before = scrape(url)
        assert refused(before, 401, "unauthorized") == 0
        assert before[("mnote_store_pool_size", ())] > 0  # the store's figures are served too
        assert ("mnote_store_checkpoints_total", (("by", "checkpointer"),)) in before

        # A refused call increments its counter: a wrong token (401), an unknown session (404).
        wrong = httpx2.post(
            f"{server.url}/mcp",
            json=RAW_INITIALIZE,
            headers={**JSON_HEADERS, "Authorization": "Bearer tok-x"},
        )
        assert wrong.status_code == 401
        gone = httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**JSON_HEADERS, "Authorization": "Bearer tok-a", "Mcp-Session-Id": "no-such-session"},
        )
        assert gone.status_code == 404
        # A connection that never sends its request's headers (408 after --header-timeout).
        silent = raw_connection(server.url, b"")
        read_until_closed(silent)
        async with mcp_http(server.url, "tok-a") as client:
            ok = await call(client, "mnote.page.get", **page_args())
            missing = await call(client, "mnote.page.get", **page_args("doc_missing"))
            during = scrape(url)
            # One session per token: a second one is 429.
            second = httpx2.post(
                f"{server.url}/mcp",
                json=RAW_INITIALIZE,
                headers={**JSON_HEADERS, "Authorization": "Bearer tok-a"},
            )
            assert second.status_code == 429
        after = scrape(url)
        assert ok["ok"] and missing["error"]["code"] == "mnote_tool_not_found"

        assert refused(after, 401, "unauthorized") == 1
        assert refused(after, 404, "unknown_session") == 1
        assert refused(after, 408, "header_timeout") == 1
        assert refused(after, 429, "too_many_for_token") == 1
        calls = "mnote_tool_calls_total"
        ok_labels = (("code", ""), ("outcome", "ok"), ("reason", ""), ("tool", "mnote.page.get"))
        error_labels = (
            ("code", "mnote_tool_not_found"),
            ("outcome", "error"),
            ("reason", "page"),
            ("tool", "mnote.page.get"),
        )
        assert after[(calls, ok_labels)] == 1
        assert after[(calls, error_labels)] == 1
        latency = ("mnote_tool_call_duration_seconds_count", (("tool", "mnote.page.get"),))
        assert after[latency] == 2
        assert during[("mnote_http_sessions", ())] == 1
        assert after[("mnote_tool_calls_in_flight", ())] == 0
        assert ("process_open_fds", ()) in after

        assert httpx2.get(f"{server.url}/readyz").json() == {"status": "ready"}
        assert httpx2.get(f"{server.url}/healthz").status_code == 200
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=patience(30))
    log = server.log
    assert "refused 401 unauthorized: POST /mcp from 127.0.0.1: unknown bearer token" in log
    assert "refused 404 unknown_session: POST /mcp from 127.0.0.1" in log
    assert "refused 429 too_many_for_token: POST /mcp from 127.0.0.1" in log
    assert "refused 408 header_timeout" in log
    assert "shutting down on SIGTERM" in log and log.rstrip().endswith("stopped")
    assert "tok-a" not in log and "tok-x" not in log
    lines = [line for line in log.splitlines() if line and not line.startswith(" ")]
    assert all(_TIMESTAMP.match(line) for line in lines), lines


def test_a_metrics_listener_off_loopback_needs_a_token(db: Path, tokens: Path, tmp_path: Path) -> None:
    refused_start = start_failure(db, "--auth-file", str(tokens), "--metrics-listen", "0.0.0.0:0")
    assert refused_start.returncode == 2
    assert "--metrics-token-file" in refused_start.stderr
    token_file = tmp_path / "metrics-token"
    token_file.write_text("scrape-secret\n")
    token_file.chmod(0o600)
    args = (
        "--auth-file",
        str(tokens),
        "--metrics-listen",
        "0.0.0.0:0",
        "--metrics-token-file",
        str(token_file),
    )
    with http_server(db, *args) as server:
        assert wait_until(lambda: "metrics on" in server.log)
        url = metrics_url(server.log).replace("0.0.0.0", "127.0.0.1")
        assert httpx2.get(url, timeout=patience(10)).status_code == 401
        assert ("mnote_build_info", (("version", "0.1.0"),)) in scrape(url, "scrape-secret")
    assert "scrape-secret" not in server.log


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    """A collector's OTLP/HTTP traces endpoint: every export request, decoded."""
    received: list[ExportTraceServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()


async def test_traces_are_exported_over_otlp(db: Path, tokens: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        with http_server(db, "--auth-file", str(tokens), "--otlp-endpoint", endpoint) as server:
            async with mcp_http(server.url, "tok-a") as client:
                envelope = await call(client, "mnote.page.get", **page_args())
        # stopped: the batch was flushed on the way out
        spans = [
            span
            for request in received
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        services = {
            attribute.value.string_value
            for request in received
            for resource in request.resource_spans
            for attribute in resource.resource.attributes
            if attribute.key == "service.name"
        }
    assert services == {"mnote-mcp"}
    by_name = {span.name: span for span in spans}
    tool, read = by_name["execute_tool mnote.page.get"], by_name["kernel get_page"]
    attributes = {attribute.key: attribute.value.string_value for attribute in tool.attributes}
    assert attributes["mnote.trace_id"] == envelope["traceId"] == "trace_t"
    assert tool.trace_id == read.trace_id and read.parent_span_id == tool.span_id
    assert "tools/call mnote.page.get" in by_name  # the SDK's span of the request
