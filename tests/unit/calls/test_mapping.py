"""Request mapping: where correlation ids, the actor and the scopes of a call come from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.calls.mapping import correlate
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.scopes import ALL_SCOPES, Scope
from tests.support.helpers import MODES, call, connect, write_args

pytestmark = pytest.mark.anyio
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BASE: dict[str, Any] = {"workspaceId": "ws_1", "documentId": "doc_1"}


def test_arguments_win_over_meta_over_bindings_over_generated() -> None:
    identity = Identity(
        "u", ALL_SCOPES, bindings={"sessionId": "bound_s", "runId": "bound_r", "traceId": "bound_t"}
    )
    meta = {"mnote/sessionId": "meta_s", "mnote/runId": "meta_r", "traceparent": PARENT}
    c = correlate({"sessionId": "arg_s"}, meta, identity)
    assert (c.session_id, c.run_id) == ("arg_s", "meta_r")
    assert re.fullmatch(r"call_[0-9a-f]{16}", c.tool_call_id), "generated, never the JSON-RPC id"
    assert c.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    c = correlate({}, {}, identity)
    assert (c.session_id, c.run_id, c.trace_id) == ("bound_s", "bound_r", "bound_t")
    assert c.tool_call_id.startswith("call_")
    c = correlate({"traceId": ""}, {"mnote/traceId": 5}, Identity("u"))
    assert re.fullmatch(r"[0-9a-f]{32}", c.trace_id), "junk falls through to a generated id"


def test_meta_trace_id_beats_traceparent() -> None:
    c = correlate({}, {"mnote/traceId": "t_meta", "traceparent": PARENT}, Identity("u"))
    assert c.trace_id == "t_meta"


@pytest.mark.parametrize("value", ["", "garbage", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", 42])
def test_bad_traceparents_are_ignored(value: object) -> None:
    assert trace_id_of(value) is None


def test_generated_session_and_run_ids_are_stable_per_connection() -> None:
    identity = Identity("u")
    first, second = correlate({}, None, identity), correlate({}, None, identity)
    assert first.session_id == second.session_id and first.run_id == second.run_id
    assert first.trace_id != second.trace_id and first.tool_call_id != second.tool_call_id


@pytest.mark.parametrize("mode", MODES)
async def test_meta_correlation_reaches_the_envelope_and_the_audit(db: Path, mode: str) -> None:
    meta = {
        "mnote/sessionId": "s_meta",
        "mnote/runId": "r_meta",
        "mnote/toolCallId": "c_meta",
        "traceparent": PARENT,
    }
    async with connect(db, mode) as client:
        envelope = await call(
            client,
            "mnote.page.update_title",
            meta=meta,
            **BASE,
            title="Meta",
            idempotencyKey="m",
            dryRun=False,
        )
    assert envelope["toolCallId"] == "c_meta"
    assert envelope["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert envelope["audit"]["commandId"].startswith(
        "page_head_update_title_4bf92f3577b34da6a3ce929d0e0e4736_"
    )


async def test_connection_bindings_fill_missing_ids(db: Path) -> None:
    async with connect(db, session_id="cli_session", run_id="cli_run") as client:
        envelope = await call(client, "mnote.page.get", **BASE)
    assert envelope["ok"] and envelope["toolCallId"].startswith("call_")
    assert re.fullmatch(r"[0-9a-f]{32}", envelope["traceId"])


async def test_strict_contract_requires_the_correlation_ids(db: Path) -> None:
    async with connect(db, strict_contract=True) as client:
        missing = await call(client, "mnote.page.get", **BASE)
        present = await call(
            client, "mnote.page.get", **BASE, sessionId="s", runId="r", toolCallId="c", traceId="t"
        )
    assert missing["error"]["code"] == "mnote_tool_invalid_argument"
    assert missing["error"]["details"]["pointer"] == "/sessionId"
    assert present["ok"]


async def test_actor_comes_from_the_connection_never_from_the_model(db: Path) -> None:
    async with connect(db, actor="user_viewer") as client:
        spoofed = await call(
            client, "mnote.page.update_title", **write_args("a", title="x", actorId="user_owner")
        )
        honest = await call(client, "mnote.page.get", **BASE, actorId="user_viewer")
    assert spoofed["error"]["code"] == "mnote_tool_permission_denied"
    assert spoofed["error"]["message"] == "actorId does not match the identity of this connection"
    assert honest["ok"]


async def test_no_actor_is_unauthenticated(db: Path) -> None:
    async with connect(db, actor=None) as client:
        envelope = await call(client, "mnote.page.get", **BASE)
    assert envelope["error"]["code"] == "mnote_tool_unauthenticated"


async def test_capability_scope_narrows(db: Path) -> None:
    async with connect(db) as client:
        narrowed = await call(
            client, "mnote.page.update_title", **write_args("n", title="x", capabilityScope=["page.read"])
        )
        meta_narrowed = await call(
            client,
            "mnote.page.update_title",
            meta={"mnote/capabilityScope": ["artifact.write"]},
            **write_args("n", title="x"),
        )
    assert narrowed["error"]["code"] == "mnote_tool_permission_denied"
    assert narrowed["error"]["details"] == {"scope": "page.write"}
    assert meta_narrowed["error"]["code"] == "mnote_tool_permission_denied"


async def test_capability_scope_never_widens(db: Path) -> None:
    async with connect(db, scopes=frozenset({Scope.PAGE_READ})) as client:
        envelope = await call(
            client,
            "mnote.page.update_title",
            **write_args("w", title="x", capabilityScope=["page.read", "page.write", "artifact.write"]),
        )
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"


async def test_unknown_scope_names_are_invalid(db: Path) -> None:
    async with connect(db) as client:
        envelope = await call(client, "mnote.page.get", **BASE, capabilityScope=["page.admin"])
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"


async def test_read_only_refuses_hidden_write_tools(db: Path) -> None:
    async with connect(db, read_only=True) as client:
        envelope = await call(client, "mnote.page.update_title", **write_args("r", title="x"))
        read = await call(client, "mnote.page.get", **BASE)
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert "read-only" in envelope["error"]["message"]
    assert read["ok"]


async def test_both_spellings_are_accepted_and_the_envelope_names_the_tool_as_served(db: Path) -> None:
    async with connect(db, tool_names="underscore") as client:
        underscore = await call(client, "mnote_page_get", **BASE)
        dotted = await call(client, "mnote.page.get", **BASE)
    assert underscore["toolName"] == dotted["toolName"] == "mnote_page_get"
    async with connect(db) as client:
        underscore = await call(client, "mnote_page_get", **BASE)
    assert underscore["toolName"] == "mnote.page.get"


async def test_an_unknown_field_of_a_closed_object_is_named_by_its_pointer(db: Path) -> None:
    """A refusal names the argument at fault (issue 30): the unexpected member, not the object."""
    async with connect(db) as client:
        refused = await call(
            client, "mnote.page.update_options", **write_args("k", options={"showToc": True, "bogus": 1})
        )
    assert refused["error"]["details"]["pointer"] == "/options/bogus", refused["error"]
