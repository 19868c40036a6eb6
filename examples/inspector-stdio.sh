#!/usr/bin/env bash
# The MCP Inspector against mnote-mcp over stdio. `bash .ci/run` installs the CLI under .ci/node;
# `npx @modelcontextprotocol/inspector` works too.
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECTOR=${INSPECTOR:-.ci/node/node_modules/.bin/mcp-inspector}
SERVER=(.venv/bin/mnote-mcp --db "${MNOTE_DB:-/tmp/mnote-inspector.db}")

# List the tools (and lint their schemas for portability).
"$INSPECTOR" --cli "${SERVER[@]}" --method tools/list --strict

# Read a page of the demo workspace, with a trace id in the request _meta.
"$INSPECTOR" --cli "${SERVER[@]}" --method tools/call --tool-name mnote.page.get \
  --tool-args-json '{"workspaceId": "ws_1", "documentId": "doc_1"}' \
  --tool-metadata mnote/traceId=trace_inspector --format json

# The web UI instead: npx @modelcontextprotocol/inspector .venv/bin/mnote-mcp --db /tmp/mnote-inspector.db
