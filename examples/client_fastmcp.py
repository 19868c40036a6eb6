"""mnote from fastmcp's client (fastmcp 4.2): read a page, dry-run an append, print both envelopes.

pip install 'fastmcp==4.2.3'
MNOTE_COMMAND=/abs/path/.venv/bin/mnote-mcp python client_fastmcp.py ws_1 doc_1
MNOTE_URL=http://127.0.0.1:8765/mcp MNOTE_TOKEN=... python client_fastmcp.py ws_1 doc_1   # over HTTP
"""

import asyncio
import json
import os
import sys
import uuid

from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

RUN_ID = os.environ.get("MNOTE_RUN_ID") or f"run_{uuid.uuid4().hex[:12]}"  # joins this client's calls


def transport():
    if url := os.environ.get("MNOTE_URL"):
        headers = {"Authorization": f"Bearer {os.environ['MNOTE_TOKEN']}", "X-Mnote-Run-Id": RUN_ID}
        return StreamableHttpTransport(url, headers=headers)
    args = ["--db", os.environ["MNOTE_DB"]] if os.environ.get("MNOTE_DB") else []
    env = {"PATH": os.environ.get("PATH", ""), "MNOTE_RUN_ID": RUN_ID}
    return StdioTransport(os.environ.get("MNOTE_COMMAND", "mnote-mcp"), args, env=env)


def envelope(result):
    """The envelope: the result's text (the default form), or its structured content (`--result-form both`)."""
    return result.structured_content or json.loads(result.content[0].text)


async def main(workspace_id: str, document_id: str) -> None:
    page = {"workspaceId": workspace_id, "documentId": document_id}
    async with Client(transport()) as client:
        read = await client.call_tool("mnote.page.get", page, raise_on_error=False)
        print(json.dumps(envelope(read)))
        plan = {"content": [{"type": "paragraph", "text": "Appended."}], "mode": "append"}
        write = {**page, **plan, "idempotencyKey": f"{RUN_ID}-append", "dryRun": True}
        dry_run = await client.call_tool("mnote.page.save", write, raise_on_error=False)
        print(json.dumps(envelope(dry_run)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
