// The runtime worker against a real control plane: a gated call approved while the
// runtime waits (interactive), a durable suspend resumed on a later lease, a cancel
// seen through the heartbeat, the capacity bound, a lost lease, a replay with the
// task's history, client tool outputs, a verdict and a chat pause, and a graceful stop.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, DecisionType, InterruptKind, Reason, StopReason, TaskState, type AgentplaneClient } from "../src/index.js";
import { Failure, TaskStopped, Worker, type Task } from "../src/worker.js";
import { agentSpec, startServer, type TestServer } from "./server.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

let srv: TestServer;
let client: AgentplaneClient;

before(async () => {
  srv = await startServer();
  client = createClient({ address: srv.address, token: srv.token });
});

after(async () => {
  client?.close();
  await srv?.stop();
});

const gatedSpec = {
  ...agentSpec,
  name: "sdk-ts-worker",
  tools: [
    {
      type: "function",
      function: { name: "send_email", description: "Send an email", parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"], additionalProperties: false } },
    },
  ],
};

async function start(queue: string, gated = false) {
  const res = await client.tasks.startTask({
    source: { case: "spec", value: gated ? gatedSpec : agentSpec },
    queue,
    interruptPolicy: gated ? { policy: { case: "allowlist", value: { tools: ["send_email"] } } } : undefined,
  });
  return res.task!.taskId;
}

async function approve(interruptId: string) {
  const it = await client.hitl.getInterrupt({ interruptId });
  await client.hitl.resolveInterrupt({ interruptId, decision: { case: "approve", value: {} }, argsDigest: it.interrupt!.argsDigest });
}

async function until(what: string, cond: () => Promise<boolean>) {
  for (let i = 0; i < 150; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function state(id: string) {
  return (await client.tasks.getTask({ taskId: id })).task!.state;
}

test("interactive: the gated call waits for the approval, then runs once", async () => {
  const id = await start("w-interactive", true);
  let ran = 0;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      const call = { id: "c1", name: "send_email", node: "sdk-ts-worker", argumentsJson: '{"to":"a@example.com"}', onInterrupt: (it: { interruptId: string }) => void approve(it.interruptId) };
      const gate = await t.toolCall(call);
      assert.equal(gate.allowed, true);
      assert.equal(gate.decision?.type, DecisionType.APPROVE);
      ran++;
      await t.toolResult(call, { sent: true });
      await t.complete({ text: "sent" });
    },
    { runtimeId: "w1", queues: ["w-interactive"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    w.stop();
    await running;
  }
  assert.equal(ran, 1);
  const events = await client.tasks.listTaskEvents({ taskId: id });
  const kinds = events.events.map((e) => e.payload.case);
  assert.ok(kinds.includes("toolGated") && kinds.includes("toolCall") && kinds.includes("toolResult"), kinds.join(","));
});

test("durable: the task suspends, and the next lease carries the decision", async () => {
  const id = await start("w-durable", true);
  const attempts: string[] = [];
  let ran = 0;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      const gate = await t.toolCall({
        id: "c1",
        name: "send_email",
        node: "sdk-ts-worker",
        argumentsJson: '{"to":"b@example.com"}',
        onInterrupt: (it) => void setTimeout(() => void approve(it.interruptId), 200),
      }).catch((e) => {
        attempts.push((e as Error).name);
        throw e;
      });
      attempts.push("allowed");
      assert.equal(gate.allowed, true);
      ran++;
      await t.toolResult(gate.call, "ok");
      await t.complete();
    },
    { runtimeId: "w2", queues: ["w-durable"], pollWaitMs: 1000, delivery: "durable" },
  );
  const running = w.run();
  try {
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    w.stop();
    await running;
  }
  assert.deepEqual(attempts, ["Suspended", "allowed"]);
  assert.equal(ran, 1);
});

test("cancel: the heartbeat aborts the task's signal", async () => {
  const id = await start("w-cancel");
  let reason: unknown;
  let said = false;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      // The handler writes nothing after the cancel: only the heartbeat can tell it.
      // (A write would be refused with LEASE_LOST, a stop of another kind.)
      await t.say("working");
      said = true;
      if (!t.signal.aborted) await new Promise((resolve) => t.signal.addEventListener("abort", resolve, { once: true }));
      reason = t.signal.reason;
    },
    { runtimeId: "w3", queues: ["w-cancel"], pollWaitMs: 1000, heartbeatFraction: 0.01 },
  );
  const running = w.run();
  try {
    await until("working", async () => said);
    await client.tasks.cancelTask({ taskId: id, reason: "enough" });
    await until("the handler stopped", async () => reason !== undefined);
  } finally {
    w.stop();
    await running;
  }
  assert.ok(reason instanceof TaskStopped && reason.kind === "canceled", String(reason));
  assert.equal(await state(id), TaskState.CANCELED);
});

