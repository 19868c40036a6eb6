"""How results reach the host: refusals with or without `isError`, and the three result forms,
through the real MCP client in both protocol eras."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import TextContent

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import PageView
from mnote_mcp.surface.delivery import CALLER_REFUSALS
from mnote_mcp.tools.cost import CallLimit
from tests.support.helpers import MODES, connect, page_args, write_args

pytestmark = pytest.mark.anyio

Refusal = Callable[[Client], Awaitable[Any]]


def _text(result: Any) -> str:
    """The one text block of a result."""
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


async def _conflict(client: Client) -> Any:
    block = [{"type": "divider"}]
    return await client.call_tool("mnote.page.save", write_args("stale", content=block, baseRevision=0))


async def _idempotency_conflict(client: Client) -> Any:
    await client.call_tool("mnote.page.update_title", write_args("same-key", title="One"))
    return await client.call_tool("mnote.page.update_title", write_args("same-key", title="Two"))


async def _rate_limited(client: Client) -> Any:
    await client.call_tool("mnote.page.search", {"query": "plan"})
    return await client.call_tool("mnote.page.search", {"query": "plan"})


# One real call per refusal the call itself causes (actor user_editor unless the case says otherwise).
REFUSALS: dict[ErrorCode, tuple[dict[str, Any], Refusal]] = {
    ErrorCode.UNAUTHENTICATED: (
        {"actor": None},
        lambda client: client.call_tool("mnote.page.get", page_args()),
    ),
    ErrorCode.PERMISSION_DENIED: (
        {},
        lambda client: client.call_tool("mnote.page.get", page_args("doc_other", "ws_other")),
    ),
    ErrorCode.NOT_FOUND: ({}, lambda client: client.call_tool("mnote.page.get", page_args("doc_missing"))),
    ErrorCode.INVALID_ARGUMENT: (
        {},
        lambda client: client.call_tool("mnote.page.get", page_args(maxBlocks=0)),
    ),
    ErrorCode.CONFLICT: ({}, _conflict),
    ErrorCode.IDEMPOTENCY_CONFLICT: ({}, _idempotency_conflict),
    ErrorCode.OPTION_NOT_WIRED: (
        {},
        lambda client: client.call_tool(
            "mnote.page.update_options", write_args("wired", options={"protectEditing": True})
        ),
    ),
    # over the caller's own rate (issue 32): one search a minute, the second refused
    ErrorCode.RATE_LIMITED: ({"search_limit": CallLimit(1, 1), "call_limits": True}, _rate_limited),
}


def test_every_refusal_the_call_causes_has_a_case() -> None:
    assert set(REFUSALS) == set(CALLER_REFUSALS)
    assert set(ErrorCode) - set(CALLER_REFUSALS) == {ErrorCode.RUNTIME_UNAVAILABLE, ErrorCode.INTERNAL}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("code", list(REFUSALS), ids=lambda code: code.value)
@pytest.mark.parametrize("refusals", ["error", "result"])
async def test_refusals_are_results_only_when_asked(
    db: Path, mode: str, code: ErrorCode, refusals: str
) -> None:
    config, make_call = REFUSALS[code]
    async with connect(db, mode, refusals=refusals, **config) as client:
        result = await make_call(client)
    envelope = result.structured_content
    assert envelope["ok"] is False and envelope["error"]["code"] == code.value
    assert json.loads(_text(result)) == envelope
    assert result.is_error is (refusals == "error")


class _Failing:
    """The embedded kernel, except that page reads fail the way the case says."""

    def __init__(self, inner: Any, failure: BaseException) -> None:
        self._inner = inner
        self._failure = failure

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get_page(self, query: Any) -> PageView:
        raise self._failure


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (MnoteError(ErrorCode.RUNTIME_UNAVAILABLE, Reason.CONNECT), ErrorCode.RUNTIME_UNAVAILABLE),
        (RuntimeError("a bug"), ErrorCode.INTERNAL),
    ],
    ids=["runtime_unavailable", "internal"],
)
async def test_real_failures_keep_is_error(
    db: Path, mode: str, failure: BaseException, code: ErrorCode
) -> None:
    from tests.support.helpers import make_app

    app = make_app(db, refusals="result")
    app.dispatcher.kernel = _Failing(app.dispatcher.kernel, failure)
    async with Client(app.server(), mode=mode) as client:
        result = await client.call_tool("mnote.page.get", page_args())
    await app.kernel.aclose()
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == code.value


@pytest.mark.parametrize("mode", MODES)
async def test_a_timeout_keeps_is_error(db: Path, mode: str) -> None:
    import anyio

    from tests.support.helpers import make_app

    class _Slow(_Failing):
        async def get_page(self, query: Any) -> PageView:
            await anyio.sleep(5)
            raise AssertionError("the call timeout should have fired")

    app = make_app(db, refusals="result")
    app.dispatcher.kernel = _Slow(app.dispatcher.kernel, RuntimeError())
    app.dispatcher.call_timeout = 0.05
    async with Client(app.server(), mode=mode) as client:
        result = await client.call_tool("mnote.page.get", page_args())
    await app.kernel.aclose()
    assert result.is_error is True
    assert result.structured_content["error"]["code"] == "mnote_tool_runtime_unavailable"


@pytest.mark.parametrize("mode", MODES)
async def test_structured_form_carries_the_envelope_once(db: Path, mode: str) -> None:
    async with connect(db, mode, result_form="structured") as client:
        listed = await client.list_tools()
        result = await client.call_tool("mnote.page.get", page_args())
    assert all(tool.output_schema is not None for tool in listed.tools)
    assert result.content == []
    assert result.structured_content["ok"] is True
    assert result.is_error is False


@pytest.mark.parametrize("mode", MODES)
async def test_text_form_declares_no_output_schema(db: Path, mode: str) -> None:
    """A client must reject a successful result without the structured content its tool declared, so
    in text form the tools declare none; the SDK client then accepts text-only results."""
    async with connect(db, mode, result_form="text") as client:
        listed = await client.list_tools()
        result = await client.call_tool("mnote.page.get", page_args())
        refused = await client.call_tool("mnote.page.get", page_args("doc_missing"))
    assert all(tool.output_schema is None for tool in listed.tools)
    assert result.structured_content is None and refused.structured_content is None
    envelope = json.loads(_text(result))
    assert envelope["ok"] is True and envelope["result"]["title"] == "Project plan"
    assert json.loads(_text(refused))["error"]["code"] == "mnote_tool_not_found"


@pytest.mark.parametrize("mode", MODES)
async def test_both_forms_carry_the_same_json(db: Path, mode: str) -> None:
    async with connect(db, mode, result_form="both") as client:
        result = await client.call_tool("mnote.page.get", page_args())
    assert json.loads(_text(result)) == result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_the_default_is_one_text_block_and_refusals_without_is_error(db: Path, mode: str) -> None:
    """Issue 22: the one setting every host we test reads right (docs/decisions.md, "One setting for
    every host"): the envelope once, as text (Hermes reads only text on isError and takes a short
    structured-only success for a failure; LangChain and openai-agents pass only text to the model),
    and a refusal the call caused as an ok:false result (no breaker, no spent retry). Issue 35: to a
    client of the 2026-07-28 protocol (Hermes >= 0.20.3, which sends a result whose text is the JSON of
    its structured content once) the text comes with `structuredContent` and an output schema; to one
    of the handshake era (Hermes 0.19.0, which would send both) text only, as before."""
    from mnote_mcp.cli import parse

    default = parse(["serve"], {})[1]
    async with connect(db, mode, refusals=default.refusals, result_form=default.result_form) as client:
        listed = await client.list_tools()
        result = await client.call_tool("mnote.page.get", page_args())
        refused = await client.call_tool("mnote.page.get", page_args("doc_missing"))
    modern = mode != "legacy"
    assert all((tool.output_schema is not None) == modern for tool in listed.tools)
    assert json.loads(_text(result))["ok"] is True
    if modern:
        assert json.loads(_text(result)) == result.structured_content, "the text is the structured JSON"
        assert json.loads(_text(refused)) == refused.structured_content
    else:
        assert result.structured_content is None and refused.structured_content is None
    assert refused.is_error is False
    error = json.loads(_text(refused))["error"]
    assert error["code"] == "mnote_tool_not_found" and error["retryable"] is False


def test_the_flags_and_their_variables() -> None:
    from mnote_mcp.cli import parse
    from mnote_mcp.settings import SettingError

    default = parse(["serve"], {})[1]
    assert (default.refusals, default.result_form) == ("result", "auto")
    spec = parse(["serve", "--refusals", "error", "--result-form", "both"], {})[1]
    assert (spec.refusals, spec.result_form) == ("error", "both")
    by_env = parse(["serve"], {"MNOTE_REFUSALS": "error", "MNOTE_RESULT_FORM": "structured"})[1]
    assert (by_env.refusals, by_env.result_form) == ("error", "structured")
    for flag in ("--refusals", "--result-form"):
        with pytest.raises(SettingError):
            parse(["serve", flag, "sometimes"], {})
