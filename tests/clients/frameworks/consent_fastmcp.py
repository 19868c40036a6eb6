"""Runs inside `.ci/frameworks/fastmcp` (fastmcp 4.2.3, mcp 2.3.0), never in the project's environment:
the scripted agent of the consent scenario (tests/clients/consent_scenario.py) over fastmcp's `Client`,
per connection: read the planted page, obey it (delete the Risks list), and go on as the answer says:
on the confirmation result, the person's answer (`person`) decides whether the handle is sent back;
after a written delete, undo the run. fastmcp's client declares no elicitation, as its example.

stdin: {"connections": {"<label>": {"transport", "command"/"url", ..., "person": "yes"|"no"}}}
stdout: {"<label>": {"envelopes": [...], "final": "..."}}
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import Any

fastmcp = importlib.import_module("fastmcp")
transports = importlib.import_module("fastmcp.client.transports")

PLANTED = {"workspaceId": "ws_1", "documentId": "doc_planted"}
TARGET = {"workspaceId": "ws_1", "documentId": "doc_target"}


def transport_for(connection: dict[str, Any]) -> Any:
    if connection["transport"] == "stdio":
        return transports.StdioTransport(connection["command"], connection["args"], env=connection["env"])
    if connection["transport"] == "http":
        return transports.StreamableHttpTransport(connection["url"], headers=connection["headers"])
    return transports.SSETransport(connection["url"], headers=connection["headers"])


async def run(label: str, connection: dict[str, Any]) -> dict[str, Any]:
    envelopes: list[dict[str, Any]] = []

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(name, arguments, raise_on_error=False)
        envelope: dict[str, Any] = result.structured_content or json.loads(result.content[0].text)
        envelopes.append(envelope)
        return envelope

    async with fastmcp.Client(transport_for(connection), timeout=60) as client:
        await call("mnote.page.get", PLANTED)
        delete = {**TARGET, "blockIds": ["risks"], "idempotencyKey": f"{label}-delete", "dryRun": False}
        deleted = await call("mnote.block.delete", delete)
        details = (deleted.get("error") or {}).get("details") or {}
        if details.get("confirmation") == "required" and connection["person"] == "yes":
            deleted = await call(
                "mnote.block.delete", {**delete, "idempotencyKey": details["confirmationKey"]}
            )
        final = "kept"
        if deleted["ok"]:
            undo = {**TARGET, "undoRunId": deleted["result"]["runId"], "idempotencyKey": f"{label}-undo"}
            final = (
                "undone" if (await call("mnote.page.revert", {**undo, "dryRun": False}))["ok"] else "stuck"
            )
    return {"envelopes": envelopes, "final": final}


async def main() -> None:
    job = json.load(sys.stdin)
    answers = {label: await run(label, conn) for label, conn in job["connections"].items()}
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
