#!/usr/bin/env bash
# The MCP Inspector against mnote-mcp over stdio. Uses the Inspector CLI `bash .ci/run` installs under
# .ci/node, or else `npx @modelcontextprotocol/inspector@2.12.0` (the version the tests use; it wants
# Node 22, and on older Node npm warns but the CLI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${INSPECTOR:-}" ]; then read -r -a INSPECTOR <<<"$INSPECTOR"
elif [ -x .ci/node/node_modules/.bin/mcp-inspector ]; then INSPECTOR=(.ci/node/node_modules/.bin/mcp-inspector)
else INSPECTOR=(npx -y @modelcontextprotocol/inspector@2.12.0); fi
# A store of this run's own, in a private directory removed at the end (MNOTE_DB names one to keep);
# --demo: a new store named by --db gets the demo workspace (only the default store does without it).
if [ -z "${MNOTE_DB:-}" ]; then
  STORE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mnote-inspector.XXXXXX")"   # mode 0700
  trap 'rm -rf "$STORE_DIR"' EXIT
  MNOTE_DB="$STORE_DIR/mnote.db"
fi
SERVER=(.venv/bin/mnote-mcp --db "$MNOTE_DB" --demo)
# The Inspector gives a server 15 s to start by default; on a busy machine mnote-mcp may need longer.
CONNECT=(--connect-timeout "${INSPECTOR_CONNECT_TIMEOUT_MS:-60000}")

# List the tools (and lint their schemas for portability).
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "${SERVER[@]}" --method tools/list --strict

# Read a page of the demo workspace, with a trace id in the request _meta.
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "${SERVER[@]}" --method tools/call --tool-name mnote.page.get \
  --tool-args-json '{"workspaceId": "ws_1", "documentId": "doc_1"}' \
  --tool-metadata mnote/traceId=trace_inspector --format json

# The prompts (page workflows a host offers in a menu), then one rendered with its page attached, in
# English (the server speaks zh-CN unless told otherwise).
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "${SERVER[@]}" --method prompts/list
"${INSPECTOR[@]}" --cli "${CONNECT[@]}" "${SERVER[@]}" --locale en --method prompts/get --prompt-name summarise_page \
  --prompt-args workspaceId=ws_1 documentId=doc_1

# Completion and confirmation need a session: examples/inspector-session.sh (the Inspector's mcpdo).

# The web UI instead: npx @modelcontextprotocol/inspector@2.12.0 .venv/bin/mnote-mcp --db ~/mnote-inspector.db --demo
