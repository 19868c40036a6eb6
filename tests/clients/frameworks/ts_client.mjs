// Runs under Node 22 (.ci/node) with the TypeScript MCP SDK (@modelcontextprotocol/sdk 1.32.2, installed
// into .ci/node by .ci/run): per connection, the SDK's Client over its stdio, streamable HTTP or SSE
// transport lists the tools and makes the given calls. The SDK validates every tool result that has
// structuredContent against the tool's outputSchema (from tools/list) and throws if it does not match;
// a thrown call is reported as such, never hidden.
//
// A connection with `"elicitation": "accept"|"decline"` declares form elicitation and answers every
// question so (the person), recording the questions (issue 31: a declining handler had its delete written).
//
// argv[2]: the SDK's package directory. stdin: {"connections": {"<label>": {..., "calls": [{name, arguments}]}}}
// stdout: {"<label>": {"protocolVersion", "tools": [{name, inputSchema, outputSchema?}], "results": [...], "questions": [...]}}
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const sdk = process.argv[2];
const load = (path) => import(pathToFileURL(`${sdk}/dist/esm/${path}`).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { SSEClientTransport } = await load("client/sse.js");
const { ElicitRequestSchema } = await load("types.js");

function transportFor(connection) {
  if (connection.transport === "stdio") {
    return new StdioClientTransport({
      command: connection.command,
      args: connection.args,
      env: connection.env,
      stderr: "ignore",
    });
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

// Milliseconds this client waits to connect and for an answer: tests/support/timing.py's patience(60), from the harness.
const TIMEOUT = Number(process.env.MNOTE_TEST_CLIENT_TIMEOUT ?? "60") * 1000;

async function run(connection, calls) {
  const questions = [];
  const capabilities = connection.elicitation ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "mnote-ts-test", version: "1.0.0" }, { capabilities });
  if (connection.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      questions.push(request.params.message);
      return connection.elicitation === "accept" ? { action: "accept", content: {} } : { action: "decline" };
    });
  }
  await client.connect(transportFor(connection), { timeout: TIMEOUT });
  try {
    const listed = await client.listTools(undefined, { timeout: TIMEOUT });
    const results = [];
    for (const call of calls) {
      try {
        const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, { timeout: TIMEOUT });
        results.push({
          name: call.name,
          isError: result.isError === true,
          structuredContent: result.structuredContent ?? null,
          text: (result.content ?? []).filter((part) => part.type === "text").map((part) => part.text),
        });
      } catch (error) {
        results.push({ name: call.name, thrown: String(error) });
      }
    }
    return {
      protocolVersion: client.transport?.protocolVersion ?? null,
      tools: listed.tools.map((tool) => ({ name: tool.name, inputSchema: tool.inputSchema, outputSchema: tool.outputSchema })),
      results,
      questions,
    };
  } finally {
    await client.close();
  }
}

const job = JSON.parse(readFileSync(0, "utf-8"));
const answers = {};
for (const [label, connection] of Object.entries(job.connections)) {
  answers[label] = await run(connection, connection.calls);
}
process.stdout.write(JSON.stringify(answers));