test("capacity: at most `capacity` handlers at once; a throwing handler fails its task", async () => {
  const ids = [await start("w-cap"), await start("w-cap"), await start("w-cap")];
  const bad = await start("w-cap");
  let now = 0;
  let most = 0;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      now++;
      most = Math.max(most, now);
      try {
        if (t.id === bad) throw new Error("boom");
        await new Promise((r) => setTimeout(r, 100));
        await t.complete();
      } finally {
        now--;
      }
    },
    { runtimeId: "w4", queues: ["w-cap"], pollWaitMs: 1000, capacity: 2 },
  );
  const running = w.run();
  try {
    for (const id of ids) await until(`${id} completed`, async () => (await state(id)) === TaskState.COMPLETED);
    await until("the bad task failed", async () => (await state(bad)) === TaskState.FAILED);
  } finally {
    w.stop();
    await running;
  }
  assert.ok(most <= 2 && most >= 1, `most ${most}`);
  const failed = await client.tasks.getTask({ taskId: bad });
  assert.ok(JSON.stringify(failed.task, (_, v) => (typeof v === "bigint" ? String(v) : v)).includes("runtime.error"));
});

test("lease lost: a write under a lease the task no longer has aborts the signal; the next lease runs", async () => {
  const id = await start("w-lost");
  const seen: string[] = [];
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      if (t.lease.attempt > 1 || seen.length > 0) {
        seen.push("second lease");
        await t.complete();
        return;
      }
      // Someone else ends this lease (here: the lease is handed back behind the worker's back).
      await client.runtime.failTask({ lease: t.ref, reason: "test.handback", message: "taken away", retry: true });
      const err = await t.say("still mine?").then(
        () => undefined,
        (e: { reason?: string }) => e,
      );
      seen.push(`write: ${err?.reason}`);
      const reason = t.signal.reason;
      seen.push(reason instanceof TaskStopped ? reason.kind : String(reason));
    },
    { runtimeId: "w5", queues: ["w-lost"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    w.stop();
    await running;
  }
  assert.deepEqual(seen, [`write: ${Reason.LEASE_LOST}`, StopReason.LEASE_LOST, "second lease"]);
});

