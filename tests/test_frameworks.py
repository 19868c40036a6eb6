"""Other agent frameworks reuse the server (issue 16), each in its own environment with its own `mcp`
SDK (`.ci/frameworks/<name>`, installed by `bash .ci/run`).

The strict-conversion invariant: every advertised input schema, in both schema forms and both name
styles, goes through the frameworks' own strict converters (openai-agents' `MCPUtil.to_function_tool(...,
convert_schemas_to_strict=True)`, pydantic-ai's OpenAI transformers, forced) with no fallback and no
refusal; the strict form is taken as it is (the converters change nothing, and pydantic-ai finds it
strict by itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.frameworks.harness import run_in
from tests.helpers import connect, seeded_store

pytestmark = [pytest.mark.frameworks]

SETTINGS = {
    f"{form}/{style}": {"schema_form": form, "tool_names": style}
    for form in ("contract", "strict")
    for style in ("dotted", "underscore")
}


async def _listed(db: Path, **config: Any) -> list[dict[str, Any]]:
    async with connect(db, **config) as client:
        listing = await client.list_tools()
    return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools]


@pytest.fixture(scope="module")
def listings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    db = seeded_store(tmp_path_factory.mktemp("listings") / "mnote.db")

    async def every_setting() -> dict[str, list[dict[str, Any]]]:
        return {label: await _listed(db, **config) for label, config in SETTINGS.items()}

    return anyio.run(every_setting)


def test_openai_agents_converts_every_schema_to_strict(listings: dict[str, list[dict[str, Any]]]) -> None:
    answers = run_in("openai-agents", "convert.py", "openai-agents", stdin=listings)
    for label, tools in listings.items():
        assert set(answers[label]) == {tool["name"] for tool in tools}
        for tool in tools:
            answer = answers[label][tool["name"]]["openai-agents"]
            assert answer["strict"], (label, tool["name"], answer["error"])
            if label.startswith("strict/"):
                assert answer["schema"] == tool["inputSchema"], (
                    f"{label} {tool['name']}: converter changed it"
                )


def test_pydantic_ai_converts_every_schema_to_strict(listings: dict[str, list[dict[str, Any]]]) -> None:
    answers = run_in("pydantic-ai", "convert.py", "pydantic-ai", stdin=listings)
    for label, tools in listings.items():
        for tool in tools:
            for converter, answer in answers[label][tool["name"]].items():
                if converter.endswith("/forced") or label.startswith("strict/"):
                    assert answer["strict"], (label, tool["name"], converter, answer["error"])
                if label.startswith("strict/") and converter.endswith("/auto"):
                    assert answer["schema"] == tool["inputSchema"], (label, tool["name"], converter)
