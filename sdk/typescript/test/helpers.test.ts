// The task handle and the decision helpers against a real control plane, with a Worker
// as the runtime. The regions between "snippet:" and "end snippet" are in
// docs/clients.md verbatim (TestDocSnippets in client/ checks that they match).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient, Code, ConnectError, AgentplaneError, InterruptState, TaskState, type AgentplaneClient, type Task as TaskMessage } from "../src/index.js";
import { Worker, type Task } from "../src/worker.js";
import { agentSpec, startServer, type TestServer } from "./server.js";

let srv: TestServer;
let ap: AgentplaneClient;
let runtime: Worker;
let running: Promise<void>;
const queue = "helpers";

const spec = {
  ...agentSpec,
  name: "sdk-ts-helpers",
  tools: [
    {
      type: "function",
      function: { name: "send_email", description: "Send an email", parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"], additionalProperties: false } },
    },
  ],
};

// By its input the runtime makes a gated call of send_email, pauses for a chat turn, or
// waits for a client tool's output.
async function handler(task: Task) {
  if (task.inputText === "chat") {
    const said = task.continueMessages.at(-1);
    if (said) return task.complete({ text: `you said ${text(said.parts)}` });
    return task.pause("what next?", "sdk-ts-helpers");
  }
  if (task.inputText === "weather") {
    const [out] = task.continueToolResults;
    if (out) return task.complete({ text: `weather ${out.result?.kind.value}` });
    const gate = await task.toolCall({ id: "w1", name: "get_weather", node: "sdk-ts-helpers", argumentsJson: '{"city":"Oslo"}' });
    await task.waitForToolOutputs("sdk-ts-helpers", gate);
    return;
  }
  const call = { id: "c1", name: "send_email", node: "sdk-ts-helpers", argumentsJson: '{"to":"ada@example.com"}' };
  const gate = await task.toolCall(call);
  if (!gate.allowed) return task.complete({ text: "not sent" });
  await task.toolResult(gate.call ?? call, true);
  await task.complete({ text: `sent ${gate.argumentsJson}` });
}

function text(parts: { kind: { case?: string; value?: unknown } }[] = []): string {
  return parts.map((p) => (p.kind.case === "text" ? String(p.kind.value) : "")).join("\n");
}

function output(task: TaskMessage, want: string) {
  assert.equal(TaskState[task.state], "COMPLETED", JSON.stringify(task.failure));
  assert.equal(text(task.output?.message?.parts), want);
}

before(async () => {
  srv = await startServer();
  ap = createClient({ address: srv.address, token: srv.token });
  runtime = new Worker(ap.runtime, handler, { runtimeId: "helpers", queues: [queue], pollWaitMs: 1000 });
  running = runtime.run();
});

after(async () => {
  await runtime?.stop();
  await running;
  ap?.close();
  await srv?.stop();
});

for (const decide of ["approve", "reject", "edit"]) {
  test(`${decide}: the helper reads the interrupt's digest and resolves with it`, async () => {
    // snippet: ts-approve
    const h = await ap.start({
      queue,
      source: { case: "spec", value: spec },
      input: { parts: [{ kind: { case: "text", value: "send it" } }] },
      // Every call of send_email waits for a person.
      interruptPolicy: { policy: { case: "allowlist", value: { tools: ["send_email"] } } },
    });
    await h.wait({ untilInputRequired: true }); // INPUT_REQUIRED: a call waits
    const [pending] = await h.interrupts();
    const id = pending.interruptId;
    if (decide === "approve") await ap.approve(id, { reason: "looks right" });
    if (decide === "reject") await ap.reject(id, "wrong recipient");
    if (decide === "edit") await ap.edit(id, { to: "grace@example.com" });
    const task = await h.wait(); // COMPLETED
    // end snippet
    output(task, { approve: 'sent {"to":"ada@example.com"}', reject: "not sent", edit: 'sent {"to":"grace@example.com"}' }[decide]!);
  });
}

test("a digest that is not the interrupt's is refused; a repeat with the same request id answers the first decision", async () => {
  const h = await ap.start({
    queue,
    source: { case: "spec", value: spec },
    input: { parts: [{ kind: { case: "text", value: "send it" } }] },
    interruptPolicy: { policy: { case: "allowlist", value: { tools: ["send_email"] } } },
  });
  assert.equal(h.started?.task?.taskId, h.id);
  await h.wait({ untilInputRequired: true });
  const [pending] = await ap.task(h.id).interrupts();
  assert.notEqual(pending.argsDigest, "");
  await assert.rejects(ap.approve(pending.interruptId, { argsDigest: "0000" }), (e: AgentplaneError) => e.reason === "INTERRUPT_ARGS_MISMATCH");
  // What the helper sends: the digest it read, and a request id.
  const sent: { argsDigest: string; requestId: string }[] = [];
  const spy = createClient({
    address: srv.address,
    token: srv.token,
    interceptors: [
      (next) => async (req) => {
        if (req.method.name !== "ResolveInterrupt") return next(req);
        sent.push(req.message as unknown as { argsDigest: string; requestId: string });
        throw new ConnectError("recorded, not sent", Code.Aborted);
      },
    ],
  });
  try {
    await assert.rejects(spy.approve(pending.interruptId), (e: AgentplaneError) => e.code === Code.Aborted);
  } finally {
    spy.close();
  }
  assert.equal(sent.length, 1);
  assert.equal(sent[0].argsDigest, pending.argsDigest);
  assert.notEqual(sent[0].requestId, "");
  const requestId = crypto.randomUUID();
  const first = await ap.reject(pending.interruptId, "no", { requestId });
  const again = await ap.reject(pending.interruptId, "no", { requestId });
  assert.equal(again.interruptId, first.interruptId);
  assert.equal(again.state, InterruptState.RESOLVED);
  await assert.rejects(ap.reject(pending.interruptId, "no"), (e: AgentplaneError) => e.reason === "INTERRUPT_ALREADY_RESOLVED");
  output(await ap.task(h.id).wait(), "not sent");
});

test("continue with a message and with tool outputs; wait runs through INPUT_REQUIRED until a cancel", async () => {
  // snippet: ts-continue
  const chat = await ap.start({ queue, source: { case: "spec", value: spec }, input: { parts: [{ kind: { case: "text", value: "chat" } }] } });
  await chat.wait({ untilInputRequired: true }); // the runtime paused for a turn
  await chat.continue("hello");
  const answered = await chat.wait();
  // end snippet
  output(answered, "you said hello");
  // The watch replays the task's earlier INPUT_REQUIRED; wait answers the state it is in.
  output(await ap.task(chat.id).wait({ untilInputRequired: true }), "you said hello");

  // snippet: ts-tool-outputs
  const weather = await ap.start({ queue, source: { case: "spec", value: spec }, input: { parts: [{ kind: { case: "text", value: "weather" } }] } });
  await weather.wait({ untilInputRequired: true }); // waits for get_weather's output
  await weather.continueToolOutputs([{ callId: "w1", result: "21C, clear" }]);
  const reported = await weather.wait();
  // end snippet
  output(reported, "weather 21C, clear");

  const stuck = await ap.start({ queue, source: { case: "spec", value: spec }, input: { parts: [{ kind: { case: "text", value: "chat" } }] } });
  await stuck.wait({ untilInputRequired: true });
  const waited = stuck.wait();
  await ap.task(stuck.id).cancel("no answer");
  assert.equal(TaskState[(await waited).state], "CANCELED");

  const aborted = new AbortController();
  const gaveUp = ap.task(stuck.id).wait({ signal: aborted.signal, untilInputRequired: false });
  aborted.abort();
  // A canceled task is terminal: wait answers at once whether or not the signal wins.
  await gaveUp.then(
    (t) => assert.equal(TaskState[t.state], "CANCELED"),
    (e: AgentplaneError) => assert.equal(e.code, Code.Canceled),
  );
});
