"""The runtime protocol v1 itself: trace context and key headers as the runtime receives them, the
service token, what the runtime refuses, the mnote-cli protocol's edges, `--kernel` selection, and
that docs/runtime-protocol.md states what the code does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mnote_mcp.app import build_registry, open_kernel
from mnote_mcp.base.tracecontext import trace_id_of, traceparent, w3c_trace_id
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.databases.stores import open_kernel as open_seeded
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Command, Correlation, PageQuery, PagesQuery
from mnote_mcp.kernel.protocol import CLI_REQUEST, ERROR, OPERATIONS, STATUS_OF, decode_key, encode_key
from mnote_mcp.kernel.relays.cli import CliKernel, parse_command_line
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.settings import DEFAULT_RUNTIME_MAX_BODY_BYTES
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import Locale
from tests.support.helpers import FIXTURE, ROOT, page_args
from tests.support.runtimes import RuntimeProcess, mnote_command, note_command, reference_runtime
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
HEX_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def note(trace: str, key: str) -> Command:
    return note_command(key, trace=trace)


def test_the_protocol_schemas_are_valid_json_schemas() -> None:
    forms = [form for op in OPERATIONS.values() for form in (op.request, op.answer)]
    assert len(forms) == 18
    for form in (*forms, ERROR, CLI_REQUEST):
        Draft202012Validator.check_schema(form.schema)


def test_the_schemas_checked_are_the_ones_derived_from_the_declarations() -> None:
    """kernel/schemas.py is generated (python -m mnote_mcp.tools.docs): a declaration changed since is
    a schema the runtime and the relays would not check."""
    forms = [form for op in OPERATIONS.values() for form in (op.request, op.answer)]
    for form in (*forms, ERROR, CLI_REQUEST):
        assert form.schema == form.derived_schema, f"{form.name}: run python -m mnote_mcp.tools.docs"


# -- trace context and the idempotency header --------------------------------------------------


def test_a_w3c_trace_id_is_kept_and_anything_else_is_hashed() -> None:
    assert w3c_trace_id(HEX_TRACE) == HEX_TRACE
    assert w3c_trace_id(HEX_TRACE.upper()) == HEX_TRACE
    assert w3c_trace_id("trace_1") == hashlib.sha256(b"trace_1").hexdigest()[:32]
    assert w3c_trace_id("0" * 32) != "0" * 32, "the all-zero trace id is invalid in W3C"
    parent = traceparent("trace_1")
    assert trace_id_of(parent) == w3c_trace_id("trace_1")
    version, trace, span, flags = parent.split("-")
    assert (version, len(trace), len(span), flags) == ("00", 32, 16, "01")
    assert traceparent("trace_1") != parent, "a new parent span per request"
    assert trace_id_of("00-" + "0" * 32 + "-" + "1" * 16 + "-01") is None
    assert trace_id_of("garbage") is None and trace_id_of(None) is None


@given(st.text(min_size=1))
def test_idempotency_keys_survive_the_header(key: str) -> None:
    header = encode_key(key)
    assert header.isascii() and header.isprintable() and " " not in header
    assert decode_key(header) == key


def test_ordinary_keys_are_sent_verbatim() -> None:
    for key in ("idem_123", "demo-save.1", "a:b/c?d=e", "550e8400-e29b-41d4-a716-446655440000"):
        assert encode_key(key) == key


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimeProcess]:
    root = tmp_path_factory.mktemp("protocol")
    db = root / "runtime.db"
    kernel = open_seeded(db, seed=FIXTURE)
    kernel.store.close()
    with reference_runtime(db, root, token="s3cret-token") as process:
        yield process


@pytest.mark.slow
async def test_the_runtime_receives_the_envelope_trace_and_key(runtime: RuntimeProcess) -> None:
    kernel = HttpKernel(runtime.url, token="s3cret-token")
    cases = [(HEX_TRACE, "k_hex"), ("trace_plain", "k_plain"), ("trace_key", "幂等 键")]
    try:
        for trace, key in cases:
            await kernel.execute(note(trace, key))
        await kernel.get_page(
            PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", HEX_TRACE))
        )
    finally:
        await kernel.aclose()
    received = [r for r in runtime.records() if r["path"] == "/v1/commands"]
    mine = [r for r in received if decode_key(r["idempotencyKey"]) in {key for _, key in cases}]
    assert [decode_key(r["idempotencyKey"]) for r in mine] == [key for _, key in cases]
    assert [trace_id_of(r["traceparent"]) for r in mine] == [
        HEX_TRACE,
        w3c_trace_id("trace_plain"),
        w3c_trace_id("trace_key"),
    ]
    assert mine[2]["idempotencyKey"] == "%E5%B9%82%E7%AD%89%20%E9%94%AE"
    assert all(r["authorization"] for r in mine)
    query = [r for r in runtime.records() if r["path"] == "/v1/pages/query"][-1]
    assert trace_id_of(query["traceparent"]) == HEX_TRACE and query["idempotencyKey"] is None


@pytest.mark.parametrize("token", [None, "wrong-token", ""])
async def test_the_service_token_is_required(runtime: RuntimeProcess, token: str | None) -> None:
    kernel = HttpKernel(runtime.url, token=token)
    try:
        with pytest.raises(MnoteError) as caught:
            await kernel.list_pages(PagesQuery("user_editor"))
    finally:
        await kernel.aclose()
    assert caught.value.code is ErrorCode.RUNTIME_UNAVAILABLE
    assert caught.value.details == {"adapter": "http", "cause": "service_token", "attempts": 1, "status": 401}
    assert not caught.value.retryable, "issue 11 item 12: a refused token is a configuration error"


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
async def test_a_refused_service_token_tells_the_agent_not_to_retry(
    runtime: RuntimeProcess, locale: Locale
) -> None:
    """Issue 11 item 12: not `retryable`, and the words say it is the server's configuration."""
    kernel = HttpKernel(runtime.url, token="wrong-token")
    dispatcher = Dispatcher(build_registry(ServerConfig()), kernel, locale=locale)
    try:
        envelope = await dispatcher.call("mnote.page.get", page_args(), None, Identity("user_editor"))
    finally:
        await kernel.aclose()
    error = envelope["error"]
    assert error is not None and error["code"] == "mnote_tool_runtime_unavailable"
    assert error["retryable"] is False
    words = {"en": ("configuration", "MNOTE_RUNTIME_TOKEN"), "zh-CN": ("配置", "MNOTE_RUNTIME_TOKEN")}[locale]
    assert words[0] in error["message"] and words[1] in error.get("hint", "")
    assert "retry later" not in error["message"] and "稍后" not in error["message"]


