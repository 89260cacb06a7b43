// An MCP client nobody here wrote (@modelcontextprotocol/sdk) against the control
// plane's /mcp, driven by server/mcp_interop_test.go. It prints one JSON object per
// line, {"step": ..., ...}, and reads nothing: the Go test plays the runtime.
//
// Environment: MCP_URL (http://127.0.0.1:PORT/mcp), MCP_TOKEN (a bearer token).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const say = (step, body) => console.log(JSON.stringify({ step, ...body }));

const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "agentplane-interop", version: "1.0.0" });
await client.connect(transport);
say("connected", { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null });

const { tools } = await client.listTools();
say("tools", { tools: tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema, outputSchema: t.outputSchema ?? null })) });

// A call that completes, with progress.
const progress = [];
const done = await client.callTool(
  { name: "echo", arguments: { input: "hello" }, _meta: { "agentplane/request_id": "interop-1" } },
  undefined,
  { onprogress: (p) => progress.push(p), timeout: 60000 },
);
say("completed", { result: done, progress });

// A call canceled after its first progress notification: the SDK aborts the request
// and sends notifications/cancelled.
const abort = new AbortController();
const seen = [];
try {
  await client.callTool({ name: "echo", arguments: { input: "long" }, _meta: { "agentplane/request_id": "interop-2" } }, undefined, {
    signal: abort.signal,
    timeout: 60000,
    onprogress: (p) => {
      seen.push(p);
      if (seen.length === 1) abort.abort("the user stopped it");
    },
  });
  say("canceled", { error: "the call returned instead of being canceled", progress: seen });
} catch (e) {
  say("canceled", { error: String(e), progress: seen });
}

// The same request id attaches to the canceled call's task: it answers once the
// cancellation has reached the control plane (the notification is sent on its own,
// so closing right away could abort it).
const after = await client.callTool(
  { name: "echo", arguments: { input: "long" }, _meta: { "agentplane/request_id": "interop-2" } },
  undefined,
  { timeout: 60000 },
);
say("reattached", { result: after });

await client.close();
say("closed", {});
