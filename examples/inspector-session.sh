#!/usr/bin/env bash
# The MCP Inspector's session CLI, mcpdo (in @modelcontextprotocol/inspector@2.12.0, beside the one-shot
# `--cli`), against mnote-mcp over stdio: one connection kept by a daemon of this shell's own, for what
# takes more than one request: completing a prompt's arguments, and a destructive write that asks the
# person first (form elicitation), answered from here. Uses the Inspector `bash .ci/run` installs under
# .ci/node, or else npx (the version the tests use; it wants Node 22).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${MCPDO:-}" ]; then read -r -a MCPDO <<<"$MCPDO"
elif [ -x .ci/node/node_modules/.bin/mcpdo ]; then MCPDO=(.ci/node/node_modules/.bin/mcpdo)
else MCPDO=(npx -y -p @modelcontextprotocol/inspector@2.12.0 mcpdo); fi
eval "$("${MCPDO[@]}" private)"  # a private daemon: this shell's connections only
# A store of this run's own, in a private directory removed at the end (MNOTE_DB names one to keep).
STORE_DIR=""
if [ -z "${MNOTE_DB:-}" ]; then
  STORE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mnote-session.XXXXXX")"   # mode 0700
  MNOTE_DB="$STORE_DIR/mnote.db"
fi
trap '"${MCPDO[@]}" daemon stop >/dev/null 2>&1 || true; [ -z "$STORE_DIR" ] || rm -rf "$STORE_DIR"' EXIT
DO=("${MCPDO[@]}" --connection mnote --format json)
# --refusals result: a declined write is an ok:false envelope, not an isError result (mcpdo exits 5 on those);
# --toolsets all: every tool (mnote.block.delete, below, is not in the default selection)
# (mcpdo gives a server 15 s to start by default; on a busy machine mnote-mcp may need longer)
"${MCPDO[@]}" connect --connection mnote --connect-timeout "${INSPECTOR_CONNECT_TIMEOUT_MS:-60000}" -- \
  .venv/bin/mnote-mcp --db "$MNOTE_DB" --demo --locale en --refusals result --toolsets all

# Complete arguments as a host's prompt menu does: a page of summarise_page from the start of its title
# ("Proj" -> doc_1), and the workspace of the page resource template (the ones you belong to).
"${DO[@]}" prompts/complete --complete-ref-type ref/prompt --complete-ref summarise_page \
  --complete-arg-name documentId --complete-arg-value Proj
"${DO[@]}" prompts/complete --complete-ref-type ref/resource \
  --complete-ref 'mnote://workspaces/{workspaceId}/pages/{documentId}' --complete-arg-name workspaceId

# Deleting a list with its children asks first: the call stops at the question (elicitationPending, its
# message says what would be deleted), and the answer decides. Declined: nothing is written.
DELETE='{"workspaceId": "ws_1", "documentId": "doc_1", "blockIds": ["list_1"], "idempotencyKey": "inspector-delete", "dryRun": false}'
question_id() { sed -n 's/.*"elicitationId": *"\([^"]*\)".*/\1/p'; }
asked=$("${DO[@]}" tools/call mnote.block.delete "$DELETE")
echo "$asked"
"${DO[@]}" elicitation/respond "$(question_id <<<"$asked")" --decline
# Accepted ('{}': the form has no fields): written, once.
asked=$("${DO[@]}" tools/call mnote.block.delete "$DELETE")
"${DO[@]}" elicitation/respond "$(question_id <<<"$asked")" '{}'