def test_health_is_public_and_says_which_protocol(runtime: RuntimeProcess) -> None:
    health = httpx2.get(f"{runtime.url}/v1/health", trust_env=False)
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "protocol": "mnote-runtime/v1", "version": "0.1.0"}
    refused = httpx2.get(f"{runtime.url}/v1/pages", params={"actorId": "user_editor"}, trust_env=False)
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    assert refused.json()["error"]["reason"] == "service_token"


def _post(runtime: RuntimeProcess, body: Any, **headers: str) -> httpx2.Response:
    return httpx2.post(
        f"{runtime.url}/v1/commands",
        content=body if isinstance(body, bytes) else json.dumps(body).encode(),
        headers={"Authorization": "Bearer s3cret-token", **headers},
        trust_env=False,
    )


@pytest.mark.parametrize(
    ("body", "headers", "pointer"),
    [
        (note("t", "k_a").to_wire(), {}, ""),
        (note("t", "k_a").to_wire(), {"Idempotency-Key": "k_b"}, "/idempotencyKey"),
        (b"{not json", {"Idempotency-Key": "k_a"}, ""),
        ({**note("t", "k_a").to_wire(), "dryRun": "no"}, {"Idempotency-Key": "k_a"}, "/dryRun"),
        ({**note("t", "k_a").to_wire(), "correlation": {}}, {"Idempotency-Key": "k_a"}, "/correlation"),
    ],
    ids=["no-key-header", "key-mismatch", "not-json", "bad-type", "no-correlation"],
)
def test_the_runtime_refuses_envelopes_that_break_the_protocol(
    runtime: RuntimeProcess, body: Any, headers: dict[str, str], pointer: str
) -> None:
    response = _post(runtime, body, **headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["reason"], error["details"]["pointer"]) == (
        "mnote_tool_invalid_argument",
        "envelope",
        pointer,
    )


