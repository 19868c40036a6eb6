"""`mnote.page.edit_text` through the real MCP client, in both protocol eras: a unique match, several
edits in one call, an ambiguous and a missing match (refused with the candidate blocks, nothing
written), a dry run, a stale baseRevision (conflict, or rebased when the block did not change), an
idempotent retry, and the misspelt word in a 1,000-block page fixed in one call whose result is under
1 KB."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.store.commands.text import CANDIDATES, CONTEXT
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.schemas import SCHEMA_FORMS, SchemaForm
from tests.support.helpers import MODES, call, connect, dump, page_args, write_args

pytestmark = pytest.mark.anyio

TOOL = "mnote.page.edit_text"
BODY: list[dict[str, Any]] = [
    {"id": "h", "type": "heading", "text": "Plan", "props": {"level": 1}},
    {"id": "a", "type": "paragraph", "text": "We will ship teh release on Monday."},
    {
        "id": "l",
        "type": "bulleted_list",
        "text": "Risks",
        "children": [{"id": "l1", "type": "paragraph", "text": "the migraton may be slow"}],
    },
    {"id": "b", "type": "paragraph", "text": "Owner: Ana. Reviewer: Ana."},
]


async def seed(client: Any, content: list[dict[str, Any]] = BODY) -> int:
    envelope = await call(client, "mnote.page.save", **write_args("seed", content=content))
    assert envelope["ok"], envelope["error"]
    return int(envelope["result"]["revision"])


async def texts(client: Any) -> dict[str, str]:
    page = (await call(client, "mnote.page.get", **page_args()))["result"]
    out: dict[str, str] = {}

    def walk(blocks: list[dict[str, Any]]) -> None:
        for block in blocks:
            out[block["id"]] = block["text"]
            walk(block.get("children", []))

    walk(page["blocks"])
    return out


def edit(old: str, new: str, **extra: Any) -> dict[str, Any]:
    return {"oldText": old, "newText": new, **extra}


@pytest.mark.parametrize("mode", MODES)
async def test_a_unique_match_is_replaced_in_its_block_alone(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed(client)
        envelope = await call(client, TOOL, **write_args("k", edits=[edit("teh", "the")]))
        after = await texts(client)
    result = envelope["result"]
    assert envelope["ok"] and result["commandName"] == "page.text.replace"
    assert (result["revision"], result["changed"], result["blockIds"]) == (revision + 1, True, ["a"])
    assert result["diff"] == [{"op": "update", "blockId": "a", "fields": ["text"]}]
    assert after["a"] == "We will ship the release on Monday."
    assert {k: v for k, v in after.items() if k != "a"} == {
        "h": "Plan",
        "l": "Risks",
        "l1": "the migraton may be slow",
        "b": "Owner: Ana. Reviewer: Ana.",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_several_edits_apply_in_order_in_one_write(db: Path, mode: str) -> None:
    edits = [
        edit("teh", "the"),
        edit("migraton", "migration"),
        edit("the release", "release 2"),  # matches text the first edit made
        edit("Ana", "Bo", replaceAll=True),
    ]
    async with connect(db, mode) as client:
        revision = await seed(client)
        envelope = await call(client, TOOL, **write_args("k", edits=edits))
        after = await texts(client)
    result = envelope["result"]
    assert result["revision"] == revision + 1, "one write for every edit"
    assert result["blockIds"] == ["a", "l1", "b"], "in document order"
    assert after["a"] == "We will ship release 2 on Monday."
    assert after["l1"] == "the migration may be slow"
    assert after["b"] == "Owner: Bo. Reviewer: Bo."


@pytest.mark.parametrize("mode", MODES)
async def test_within_one_block_only_that_block_is_searched(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed(client)
        envelope = await call(client, TOOL, **write_args("k", blockId="l1", edits=[edit("the", "The")]))
        after = await texts(client)
    assert envelope["ok"] and envelope["result"]["blockIds"] == ["l1"]
    assert after["l1"] == "The migraton may be slow" and after["a"] == BODY[1]["text"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_ambiguous_match_is_refused_with_where_it_occurs(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed(client)
        before = dump(db)
        envelope = await call(client, TOOL, **write_args("k", edits=[edit("teh", "the"), edit("Ana", "Bo")]))
        assert dump(db) == before, "all or nothing: the first edit is not written either"
        # what the refusal says is enough for the retry to succeed
        (first, second) = envelope["error"]["details"]["candidates"]
        retry = await call(
            client,
            TOOL,
            **write_args("k2", blockId=second["blockId"], edits=[edit("Reviewer: Ana", "Reviewer: Bo")]),
        )
    error = envelope["error"]
    assert error["code"] == "mnote_tool_invalid_argument" and error["retryable"] is False
    assert error["details"]["pointer"] == "/edits/1/oldText" and error["details"]["matches"] == 2
    assert error["message"] == "the text at /edits/1/oldText occurs 2 times; nothing was written"
    assert "replaceAll" in error["hint"]
    assert first == {"blockId": "b", "text": "Owner: Ana. Reviewer: Ana."}
    assert second == first, "each occurrence is a candidate, even two in one block"
    assert retry["ok"] and retry["result"]["blockIds"] == ["b"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_missing_match_is_refused_with_similar_text(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed(client)
        before = dump(db)
        near = await call(client, TOOL, **write_args("k1", edits=[edit("The  Migraton", "x")]))
        word = await call(client, TOOL, **write_args("k2", edits=[edit("slow migraton", "x")]))
        none = await call(client, TOOL, **write_args("k3", edits=[edit("nowhere at all", "x")]))
        in_block = await call(client, TOOL, **write_args("k4", blockId="a", edits=[edit("migraton", "x")]))
        assert dump(db) == before
    for envelope in (near, word, none, in_block):
        error = envelope["error"]
        assert error["code"] == "mnote_tool_invalid_argument"
        assert error["details"]["pointer"] == "/edits/0/oldText" and error["details"]["matches"] == 0
        assert error["message"].startswith("the text at /edits/0/oldText is not on the page")
    expected = [{"blockId": "l1", "text": "the migraton may be slow"}]
    assert near["error"]["details"]["candidates"] == expected, "the same words in another case and spacing"
    assert word["error"]["details"]["candidates"] == expected, "else its longest word"
    assert none["error"]["details"]["candidates"] == []
    assert in_block["error"]["details"]["candidates"] == [], "only the named block is looked in"


async def test_candidates_are_bounded_in_count_and_length(db: Path) -> None:
    long = "x" * 300 + " needle " + "y" * 300
    body = [{"id": f"p{n}", "type": "paragraph", "text": long} for n in range(CANDIDATES + 3)]
    async with connect(db) as client:
        await seed(client, body)
        envelope = await call(client, TOOL, **write_args("k", edits=[edit("needle", "pin")]))
    details = envelope["error"]["details"]
    assert details["matches"] == CANDIDATES + 3 and len(details["candidates"]) == CANDIDATES
    assert [c["blockId"] for c in details["candidates"]] == [f"p{n}" for n in range(CANDIDATES)]
    text = details["candidates"][0]["text"]
    assert text == "…" + "x" * (CONTEXT - 1) + " needle " + "y" * (CONTEXT - 1) + "…"


@pytest.mark.parametrize("mode", MODES)
async def test_a_dry_run_writes_nothing_and_shows_the_diff(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed(client)
        before = dump(db)
        plan = await call(client, TOOL, **write_args("k", dry_run=True, edits=[edit("teh", "the")]))
        assert dump(db) == before
        real = await call(client, TOOL, **write_args("k", edits=[edit("teh", "the")]))
    result = plan["result"]
    assert plan["audit"]["effect"] == "dry_run" and result["dryRun"] is True
    assert result["currentRevision"] == revision and result["changed"] is True
    assert result["diff"] == real["result"]["diff"] and result["blockIds"] == ["a"]
    assert "-We will ship teh release on Monday." in result["textDiff"]
    assert "+We will ship the release on Monday." in result["textDiff"]
    assert real["result"]["revision"] == revision + 1, "a dry run consumes no key"


@pytest.mark.parametrize("mode", MODES)
async def test_a_stale_base_is_rebased_unless_the_edited_block_changed(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        base = await seed(client)
        other = await call(client, "mnote.block.update", **write_args("u1", blockId="b", text="Owner: Cy."))
        rebased = await call(client, TOOL, **write_args("k1", baseRevision=base, edits=[edit("teh", "the")]))
        before = dump(db)
        stale = await call(
            client, TOOL, **write_args("k2", baseRevision=base, edits=[edit("ship the", "ship")])
        )
        assert dump(db) == before
    assert other["ok"] and rebased["ok"]
    assert rebased["result"]["rebasedFrom"] == base and rebased["result"]["revision"] == base + 2
    error = stale["error"]
    assert error["code"] == "mnote_tool_conflict"
    assert error["details"]["conflicts"] == [{"blockId": "a", "revision": base + 2}]
    assert f"baseRevision={base + 2}" in error["hint"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_retry_replays_and_other_arguments_conflict(db: Path, mode: str) -> None:
    args: dict[str, Any] = {"edits": [edit("teh", "the")]}
    async with connect(db, mode) as client:
        await seed(client)
        first = await call(client, TOOL, **write_args("k_retry", **args))
        before = dump(db, audit=False)
        retry = await call(client, TOOL, **{**write_args("k_retry", **args), "toolCallId": "call_retry"})
        other = await call(client, TOOL, **write_args("k_retry", edits=[edit("Plan", "Plans")]))
        assert dump(db, audit=False) == before
    assert retry["result"]["idempotentReplay"] is True
    assert retry["audit"]["commandId"] == first["audit"]["commandId"]
    assert retry["result"]["revision"] == first["result"]["revision"]
    assert other["error"]["code"] == "mnote_tool_idempotency_conflict"


@pytest.mark.parametrize(
    ("args", "pointer"),
    [
        ({"edits": []}, "/edits"),
        ({"edits": [edit("", "x")]}, "/edits/0/oldText"),
        ({"edits": [{"oldText": "teh"}]}, "/edits/0/newText"),
        ({"edits": [edit("teh", "the")] * 51}, "/edits"),
        # issue 30: an edit's fields are closed, as a block's and options are
        ({"edits": [{**edit("teh", "the"), "bogus": 1}]}, "/edits/0/bogus"),
        (
            {"edits": [edit("teh", "the"), {**edit("a", "b"), "replaceAll": True, "old_text": "a"}]},
            "/edits/1/old_text",
        ),
    ],
)
async def test_bad_edits_are_refused_with_a_pointer(db: Path, args: dict[str, Any], pointer: str) -> None:
    async with connect(db) as client:
        await seed(client)
        before = dump(db)
        envelope = await call(client, TOOL, **write_args("k", **args))
        assert dump(db) == before
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["pointer"] == pointer


@pytest.mark.parametrize("form", SCHEMA_FORMS)
def test_the_advertised_edit_is_closed(form: SchemaForm) -> None:
    """What a model is shown says an edit takes only oldText, newText and replaceAll (issue 30)."""
    tool = next(spec for spec in ALL_TOOLS if spec.name == TOOL).to_mcp(
        style="dotted", strict=False, form=form
    )
    item = tool.input_schema["properties"]["edits"]["items"]
    assert item["additionalProperties"] is False and set(item["properties"]) == {
        "oldText",
        "newText",
        "replaceAll",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_a_typo_in_a_1000_block_page_is_fixed_in_one_call_under_1_kb(db: Path, mode: str) -> None:
    body = [{"type": "paragraph", "text": f"Paragraph {n} of the quarterly report."} for n in range(1_000)]
    body[637]["text"] = "Paragraph 637 of the quartely report."
    async with connect(db, mode) as client:
        await seed(client, body)
        result = await client.call_tool(TOOL, write_args("k", edits=[edit("quartely", "quarterly")]))
    (content,) = result.content
    assert content.type == "text"
    assert len(content.text.encode()) <= 1_024, content.text
    assert len(json.loads(content.text)["result"]["blockIds"]) == 1
    with closing(sqlite3.connect(db)) as conn:
        stored = [text for (text,) in conn.execute("SELECT text FROM blocks WHERE page_id = 'doc_1'")]
    assert len(stored) == 1_000 and all(text.endswith(" of the quarterly report.") for text in stored)
