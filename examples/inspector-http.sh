#!/usr/bin/env bash
# The MCP Inspector against a running `mnote-mcp serve --transport http` (MNOTE_URL, by default
# http://127.0.0.1:8765), both endpoints. Uses the Inspector CLI `bash .ci/run` installs under
# .ci/node, or else `npx @modelcontextprotocol/inspector@2.12.0` (the version the tests use).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${INSPECTOR:-}" ]; then read -r -a INSPECTOR <<<"$INSPECTOR"
elif [ -x .ci/node/node_modules/.bin/mcp-inspector ]; then INSPECTOR=(.ci/node/node_modules/.bin/mcp-inspector)
else INSPECTOR=(npx -y @modelcontextprotocol/inspector@2.12.0); fi
# The Inspector gives a server 15 s to answer its connection by default; a busy machine may need longer.
CONNECT=(--connect-timeout "${INSPECTOR_CONNECT_TIMEOUT_MS:-60000}")
: "${MNOTE_TOKEN:?set MNOTE_TOKEN to a bearer token (see mnote-mcp token --help)}"
URL=${MNOTE_URL:-http://127.0.0.1:8765}
AUTH=(--header "Authorization: Bearer $MNOTE_TOKEN")

# Streamable HTTP (/mcp), both protocol eras.
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "$URL/mcp" "${AUTH[@]}" --method tools/list
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "$URL/mcp" "${AUTH[@]}" --protocol-era modern --method tools/call \
  --tool-name mnote.page.get --tool-args-json '{"workspaceId": "ws_1", "documentId": "doc_1"}' --format json

# Legacy HTTP+SSE (/sse).
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "$URL/sse" "${AUTH[@]}" --method tools/list