def test_refusals_carry_their_status_and_body(runtime: RuntimeProcess) -> None:
    stale = {**note("t", "k_stale").to_wire(), "baseRevision": 99}
    response = _post(runtime, stale, **{"Idempotency-Key": "k_stale"})
    assert response.status_code == STATUS_OF[ErrorCode.CONFLICT] == 409
    assert response.json() == {
        "error": {
            "code": "mnote_tool_conflict",
            "reason": "revision",
            "details": {"currentRevision": 1, "baseRevision": 99},
        }
    }


@pytest.mark.slow
def test_the_runtime_will_not_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = subprocess.run(
        mnote_command("runtime", "serve", "--db", str(tmp_path / "x.db"), "--host", "0.0.0.0", "--port", "0"),
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "MNOTE_RUNTIME_TOKEN"},
    )
    assert result.returncode == 2 and "needs a service token" in result.stderr
    assert not (tmp_path / "x.db").exists(), "refused before any store is opened"


# -- the mnote-cli JSON protocol ----------------------------------------------------------------


def run_cli_adapter(db: Path, request: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        mnote_command("runtime", "cli", "--db", str(db), "--no-demo"),
        input=request,
        capture_output=True,
        timeout=patience(60),
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("request_body", "pointer"),
    [
        (b"not json", ""),
        (b'{"op": "drop_tables"}', "/op"),
        (b'{"version": 2, "op": "list_pages", "actorId": "u"}', "/version"),
        (b'{"op": "execute", "command": {"command": "page.body.save"}}', "/command"),
        (b'{"op": "get_page"}', "/query"),
        (b'{"op": "list_pages"}', "/actorId"),
    ],
)
def test_the_cli_adapter_answers_a_broken_request_with_a_refusal(
    db: Path, request_body: bytes, pointer: str
) -> None:
    result = run_cli_adapter(db, request_body)
    assert result.returncode == 0, "a reply is not a transport failure"
    reply = json.loads(result.stdout)
    assert reply["ok"] is False
    assert (reply["error"]["code"], reply["error"]["details"]["pointer"]) == (
        "mnote_tool_invalid_argument",
        pointer,
    )


def test_the_cli_adapter_answers_one_request_with_one_line(db: Path) -> None:
    result = run_cli_adapter(
        db, json.dumps({"version": 1, "op": "list_pages", "actorId": "user_editor"}).encode()
    )
    assert result.returncode == 0
    assert result.stdout.count(b"\n") == 1
    assert json.loads(result.stdout) == {
        "ok": True,
        "value": [{"workspaceId": "ws_1", "documentId": "doc_1", "title": "Project plan", "revision": 1}],
    }


def test_the_cli_adapter_exits_non_zero_when_it_cannot_answer(tmp_path: Path) -> None:
    not_a_db = tmp_path / "garbage.db"
    not_a_db.write_bytes(b"this is not an SQLite file" * 100)
    result = run_cli_adapter(not_a_db, b'{"op": "list_pages", "actorId": "u"}')
    assert result.returncode != 0 and result.stdout == b""
    assert result.stderr


LIST_PAGES = json.dumps({"version": 1, "op": "list_pages", "actorId": "user_editor"}).encode()


def run_cli_adapter_with(
    db: Path, request: bytes, *args: str, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*mnote_command("runtime", "cli", "--db", str(db), "--no-demo"), *args],
        input=request,
        capture_output=True,
        timeout=patience(60),
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("MNOTE_")}, **env},
    )


def refused_over(result: subprocess.CompletedProcess[bytes], limit: int) -> None:
    """The reply to a request over the limit: a refusal (exit 0), invalid_argument naming the limit."""
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["ok"] is False, reply
    error = reply["error"]
    assert (error["code"], error["reason"], error["details"]["pointer"]) == (
        "mnote_tool_invalid_argument",
        "envelope",
        "",
    )
    assert f"over {limit} bytes" in error["details"]["reason"], error
    assert "--max-body-bytes" in error["details"]["reason"], error


@pytest.mark.parametrize("source", ["flag", "env"])
def test_the_cli_adapter_reads_at_most_max_body_bytes_from_stdin(tmp_path: Path, source: str) -> None:
    """One byte over --max-body-bytes (or MNOTE_RUNTIME_MAX_BODY_BYTES, as on `runtime serve`) is
    refused before the store is opened (a new one is not even created); at the limit it is answered."""
    db = tmp_path / "new.db"

    def run(limit: int) -> subprocess.CompletedProcess[bytes]:
        if source == "flag":
            return run_cli_adapter_with(db, LIST_PAGES, "--max-body-bytes", str(limit))
        return run_cli_adapter_with(db, LIST_PAGES, MNOTE_RUNTIME_MAX_BODY_BYTES=str(limit))

    refused_over(run(len(LIST_PAGES) - 1), len(LIST_PAGES) - 1)
    assert not db.exists(), "nothing was opened, nor created"
    answered = run(len(LIST_PAGES))
    assert answered.returncode == 0 and json.loads(answered.stdout) == {"ok": True, "value": []}


