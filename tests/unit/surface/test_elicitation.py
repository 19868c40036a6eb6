"""How a question travels in each protocol era (`mnote_mcp/surface/elicitation.py`), at the wire: the form the
client is sent, the 2026-07-28 `input_required` result and its sealed state, and what a retry that
does not come from this server's question gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError

from mnote_mcp.base.secretfiles import SecretFileError
from mnote_mcp.surface.elicitation import FORM, INPUT_KEY, read_keys
from tests.support.helpers import call, connect, dump, envelope_of, make_app, write_args

pytestmark = pytest.mark.anyio

REPLACE: dict[str, Any] = {"content": [{"type": "paragraph", "text": "Only this is left."}]}
ACCEPT = types.ElicitResult(action="accept", content={})


async def _never(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    raise AssertionError("the client drives the rounds by hand here")


async def test_the_2026_era_question_is_an_input_required_result_with_a_sealed_state(db: Path) -> None:
    before = dump(db)
    async with connect(db, "auto", elicitation_callback=_never) as client:
        args = write_args("by-hand", **REPLACE)
        asked = await client.session.call_tool("mnote.page.save", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult), "the question is the call's result"
        assert asked.input_requests is not None and set(asked.input_requests) == {INPUT_KEY}
        question = asked.input_requests[INPUT_KEY]
        assert isinstance(question, types.ElicitRequest)
        assert isinstance(question.params, types.ElicitRequestFormParams)
        assert question.params.requested_schema == FORM and "Deletes 3 block(s)" in question.params.message
        state = asked.request_state
        assert state is not None and state.startswith("v1.") and '"q"' not in state, "sealed, not readable"
        assert dump(db) == before, "nothing written while asking"

        # An answer without the state this server sealed is no answer: the question comes back.
        again = await client.session.call_tool(
            "mnote.page.save", args, input_responses={INPUT_KEY: ACCEPT}, allow_input_required=True
        )
        assert isinstance(again, types.InputRequiredResult)
        # A state that was tampered with is refused by the SDK's boundary, before any handler.
        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "mnote.page.save", args, input_responses={INPUT_KEY: ACCEPT}, request_state=forged
            )
        # The state is bound to the call's arguments: it cannot accept another write.
        other = write_args("by-hand", content=[{"type": "divider"}])
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "mnote.page.save", other, input_responses={INPUT_KEY: ACCEPT}, request_state=state
            )
        assert dump(db) == before

        done = await client.session.call_tool(
            "mnote.page.save", args, input_responses={INPUT_KEY: ACCEPT}, request_state=state
        )
    envelope = envelope_of(done)
    assert envelope["ok"] and envelope["audit"]["effect"] == "write"


async def test_the_2025_era_asks_with_elicitation_create_on_the_calls_channel(db: Path) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def person(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept", content={"anything": "the form has no fields"})

    async with connect(db, "legacy", elicitation_callback=person) as client:
        written = await call(client, "mnote.page.save", **write_args("legacy-1", **REPLACE))
    assert written["ok"]
    (params,) = seen
    assert isinstance(params, types.ElicitRequestFormParams) and params.requested_schema == FORM


async def test_a_client_that_errors_on_the_question_is_taken_as_cancelling(db: Path) -> None:
    before = dump(db, audit=False)

    async def broken(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return types.ErrorData(code=types.INVALID_REQUEST, message="cannot show forms")

    async with connect(db, "legacy", elicitation_callback=broken) as client:
        refused = await call(client, "mnote.page.save", **write_args("legacy-2", **REPLACE))
    details = refused["error"]["details"]
    assert details == {"confirmation": "cancelled", "auditCommandId": details["auditCommandId"]}
    assert dump(db, audit=False) == before, "nothing but the refusal's audit record"


async def test_replicas_sharing_a_key_file_accept_each_others_state(db: Path, tmp_path: Path) -> None:
    """`--confirm-key-file`: the question asked by one replica can be answered on another; a replica
    with another key refuses the state (as one with a key of its own process always would)."""
    key_file = tmp_path / "confirm.keys"
    key_file.write_text("k" * 32 + "\n" + "old-key-still-opening-" + "o" * 16 + "\n")
    key_file.chmod(0o600)
    shared = tuple(read_keys(key_file))
    apps = [make_app(db), make_app(db), make_app(db)]
    apps[0].state_keys = apps[1].state_keys = shared
    args = write_args("replicas", **REPLACE)
    try:
        async with Client(apps[0].server(), mode="auto", elicitation_callback=_never) as asker:
            asked = await asker.session.call_tool("mnote.page.save", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult) and asked.request_state is not None
        state = asked.request_state
        async with Client(apps[2].server(), mode="auto", elicitation_callback=_never) as stranger:
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await stranger.session.call_tool(
                    "mnote.page.save", args, input_responses={INPUT_KEY: ACCEPT}, request_state=state
                )
        async with Client(apps[1].server(), mode="auto", elicitation_callback=_never) as other:
            done = envelope_of(
                await other.session.call_tool(
                    "mnote.page.save", args, input_responses={INPUT_KEY: ACCEPT}, request_state=state
                )
            )
    finally:
        for app in apps:
            await app.kernel.aclose()
    assert done["ok"] and done["audit"]["effect"] == "write"


def test_a_key_file_must_be_private_and_its_keys_long(tmp_path: Path) -> None:
    short = tmp_path / "short.keys"
    short.write_text("k" * 32 + "\ntoo-short\n")
    short.chmod(0o600)
    with pytest.raises(ValueError, match="at least 32 bytes \\(line 2\\)"):
        read_keys(short)
    public = tmp_path / "public.keys"
    public.write_text("k" * 32)
    public.chmod(0o644)
    with pytest.raises(SecretFileError):
        read_keys(public)
