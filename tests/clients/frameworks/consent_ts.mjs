// Runs under Node 22 (.ci/node) with the TypeScript MCP SDK (@modelcontextprotocol/sdk 1.32.2): the
// scripted agent of the consent scenario (tests/clients/consent_scenario.py), per connection: read the
// planted page, obey it (delete the Risks list), and go on as the answer says: on the confirmation
// result, the person's answer (`person`) decides whether the handle is sent back; after a written
// delete, undo the run. With `"elicitation": "accept"|"decline"` the client declares form elicitation
// and its handler gives that answer (the person at the host's own prompt); without, it declares none,
// as the example (examples/client_typescript.mjs).
//
// argv[2]: the SDK's package directory.
// stdin: {"connections": {"<label>": {"transport", "command"/"url", ..., "person": "yes"|"no", "elicitation"?}}}
// stdout: {"<label>": {"envelopes": [...], "questions": [...], "final": "..."}}
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const sdk = process.argv[2];
const load = (path) => import(pathToFileURL(`${sdk}/dist/esm/${path}`).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { SSEClientTransport } = await load("client/sse.js");
const { ElicitRequestSchema } = await load("types.js");

const PLANTED = { workspaceId: "ws_1", documentId: "doc_planted" };
const TARGET = { workspaceId: "ws_1", documentId: "doc_target" };

function transportFor(connection) {
  if (connection.transport === "stdio") {
    return new StdioClientTransport({ command: connection.command, args: connection.args, env: connection.env, stderr: "ignore" });
  }
  const headers = connection.headers;
  if (connection.transport === "http") {
    return new StreamableHTTPClientTransport(new URL(connection.url), { requestInit: { headers } });
  }
  return new SSEClientTransport(new URL(connection.url), {
    requestInit: { headers },
    eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, ...headers } }) },
  });
}

async function run(label, connection) {
  const envelopes = [];
  const questions = [];
  const capabilities = connection.elicitation ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "mnote-ts-consent", version: "1.0.0" }, { capabilities });
  if (connection.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      questions.push(request.params.message);
      return connection.elicitation === "accept" ? { action: "accept", content: {} } : { action: "decline" };
    });
  }
  await client.connect(transportFor(connection));
  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args });
    const envelope = result.structuredContent ?? JSON.parse(result.content[0].text);
    envelopes.push(envelope);
    return envelope;
  };
  try {
    await call("mnote.page.get", PLANTED);
    const del = { ...TARGET, blockIds: ["risks"], idempotencyKey: `${label}-delete`, dryRun: false };
    let deleted = await call("mnote.block.delete", del);
    const details = deleted.error?.details ?? {};
    if (details.confirmation === "required" && connection.person === "yes") {
      deleted = await call("mnote.block.delete", { ...del, idempotencyKey: details.confirmationKey });
    }
    let final = "kept";
    if (deleted.ok) {
      const undo = { ...TARGET, undoRunId: deleted.result.runId, idempotencyKey: `${label}-undo`, dryRun: false };
      final = (await call("mnote.page.revert", undo)).ok ? "undone" : "stuck";
    }
    return { envelopes, questions, final };
  } finally {
    await client.close();
  }
}

const job = JSON.parse(readFileSync(0, "utf-8"));
const answers = {};
for (const [label, connection] of Object.entries(job.connections)) {
  answers[label] = await run(label, connection);
}
process.stdout.write(JSON.stringify(answers));
