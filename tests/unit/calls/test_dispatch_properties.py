"""Property tests: arbitrary JSON thrown at every tool never crashes the server, never becomes a
JSON-RPC error, always answers an envelope, and leaves the store unchanged unless the call was valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import connect, dump, envelope_of, seeded_store
from tests.support.tool_calls import TOOLS, target

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["paragraph", "heading", "todo", "divider", "code", "table"]) | JSON},
    optional={
        "id": st.sampled_from(["p_1", "heading_1", "x"]) | st.text(max_size=4) | JSON,
        "text": st.text(max_size=10) | JSON,
        "props": st.fixed_dictionaries({}, optional={"level": st.integers(-1, 8), "checked": JSON}) | JSON,
        "children": st.lists(st.fixed_dictionaries({"type": st.just("paragraph")}), max_size=2) | JSON,
    },
)
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "workspaceId": st.sampled_from(["ws_1", "ws_other", "ws_missing", ""]),
    "documentId": st.sampled_from(["doc_1", "doc_secret", "doc_missing", ""]),
    "includeBody": st.booleans(),
    "includeOptions": st.booleans(),
    "includeBlocks": st.booleans(),
    "content": st.lists(BLOCK, max_size=3) | st.text(max_size=8),
    "mode": st.sampled_from(["replace", "append", "merge"]),
    "title": st.text(max_size=8),
    "options": st.dictionaries(
        st.sampled_from(["wideLayout", "showToc", "protectEditing", "zoom"]), JSON, max_size=3
    ),
    "summary": st.text(max_size=8),
    "format": st.sampled_from(["blocks", "markdown", "html"]),
    "blockIds": st.lists(st.sampled_from(["p_1", "heading_1", "s_1", "nope", "bad id"]), max_size=3),
    "maxBlocks": st.integers(-1, 3),
    "cursor": st.sampled_from(["", "eyJyIjoxLCJvIjoxLCJxIjoieCJ9", "junk"]),
    "blocks": st.lists(BLOCK, max_size=3),
    "blockId": st.sampled_from(["p_1", "p_2", "heading_1", "s_1", "nope", "bad id", ""]),
    "afterBlockId": st.sampled_from(["p_1", "p_2", "heading_1", "nope"]),
    "parentId": st.sampled_from(["p_1", "heading_1", "nope"]),
    "position": st.sampled_from(["start", "end", "middle"]),
    "type": st.sampled_from(["paragraph", "heading", "todo", "divider", "table"]),
    "text": st.text(max_size=8),
    "props": st.fixed_dictionaries({}, optional={"level": st.integers(-1, 8), "checked": JSON}),
    "idempotencyKey": st.text(max_size=4),
    "dryRun": st.booleans(),
    "baseRevision": st.integers(-1, 4),
    "capabilityScope": st.lists(
        st.sampled_from(["page.read", "page.write", "artifact.write", "root"]), max_size=3
    ),
    "actorId": st.sampled_from(["user_editor", "user_owner"]),
    "filter": st.fixed_dictionaries(
        {}, optional={"runId": st.text(max_size=4) | JSON, "actorId": st.text(max_size=4), "x": JSON}
    ),
    "sinceRevision": st.integers(-1, 5),
    "limit": st.integers(-1, 101),
    "undoRunId": st.sampled_from(["run_t", "run_x", ""]),
    "commandId": st.sampled_from(["page_body_save_trace_t_00000000", "nope", ""]),
    "toRevision": st.integers(-1, 4),
    "query": st.text(max_size=12) | st.sampled_from(["plan", "proj*", "项目", "SECRET", "!!", "a b c"]),
    "sessionId": st.text(max_size=4),
    "traceId": st.text(max_size=4),
}


def arguments_for(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Every property the tool advertises (a new tool's included): plausible values where this file
    knows the name, the values of the tool's own examples, and any JSON."""
    spec = TOOLS[tool]
    examples: dict[str, list[Any]] = {}
    for example in spec.examples:
        for name, value in example.resolved(target("doc_1")).items():
            examples.setdefault(name, []).append(value)
    names = list(dict.fromkeys([*spec.input_schema(strict=False)["properties"], "baseRevision", "actorId"]))

    def strategy(name: str) -> st.SearchStrategy[Any]:
        known = PLAUSIBLE.get(name, JSON)
        return known | st.sampled_from(examples[name]) | JSON if name in examples else known | JSON

    known = st.fixed_dictionaries({}, optional={name: strategy(name) for name in names})
    extra = st.dictionaries(st.text(max_size=6), JSON, max_size=2)
    return st.builds(lambda a, b: {**b, **a}, known, extra)


@pytest.mark.slow
@pytest.mark.parametrize("tool", list(TOOLS))
def test_arbitrary_arguments_always_get_an_envelope(tmp_path: Path, tool: str) -> None:
    """One server and client for all the examples (a portal runs them on one event loop; the test's
    settings leave no call limit to fill up), as a host keeps its connection; a new one per example
    spent 40% of the test's CPU connecting."""
    db = seeded_store(tmp_path / "mnote.db")
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(connect(db)) as client:

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(arguments=arguments_for(tool))
        def run(arguments: dict[str, Any]) -> None:
            before = dump(db)
            envelope = envelope_of(portal.call(client.call_tool, tool, arguments))
            _check(tool, arguments, envelope, before, db)

        run()


def _check(tool: str, arguments: dict[str, Any], envelope: dict[str, Any], before: Any, db: Path) -> None:
    """An envelope, never the internal error, and no change to the store but by a successful write."""
    assert envelope["toolName"] == tool
    if envelope["ok"]:
        assert envelope["error"] is None
    else:
        assert envelope["error"]["code"] != "mnote_tool_internal", envelope["error"]
        assert envelope["result"] is None
    if not (envelope["ok"] and envelope["audit"]["effect"] == "write"):
        assert dump(db) == before, f"{tool} {arguments} changed the store without a successful write"
