// Stopping and outages against a real control plane: a runtime process stopped by
// SIGTERM during an interactive approval wait exits 0 within its drain timeout and
// leaves the task suspended for another runtime; a step before a durable wait is not
// repeated by the lease that resumes the task; and a control plane that goes away and
// comes back on the same address (the bbolt store) costs a running task nothing.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, TaskState, type AgentplaneClient } from "../src/index.js";
import { Worker } from "../src/worker.js";
import { emailHandler } from "./drain-handler.js";
import { agentSpec, startServer, type TestServer } from "./server.js";

let srv: TestServer;
let client: AgentplaneClient;
let dir: string;

before(async () => {
  srv = await startServer();
  client = createClient({ address: srv.address, token: srv.token });
  dir = mkdtempSync(path.join(tmpdir(), "agentplane-ts-drain-"));
});

after(async () => {
  client?.close();
  await srv?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const gatedSpec = { ...agentSpec, name: "sdk-ts-worker" };

async function startGated(queue: string) {
  const res = await client.tasks.startTask({
    source: { case: "spec", value: gatedSpec },
    queue,
    interruptPolicy: { policy: { case: "allowlist", value: { tools: ["send_email"] } } },
  });
  return res.task!.taskId;
}

async function approveAll(taskId: string) {
  const list = await client.hitl.listInterrupts({ taskId });
  let n = 0;
  for (const it of list.interrupts) {
    await client.hitl.resolveInterrupt({ interruptId: it.interruptId, decision: { case: "approve", value: {} }, argsDigest: it.argsDigest });
    n++;
  }
  return n;
}

async function until(what: string, cond: () => Promise<boolean>) {
  for (let i = 0; i < 300; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

async function said(taskId: string, text: string) {
  const events = await client.tasks.listTaskEvents({ taskId, pageSize: 500 });
  return events.events.filter((e) => e.payload.case === "message" && e.payload.value.parts.some((p) => p.kind.case === "text" && p.kind.value === text)).length;
}

function effectsFile(name: string) {
  const f = path.join(dir, name);
  writeFileSync(f, "");
  return f;
}

const lines = (f: string) => readFileSync(f, "utf8").split("\n").filter(Boolean).length;

test("drain: SIGTERM during an interactive wait exits 0 and suspends the task; a second runtime finishes it, the tool runs once", async () => {
  const effects = effectsFile("drain");
  const id = await startGated("d-drain");
  const runtime = path.join(path.dirname(fileURLToPath(import.meta.url)), "drain-runtime.js");
  const proc = spawn(process.execPath, [runtime, srv.address, srv.token, effects, "d-drain"], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("WAITING\n")) resolve();
    });
    proc.once("exit", (code) => reject(new Error(`the runtime exited (${code}) before the call waited: ${out}`)));
  });
  proc.kill("SIGTERM");
  assert.equal(await exited, 0, "the runtime's exit code after SIGTERM");
  const task = (await client.tasks.getTask({ taskId: id })).task!;
  assert.equal(task.state, TaskState.INPUT_REQUIRED, "suspended, waiting for the decision");
  assert.equal(task.attempt, 1);

  assert.equal(await approveAll(id), 1);
  const w = new Worker(client.runtime, emailHandler(effects, () => {}), { runtimeId: "d-second", queues: ["d-drain"], pollWaitMs: 1000 });
  const running = w.run();
  try {
    await until("completed", async () => (await client.tasks.getTask({ taskId: id })).task!.state === TaskState.COMPLETED);
  } finally {
    await w.stop();
    await running;
  }
  assert.equal(lines(effects), 1, "the tool ran once");
  assert.equal(await said(id, "working on it"), 1, "the acknowledgement was said once");
});

test("step: a durable wait does not repeat the message said before it", async () => {
  const effects = effectsFile("step");
  const id = await startGated("d-step");
  const w = new Worker(client.runtime, emailHandler(effects, () => {}), { runtimeId: "d-step", queues: ["d-step"], pollWaitMs: 1000, delivery: "durable" });
  const running = w.run();
  try {
    await until("the durable wait", async () => (await client.tasks.getTask({ taskId: id })).task!.state === TaskState.INPUT_REQUIRED);
    await until("an approval", async () => (await approveAll(id)) > 0);
    await until("completed", async () => (await client.tasks.getTask({ taskId: id })).task!.state === TaskState.COMPLETED);
  } finally {
    await w.stop();
    await running;
  }
  assert.equal(lines(effects), 1, "the tool ran once");
  assert.equal(await said(id, "working on it"), 1, "the acknowledgement was said once across the durable wait");
});

test("outage: a control plane down for seconds and back on the same address costs a running task nothing", async () => {
  const res = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, queue: "d-outage" });
  const id = res.task!.taskId;
  let down!: () => void;
  const serverDown = new Promise<void>((r) => (down = r));
  let leased!: () => void;
  const isLeased = new Promise<void>((r) => (leased = r));
  const w = new Worker(
    client.runtime,
    async (t) => {
      await t.say("before");
      leased();
      await serverDown;
      await t.say("after"); // made while the control plane is away: repeated until it is back
      await t.complete({ text: "done" });
    },
    { runtimeId: "d-outage", queues: ["d-outage"], pollWaitMs: 1000 },
  );
  const running = w.run();
  try {
    await isLeased;
    await srv.kill();
    down();
    await new Promise((r) => setTimeout(r, 4_000)); // longer than the old budget of four attempts
    await srv.restart();
    await until("completed", async () => [TaskState.COMPLETED, TaskState.FAILED].includes((await client.tasks.getTask({ taskId: id })).task!.state));
  } finally {
    await w.stop();
    await running;
  }
  const task = (await client.tasks.getTask({ taskId: id })).task!;
  assert.equal(task.state, TaskState.COMPLETED, `task ${TaskState[task.state]} ${task.failure?.reason ?? ""}: ${task.failure?.message ?? ""}`);
  assert.equal(task.attempt, 1, "completed on the lease it held");
});
