"""Per-actor rates by cost class (issue 32: the MCP specification says a server MUST rate limit tool
invocations; before, a token could call as fast as it could), through the real MCP client.

- Every tool of the registry has a class, a write tool's is `write` and is never admitted, and a call
  of every tool over its class's rate is refused `mnote_tool_rate_limited`: retryable, with which limit
  and the seconds to wait, in the message (zh-CN and en) and in `details` (so in `structuredContent`
  where it is sent); nothing of the call runs, a write writes nothing.
- A client that waits the seconds it was told is let through.
- A call with thousands of argument items is charged as a heavy read, weighed by its size.
- `resources/read`, `prompts/get`, `resources/list` and `completion/complete` are limited like tool
  calls of their class: a JSON-RPC error (code -32009) whose data is the envelope's error.
- The limits bind the actor: another actor is not limited by the first one's calls.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mnote_mcp.calls.fairshare import RATE_LIMITED_CODE, FairShare
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.cost import REQUEST_COSTS, CallLimit, Cost, call_limit
from mnote_mcp.tools.registry import ToolSpec
from tests.support.helpers import IDS, call, connect, dump, page_args, write_args
from tests.support.timing import patience
from tests.support.tool_calls import arguments, target

pytestmark = pytest.mark.anyio

ONCE = CallLimit(1, 1)  # one call a minute: the second is refused, for about 60 s


def _limit(cost: Cost, limit: CallLimit | None = ONCE) -> dict[str, Any]:
    """The configuration that limits `cost` (the `--<class>-limit` flag's field)."""
    return {f"{cost.value}_limit": limit, "call_limits": True}


def test_every_tool_has_a_cost_class_and_a_write_is_never_admitted() -> None:
    for spec in ALL_TOOLS:
        assert isinstance(spec.cost_class, Cost), spec.name
        assert (spec.cost_class is Cost.WRITE) == spec.writes, spec.name
        assert not (spec.writes and spec.cost_class.admitted), spec.name
    classes = {spec.name: spec.cost_class for spec in ALL_TOOLS}
    assert classes["mnote.page.search"] is Cost.SEARCH and classes["mnote.page.history"] is Cost.HEAVY
    assert classes["mnote.page.get"] is Cost.READ
    with pytest.raises(ValueError, match="costs as a write"):
        type(ALL_TOOLS[0])(**{**_fields(ALL_TOOLS[0]), "cost": Cost.WRITE})


def _fields(spec: ToolSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__dataclass_fields__}


def test_limits_read_as_operators_write_them() -> None:
    assert call_limit("120/min burst 30") == CallLimit(120, 30)
    assert call_limit("2/s") == CallLimit(120, 2)
    assert call_limit(" 5 / second burst 9 ") == CallLimit(300, 9)
    assert call_limit("off") is None
    assert str(CallLimit(120, 30)) == "120/min burst 30"
    for bad in ("fast", "0/min", "10/h", "10/min burst 0"):
        with pytest.raises(ValueError, match=r"N/min|call limit"):
            call_limit(bad)


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda spec: spec.name)
async def test_every_tool_over_its_rate_is_refused_with_the_wait_and_the_limit(
    db: Path, spec: ToolSpec
) -> None:
    cost = spec.cost_class
    call_arguments = {**IDS, **arguments(spec, target("doc_1"), dry_run=False)}
    async with connect(db, **_limit(cost)) as client:
        await call(client, spec.name, **call_arguments)  # answered, whatever it says
        before = dump(db)
        refused = await call(client, spec.name, **call_arguments)
        assert dump(db) == before, "a refused call runs nothing"
    assert refused["ok"] is False and refused["audit"]["effect"] == "none"
    error = refused["error"]
    assert (error["code"], error["retryable"]) == ("mnote_tool_rate_limited", True)
    details = error["details"]
    assert details["limit"] == cost.value and (details["perMinute"], details["burst"]) == (1, 1)
    assert 50 <= details["retryAfterSeconds"] <= 60
    seconds = f"{details['retryAfterSeconds']}"
    assert seconds in error["message"] and cost.value in error["message"], error["message"]
    assert seconds in error["hint"]


async def test_the_refusal_is_in_the_callers_words_and_in_structured_content(db: Path) -> None:
    async with connect(
        db, locale="zh-CN", result_form="both", refusals="result", **_limit(Cost.READ)
    ) as client:
        await client.call_tool("mnote.page.get", page_args())
        result = await client.call_tool("mnote.page.get", page_args())
    assert result.is_error is False, "a breaker (Hermes's) must not count it"
    structured = result.structured_content
    assert structured is not None
    error = structured["error"]
    assert error["code"] == "mnote_tool_rate_limited" and error["details"]["limit"] == "read"
    assert (
        "类调用过于频繁" in error["message"]
        and f"{error['details']['retryAfterSeconds']} 秒" in error["message"]
    )
    assert "秒后以相同参数重试" in error["hint"]