test("replay after a crash: a runtime SIGKILLed after running a call; the next lease finds it reported and does not run it again", async () => {
  const crashSrv = await startServer({ config: "tasks:\n  lease_ttl: 1s\n" });
  const ap = createClient({ address: crashSrv.address, token: crashSrv.token });
  const dir = mkdtempSync(path.join(tmpdir(), "agentplane-ts-effects-"));
  const effects = path.join(dir, "effects");
  const runtime = path.join(path.dirname(fileURLToPath(import.meta.url)), "crash-runtime.js");
  const proc = spawn(process.execPath, [runtime, crashSrv.address, crashSrv.token, effects, "w-crash"], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const replay: string[] = [];
  try {
    const res = await ap.tasks.startTask({ source: { case: "spec", value: gatedSpec }, queue: "w-crash" });
    const id = res.task!.taskId;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      proc.stdout!.on("data", (d) => {
        out += d;
        if (out.includes("RAN\n")) resolve();
      });
      proc.once("exit", (code) => reject(new Error(`the crashing runtime exited (${code}) before running the call: ${out}`)));
    });
    proc.kill("SIGKILL"); // no hand-back: the lease just stops being heartbeaten
    await exited;

    const w = new Worker(
      ap.runtime,
      async (t: Task) => {
        const call = { id: "c1", name: "send_email", node: "sdk-ts-worker", argumentsJson: '{"to":"c@example.com"}' };
        const gate = await t.toolCall(call);
        const calls: string[] = [];
        for await (const ev of t.history()) if (ev.payload.case === "toolCall") calls.push(ev.payload.value.callId);
        replay.push(`attempt ${t.attempt}: reported=${gate.reported} result=${gate.resultReported} allowed=${gate.allowed} history=${calls.join(",")}`);
        if (gate.reported && !gate.resultReported) await t.toolResult(call, "lost in a crash", true);
        await t.complete();
      },
      { runtimeId: "ts-replaying", queues: ["w-crash"], pollWaitMs: 1000 },
    );
    const running = w.run();
    try {
      await until("completed", async () => (await ap.tasks.getTask({ taskId: id })).task!.state === TaskState.COMPLETED);
    } finally {
      await w.stop();
      await running;
    }
    assert.deepEqual(replay, ["attempt 2: reported=true result=false allowed=false history=c1"]);
    assert.equal(readFileSync(effects, "utf8"), "ran c1\n", "the tool ran again after the crash");
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    ap.close();
    await crashSrv.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("replay after a hand-back: a call an earlier lease reported comes back as reported, and is not run again", async () => {
  const res = await client.tasks.startTask({ source: { case: "spec", value: gatedSpec }, queue: "w-replay" });
  const id = res.task!.taskId;
  const gates: string[] = [];
  let ran = 0;
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      const call = { id: "c1", name: "send_email", node: "sdk-ts-worker", argumentsJson: '{"to":"c@example.com"}' };
      const gate = await t.toolCall(call);
      gates.push(gate.reported ? "reported" : gate.allowed ? "allowed" : "rejected");
      if (gate.reported) {
        const calls: string[] = [];
        for await (const ev of t.history()) if (ev.payload.case === "toolCall") calls.push(ev.payload.value.callId);
        gates.push(`history: ${calls.join(",")}`);
        if (!gate.resultReported) await t.toolResult(call, "lost in a crash", true);
        await t.complete();
        return;
      }
      ran++;
      // The runtime "crashes" after running the tool, before reporting its result.
      throw new Failure("test.crash", "crashed mid-call", true);
    },
    { runtimeId: "w6", queues: ["w-replay"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    w.stop();
    await running;
  }
  assert.deepEqual(gates, ["allowed", "reported", "history: c1"]);
  assert.equal(ran, 1);
});


test("tool outputs: a function tool the client runs; the next lease carries its output", async () => {
  const spec = {
    ...agentSpec,
    name: "sdk-ts-outputs",
    tools: [{ type: "function", function: { name: "lookup", description: "Look a key up", parameters: { type: "object", properties: { key: { type: "string" } }, required: ["key"], additionalProperties: false } } }],
  };
  const res = await client.tasks.startTask({ source: { case: "spec", value: spec }, queue: "w-outputs" });
  const id = res.task!.taskId;
  const seen: unknown[] = [];
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      const [out] = t.continueToolResults;
      if (out) {
        seen.push([out.callId, toJson(ValueSchema, out.result!)]);
        await t.complete({ structured: toJson(ValueSchema, out.result!) });
        return;
      }
      const gate = await t.toolCall({ id: "c1", name: "lookup", node: "sdk-ts-outputs", argumentsJson: '{"key":"k"}' });
      assert.equal(gate.allowed, true, gate.reason);
      const its = await t.waitForToolOutputs("sdk-ts-outputs", gate);
      seen.push(its.map((it) => InterruptKind[it.kind]));
    },
    { runtimeId: "w8", queues: ["w-outputs"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await until("waiting for the output", async () => (await state(id)) === TaskState.INPUT_REQUIRED);
    await client.tasks.continueTask({
      taskId: id,
      input: { case: "toolOutputs", value: { outputs: [{ callId: "c1", result: fromJson(ValueSchema, { value: 7 }) }] } },
    });
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    await w.stop();
    await running;
  }
  assert.deepEqual(seen, [["TOOL_OUTPUT_REQUIRED"], ["c1", { value: 7 }]]);
});

test("verdict and pause: an evaluator's verdict is recorded; a chat turn ends and ContinueTask resumes it", async () => {
  const graph = readFileSync(path.join(repoRoot, "examples", "graphs", "write-review.yaml"));
  const res = await client.tasks.startTask({ source: { case: "document", value: graph }, queue: "w-verdict" });
  const id = res.task!.taskId;
  const open: string[] = [];
  const said: string[] = [];
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      if (t.continueMessages.length > 0) {
        said.push(t.continueMessages[0].parts[0]?.kind.value as string);
        await t.complete({ text: "thanks" });
        return;
      }
      const v = await t.recordVerdict({ node: "critic", result: { verdict: "pass", rationale: "no errors found" }, raised: ["cite the source"] });
      open.push(...v.openObligations.map((o) => o.text));
      await t.pause("reviewed; anything else?", "lead");
    },
    { runtimeId: "w9", queues: ["w-verdict"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await until("paused", async () => (await state(id)) === TaskState.INPUT_REQUIRED);
    const { verdicts } = await client.tasks.listVerdicts({ taskId: id });
    assert.deepEqual(verdicts.map((v) => [v.node, v.result?.verdict]), [["critic", "pass"]]);
    await client.tasks.continueTask({ taskId: id, input: { case: "message", value: { parts: [{ kind: { case: "text", value: "no" } }] } } });
    await until("completed", async () => (await state(id)) === TaskState.COMPLETED);
  } finally {
    await w.stop();
    await running;
  }
  assert.deepEqual(open, ["cite the source"]);
  assert.deepEqual(said, ["no"]);
});

// runUntilStopped runs a handler that waits for its task's signal, stops the worker the
// given way once the handler runs, and returns why the task was stopped and its state.
async function runUntilStopped(queue: string, stop: (w: Worker, ctl: AbortController) => Promise<void>) {
  const id = await start(queue);
  let reason: unknown;
  let started!: () => void;
  const began = new Promise<void>((r) => (started = r));
  const ctl = new AbortController();
  const w = new Worker(
    client.runtime,
    async (t: Task) => {
      started();
      await new Promise((resolve) => t.signal.addEventListener("abort", resolve, { once: true }));
      reason = t.signal.reason;
    },
    { runtimeId: queue, queues: [queue], pollWaitMs: 1000 },
  );
  const running = w.run(ctl.signal);
  await began;
  await stop(w, ctl);
  await running;
  assert.ok(reason instanceof TaskStopped && reason.kind === "stopping", String(reason));
  assert.equal(await state(id), TaskState.SUBMITTED, "handed back to the queue");
}

test("shutdown: aborting run's signal stops the running task and hands it back to the queue", async () => {
  await runUntilStopped("w-stop", async (_, ctl) => ctl.abort());
});

test("graceful stop: stop(drainMs) stops a task still running after the drain and hands it back", async () => {
  await runUntilStopped("w-drain", async (w) => assert.equal(await w.stop(200), false, "the task ended on its own"));
});
