// mnote from the TypeScript MCP SDK (@modelcontextprotocol/sdk 1.32): read a page, dry-run an append,
// print both envelopes. The envelope is the result's text (the default form); a server run with
// --result-form both also sends it as structuredContent, which the SDK checks against outputSchema.
//
//   npm install @modelcontextprotocol/sdk@1.32.2
//   MNOTE_COMMAND=/abs/path/.venv/bin/mnote-mcp node client_typescript.mjs ws_1 doc_1
//   MNOTE_URL=http://127.0.0.1:8765/mcp MNOTE_TOKEN=... node client_typescript.mjs ws_1 doc_1   # over HTTP
import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const runId = process.env.MNOTE_RUN_ID || `run_${randomUUID().slice(0, 12)}`; // joins this client's calls

function transport() {
  if (process.env.MNOTE_URL) {
    const headers = { Authorization: `Bearer ${process.env.MNOTE_TOKEN}`, "X-Mnote-Run-Id": runId };
    return new StreamableHTTPClientTransport(new URL(process.env.MNOTE_URL), { requestInit: { headers } });
  }
  const args = process.env.MNOTE_DB ? ["--db", process.env.MNOTE_DB] : [];
  const env = { PATH: process.env.PATH ?? "", MNOTE_RUN_ID: runId };
  return new StdioClientTransport({ command: process.env.MNOTE_COMMAND || "mnote-mcp", args, env });
}

const [workspaceId, documentId] = process.argv.slice(2);
const client = new Client({ name: "mnote-example", version: "1.0.0" });
await client.connect(transport());
await client.listTools(); // the SDK learns each tool's outputSchema (if any) here
const envelope = (result) => result.structuredContent ?? JSON.parse(result.content[0].text);
const page = { workspaceId, documentId };
const read = await client.callTool({ name: "mnote.page.get", arguments: page });
console.log(JSON.stringify(envelope(read)));
const plan = { content: [{ type: "paragraph", text: "Appended." }], mode: "append" };
const write = { ...page, ...plan, idempotencyKey: `${runId}-append`, dryRun: true };
const dryRun = await client.callTool({ name: "mnote.page.save", arguments: write });
console.log(JSON.stringify(envelope(dryRun)));
await client.close();