async def test_a_client_that_waits_the_given_time_is_let_through(db: Path) -> None:
    # One write every `every` seconds: long enough that the bucket cannot refill between two calls in a
    # row on a loaded machine (one a second did, in a CI run at load 10), short enough to wait out.
    per_minute = max(1, round(60 / patience(2)))
    every = 60 / per_minute
    async with connect(db, **_limit(Cost.WRITE, CallLimit(per_minute, 1))) as client:
        first = await call(client, "mnote.block.update", **write_args("w1", blockId="p_1", text="one"))
        refused = await call(client, "mnote.block.update", **write_args("w2", blockId="p_1", text="two"))
        assert first["ok"] and refused["error"]["code"] == "mnote_tool_rate_limited", refused
        wait = refused["error"]["details"]["retryAfterSeconds"]
        assert 0 < wait <= every
        await anyio.sleep(wait)
        again = await call(client, "mnote.block.update", **write_args("w2", blockId="p_1", text="two"))
    assert again["ok"], again
    assert again["result"]["revision"] == first["result"]["revision"] + 1, "the refused call wrote nothing"


async def test_a_call_with_thousands_of_ids_is_charged_as_a_heavy_read_by_its_size(db: Path) -> None:
    ids = [f"x_{n}" for n in range(6_000)]  # weighs 4 calls
    # 4 a minute: the bucket cannot refill between the calls, however loaded the machine
    async with connect(db, **_limit(Cost.HEAVY, CallLimit(4, 4))) as client:
        heavy = await call(client, "mnote.page.get", **page_args(blockIds=ids))
        refused = await call(client, "mnote.page.get", **page_args(blockIds=ids[:2_500]))
        light = await call(client, "mnote.page.get", **page_args())
    assert heavy["error"]["code"] == "mnote_tool_not_found", "the first ran (its ids are not on the page)"
    assert (
        refused["error"]["code"] == "mnote_tool_rate_limited"
        and refused["error"]["details"]["limit"] == "heavy"
    )
    assert refused["error"]["details"]["retryAfterSeconds"] > 1, "the first weighed 4 of the burst's 4"
    assert light["ok"], "a light read is a read: its own bucket"


async def test_the_limits_bind_the_actor(db: Path) -> None:
    fair = FairShare({Cost.READ: ONCE})
    assert fair.check(Cost.READ, "user_editor") is None
    refused = fair.check(Cost.READ, "user_editor")
    assert refused is not None and refused.details["limit"] == "read"
    assert fair.check(Cost.READ, "user_viewer") is None, "another actor has its own bucket"
    assert fair.check(Cost.WRITE, "user_editor") is None, "another class has its own bucket"
    assert FairShare().check(Cost.READ, "user_editor") is None, "nothing is limited unless asked"


def test_every_request_that_reads_pages_has_a_class() -> None:
    assert REQUEST_COSTS == {
        "resources/read": Cost.READ,
        "prompts/get": Cost.READ,
        "resources/list": Cost.SEARCH,
        "completion/complete": Cost.COMPLETION,
    }


PAGE_URI = "mnote://workspaces/ws_1/pages/doc_1"
PROMPT = types.PromptReference(type="ref/prompt", name="summarise_page")


async def _read(client: Client) -> Any:
    return await client.read_resource(PAGE_URI)


async def _prompt(client: Client) -> Any:
    return await client.get_prompt("summarise_page", {"workspaceId": "ws_1", "documentId": "doc_1"})


async def _list(client: Client) -> Any:
    return await client.list_resources()


async def _complete(client: Client) -> Any:
    return await client.complete(PROMPT, {"name": "documentId", "value": "doc"})


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("resources/read", _read),
        ("prompts/get", _prompt),
        ("resources/list", _list),
        ("completion/complete", _complete),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_requests_that_are_not_tool_calls_are_limited_by_their_class(
    db: Path, method: str, request_: Any
) -> None:
    cost = REQUEST_COSTS[method]
    async with connect(db, **_limit(cost)) as client:
        await request_(client)
        with pytest.raises(MCPError) as refused:
            await request_(client)
        other = {Cost.READ: _list, Cost.SEARCH: _read, Cost.COMPLETION: _read}[cost]
        await other(client)  # another class is not limited by this one
    error = refused.value.error
    assert error.code == RATE_LIMITED_CODE
    assert isinstance(error.data, dict)
    assert (error.data["code"], error.data["retryable"]) == ("mnote_tool_rate_limited", True)
    assert error.data["details"]["limit"] == cost.value and error.data["details"]["retryAfterSeconds"] > 50
    assert f"{error.data['details']['retryAfterSeconds']} s" in error.message


async def test_a_refusal_costs_less_than_the_call(db: Path) -> None:
    """A refused call is answered before its arguments are checked: 6,000 ids cost a refused caller
    about what a light refused call does."""
    ids = [f"x_{n}" for n in range(6_000)]
    async with connect(db, **_limit(Cost.HEAVY)) as client:
        await call(client, "mnote.page.get", **page_args(blockIds=ids))
        started = time.perf_counter()
        for _ in range(5):
            refused = await call(client, "mnote.page.get", **page_args(blockIds=ids))
        took = (time.perf_counter() - started) / 5
    assert refused["error"]["code"] == "mnote_tool_rate_limited"
    assert took < 2.0, f"{took:.2f} s a refused call"
