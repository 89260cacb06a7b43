// Task.modelCall against a real control plane whose one budget (10 tokens a day) has
// on_limit: approve: allowed while it has room, then each model call waits for a
// person; an approval lets it run, a rejection fails the task.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient, InterruptKind, MessageRole, TaskState, type AgentplaneClient } from "../src/index.js";
import { ModelCallRejected, Worker, type Task } from "../src/worker.js";
import { agentSpec, startServer, type TestServer } from "./server.js";

let srv: TestServer;
let client: AgentplaneClient;

before(async () => {
  srv = await startServer({ config: "budgets:\n  rules:\n    - {name: gated, period: day, max_tokens: 10, on_limit: approve}\n" });
  client = createClient({ address: srv.address, token: srv.token });
});

after(async () => {
  client?.close();
  await srv?.stop();
});

async function decide(taskId: string, callId: string, decision: "approve" | "reject") {
  for (let i = 0; i < 150; i++) {
    const res = await client.hitl.listInterrupts({ taskId });
    const it = res.interrupts.find((x) => x.callId === callId && x.kind === InterruptKind.MODEL_CALL_APPROVAL);
    if (it) {
      assert.equal(it.request.case === "approval" && it.request.value.modelCall?.budget, "gated");
      await client.hitl.resolveInterrupt({
        interruptId: it.interruptId,
        decision: decision === "approve" ? { case: "approve", value: {} } : { case: "reject", value: { reason: "no more" } },
      });
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`no model-call approval for ${callId}`);
}

test("modelCall: allowed with budget left, then approved, then rejected", async () => {
  const res = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, queue: "budget" });
  const id = res.task!.taskId;
  let second: unknown = "unset";
  let third: unknown = "unset";
  let checks = false;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      checks = t.lease.checkModelCalls;
      await t.modelCall({ id: "m1", node: "n", model: "m" });
      await t.report({
        payload: { case: "message", value: { role: MessageRole.ASSISTANT, model: "m", parts: [{ kind: { case: "text", value: "thinking" } }], usage: { totalTokens: 20 } } },
      });
      second = await t.modelCall({ id: "m2", node: "n", model: "m" }).catch((e: unknown) => e);
      third = await t.modelCall({ id: "m3", node: "n", model: "m" }).catch((e: unknown) => e);
      throw third;
    },
    { runtimeId: "b1", queues: ["budget"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await decide(id, "m2", "approve");
    await decide(id, "m3", "reject");
    for (let i = 0; i < 150 && (await client.tasks.getTask({ taskId: id })).task!.state !== TaskState.FAILED; i++) await new Promise((r) => setTimeout(r, 100));
  } finally {
    w.stop();
    await running;
  }
  assert.equal(checks, true);
  assert.equal(second, undefined);
  assert.ok(third instanceof ModelCallRejected, `${String(third)}: ${(third as Error).message}`);
  const task = (await client.tasks.getTask({ taskId: id })).task!;
  assert.equal(task.state, TaskState.FAILED);
  assert.equal(task.failure?.reason, "budget.model_call_rejected");
});