@pytest.mark.slow
def test_the_cli_adapter_reads_at_most_32_mib_by_default(tmp_path: Path) -> None:
    """The default is `runtime serve`'s body limit (32 MiB: a whole page of content, JSON-escaped)."""
    db = tmp_path / "new.db"
    limit = DEFAULT_RUNTIME_MAX_BODY_BYTES
    assert limit == 32 * 1024 * 1024
    padded = LIST_PAGES + b" " * (limit - len(LIST_PAGES))
    refused_over(run_cli_adapter_with(db, padded + b" "), limit)
    assert not db.exists()
    answered = run_cli_adapter_with(db, padded)
    assert answered.returncode == 0 and json.loads(answered.stdout) == {"ok": True, "value": []}


# -- selecting an adapter ----------------------------------------------------------------------


async def test_kernel_specs_select_the_adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # no runtime-token of this machine's
    base = ServerConfig(db=tmp_path / "x.db", demo=False)
    http, description = open_kernel(replace(base, kernel="http://127.0.0.1:9", runtime_timeout=2.5))
    assert isinstance(http, HttpKernel) and description == "http://127.0.0.1:9 (no token)"
    cli, description = open_kernel(replace(base, kernel="cli:'/opt/my tools/mnote-cli' --json --db \"a b\""))
    assert isinstance(cli, CliKernel) and cli.argv == ["/opt/my tools/mnote-cli", "--json", "--db", "a b"]
    assert not (tmp_path / "x.db").exists(), "a relay never opens a local store"
    local, description = open_kernel(replace(base, kernel="local"))
    assert isinstance(local, StoreKernel) and description == f"sqlite:{tmp_path / 'x.db'}"
    for kernel in (http, cli, local):
        await kernel.aclose()


async def test_a_path_prefix_in_the_runtime_url_is_kept() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(200, json={"pages": []})

    kernel = HttpKernel("https://gateway.example/mnote/", transport=httpx2.MockTransport(handler))
    try:
        assert await kernel.list_pages(PagesQuery("user_1")) == []
    finally:
        await kernel.aclose()
    assert seen == ["/mnote/v1/pages"]


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ("grpc://runtime:1", "unknown kernel"),
        ("cli:", "needs the adapter's executable"),
        ("http://", "expected http://HOST:PORT"),
        ("http://[::1", "--kernel"),
    ],
)
def test_bad_kernel_specs_are_usage_errors(tmp_path: Path, kernel: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_kernel(ServerConfig(db=tmp_path / "x.db", kernel=kernel))


def test_seeding_belongs_to_the_runtime(tmp_path: Path) -> None:
    config = ServerConfig(db=tmp_path / "x.db", kernel="http://127.0.0.1:9", seed=FIXTURE)
    with pytest.raises(ValueError, match="seed the runtime instead"):
        open_kernel(config)
    assert not (tmp_path / "x.db").exists()


def test_parse_command_line_quotes_like_a_shell_without_one() -> None:
    assert parse_command_line("mnote-cli --db '$HOME/x' ; rm -rf /") == [
        "mnote-cli",
        "--db",
        "$HOME/x",
        ";",
        "rm",
        "-rf",
        "/",
    ]


# -- the documentation states the protocol the code speaks ---------------------------------------


def test_the_protocol_page_lists_every_route_and_status() -> None:
    page = (ROOT / "docs" / "runtime-protocol.md").read_text(encoding="utf-8")
    for op in OPERATIONS.values():
        assert f"{op.method} {op.path}" in page, op.name
        assert f'"op": "{op.name}"' in page, op.name
    assert "GET /v1/health" in page
    for code, status in STATUS_OF.items():
        assert f"| `{code.value}` | {status} |" in page, code
    for header in (
        "Idempotency-Key",
        "traceparent",
        "Authorization: Bearer",
        "MNOTE_TEST_CRASH_AFTER_COMMIT",
    ):
        assert header in page
