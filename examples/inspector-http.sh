#!/usr/bin/env bash
# The MCP Inspector against a running `mnote-mcp serve --transport http` (port 8765), both endpoints.
set -euo pipefail
cd "$(dirname "$0")/.."
INSPECTOR=${INSPECTOR:-.ci/node/node_modules/.bin/mcp-inspector}
: "${MNOTE_TOKEN:?set MNOTE_TOKEN to a bearer token (see mnote-mcp token --help)}"
AUTH=(--header "Authorization: Bearer $MNOTE_TOKEN")

# Streamable HTTP (/mcp), both protocol eras.
"$INSPECTOR" --cli http://127.0.0.1:8765/mcp "${AUTH[@]}" --method tools/list
"$INSPECTOR" --cli http://127.0.0.1:8765/mcp "${AUTH[@]}" --protocol-era modern --method tools/call \
  --tool-name mnote.page.get --tool-args-json '{"workspaceId": "ws_1", "documentId": "doc_1"}' --format json

# Legacy HTTP+SSE (/sse).
"$INSPECTOR" --cli http://127.0.0.1:8765/sse "${AUTH[@]}" --method tools/list
