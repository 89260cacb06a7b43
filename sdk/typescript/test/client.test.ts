// The client against a real control plane: every service, the error decoding, the
// bearer token and generated request ids.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  AgentplaneError,
  Code,
  ConnectError,
  createClient,
  DecisionType,
  GateOutcome,
  MessageRole,
  StartTaskRequestSchema,
  TaskState,
  type AgentplaneClient,
} from "../src/index.js";
import { agentSpec, startServer, type TestServer } from "./server.js";

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

async function rejects(p: Promise<unknown>): Promise<AgentplaneError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof AgentplaneError, `not an AgentplaneError: ${err}`);
    return err;
  }
  assert.fail("the call succeeded");
}

test("CapabilityService: GetCapabilities reports the locked key", async () => {
  const res = await client.capabilities.getCapabilities({});
  assert.ok(res.capabilities);
  assert.deepEqual(res.capabilities.lockedKeys, ["mcp"]);
});

test("SpecService: a spec as a plain object validates; rules and schema are listed", async () => {
  const ok = await client.specs.validateSpec({ source: { case: "spec", value: agentSpec } });
  assert.equal(ok.valid, true, JSON.stringify(ok.errors));
  const bad = await client.specs.validateSpec({
    source: { case: "spec", value: { apiVersion: "qar/v1", kind: "AgentSpec" } },
  });
  assert.equal(bad.valid, false);
  assert.ok(bad.errors.length > 0 && bad.errors[0].ruleId !== "");
  const rules = await client.specs.listRules({});
  assert.ok(rules.rules.length > 0);
  const rule = await client.specs.getRule({ ruleId: rules.rules[0].ruleId });
  assert.equal(rule.rule?.ruleId, rules.rules[0].ruleId);
  const schema = await client.specs.getSpecSchema({});
  assert.ok(Object.keys(schema).length > 0);
});

test("errors: an invalid spec carries its violations", async () => {
  const err = await rejects(
    client.tasks.startTask({ source: { case: "spec", value: { apiVersion: "qar/v1", kind: "AgentSpec", name: "x" } } }),
  );
  assert.equal(err.code, Code.InvalidArgument);
  assert.equal(err.codeName, "InvalidArgument");
  assert.ok(err instanceof ConnectError, "an AgentplaneError is a ConnectError");
  assert.equal(err.reason, "SPEC_INVALID");
  assert.ok(err.specViolations.length > 0, err.message);
  assert.ok(err.specViolations.every((v) => v.ruleId !== ""));
});

test("errors: a locked key names the key in the ErrorInfo metadata", async () => {
  const err = await rejects(
    client.tasks.startTask({ source: { case: "spec", value: agentSpec }, mcpServers: { servers: [] } }),
  );
  assert.equal(err.code, Code.FailedPrecondition);
  assert.equal(err.reason, "CONFIG_LOCKED_KEY");
  assert.equal(err.reasonMetadata.keys, "mcp");
  assert.equal(err.domain !== "", true);
});

test("errors: field violations of a BadRequest detail", async () => {
  const err = await rejects(
    client.tasks.startTask({ source: { case: "spec", value: agentSpec }, toolAxes: [{ tool: "" }] }),
  );
  assert.equal(err.code, Code.InvalidArgument);
  assert.deepEqual(
    err.fieldViolations.map((v) => v.field),
    ["tool_axes[0].tool"],
  );
});

test("errors: not found, and no token", async () => {
  const err = await rejects(client.tasks.getTask({ taskId: "no-such-task" }));
  assert.equal(err.code, Code.NotFound);
  assert.equal(err.reason, "TASK_NOT_FOUND");

  const anonymous = createClient({ address: srv.address });
  try {
    const denied = await rejects(anonymous.capabilities.getCapabilities({}));
    assert.equal(denied.code, Code.Unauthenticated);
  } finally {
    anonymous.close();
  }
});

test("a request without a request id is a new call each time, and the caller's message is left alone (as in Go)", async () => {
  const req = create(StartTaskRequestSchema, { source: { case: "spec", value: agentSpec }, labels: { sdk: "ts-reuse" } });
  const before = toBinary(StartTaskRequestSchema, req);
  const a = await client.tasks.startTask(req);
  const b = await client.tasks.startTask(req);
  assert.deepEqual(toBinary(StartTaskRequestSchema, req), before, "the caller's request was modified");
  assert.equal(req.requestId, "");
  assert.ok(a.created && b.created, "the second call was taken for a retry of the first");
  assert.notEqual(a.task?.taskId, b.task?.taskId);
  assert.notEqual(a.task?.requestId, b.task?.requestId);
  for (const t of [a.task!, b.task!]) await client.tasks.cancelTask({ taskId: t.taskId, reason: "test" });
});

test("a token goes in plaintext only to loopback, unless plaintextToken says something in between encrypts (as in Go)", () => {
  for (const address of ["cp.example:7233", "10.0.0.1:7233", "http://cp.example:7233", "[::ffff:10.0.0.1]:7233", "localhost.example:1"]) {
    assert.throws(
      () => createClient({ address, token: "apt_x" }),
      { message: `client: refusing to send a token in plaintext to ${address}; use TLS, or plaintextToken if something in between encrypts` },
      address,
    );
  }
  const allowed = [
    { address: "127.0.0.1:7233", token: "apt_x" },
    { address: "127.1.2.3:7233", token: "apt_x" },
    { address: "localhost:7233", token: "apt_x" },
    { address: "[::1]:7233", token: "apt_x" },
    { address: "http://[::ffff:127.0.0.1]:7233", token: "apt_x" },
    { address: "cp.example:7233", token: "apt_x", tls: true },
    { address: "https://cp.example:7233", token: "apt_x" },
    { address: "cp.example:7233", token: "apt_x", plaintextToken: true },
    { address: "cp.example:7233" },
  ];
  for (const options of allowed) createClient(options).close(); // lazy: nothing connects
});

test("TaskService: start (request id generated, or given and idempotent), get, list, cancel", async () => {
  const a = await client.tasks.startTask({
    source: { case: "spec", value: agentSpec },
    labels: { sdk: "ts" },
    input: { role: MessageRole.USER, parts: [{ kind: { case: "text", value: "hi" } }] },
  });
  const b = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, labels: { sdk: "ts" } });
  assert.ok(a.created && b.created, "two calls without a request id made two tasks");
  assert.notEqual(a.task?.taskId, b.task?.taskId);
  assert.match(a.task!.requestId, /^[0-9a-f-]{36}$/, "the generated request id");

  const first = await client.tasks.startTask({ requestId: "sdk-ts-idem", source: { case: "spec", value: agentSpec } });
  const again = await client.tasks.startTask({ requestId: "sdk-ts-idem", source: { case: "spec", value: agentSpec } });
  assert.equal(first.created, true);
  assert.equal(again.created, false);
  assert.equal(again.task?.taskId, first.task?.taskId);

  const id = a.task!.taskId;
  const got = await client.tasks.getTask({ taskId: id });
  assert.equal(got.task?.taskId, id);
  assert.equal(got.task?.state, TaskState.SUBMITTED);
  const listed = await client.tasks.listTasks({ labelSelector: ["sdk=ts"] });
  assert.deepEqual(listed.tasks.map((t) => t.taskId).sort(), [a.task!.taskId, b.task!.taskId].sort());

  const canceled = await client.tasks.cancelTask({ taskId: id, reason: "test" });
  assert.equal(canceled.task?.taskId, id);
  const ended = await client.tasks.getTask({ taskId: id });
  assert.equal(ended.task?.state, TaskState.CANCELED);

  // The task has ended, so its watch replays the history and ends.
  const watched: bigint[] = [];
  for await (const item of client.watch(id)) if (item.case === "event") watched.push(item.value.sequence);
  const history = await client.tasks.listTaskEvents({ taskId: id });
  assert.deepEqual(watched, history.events.map((e) => e.sequence));
  const tail = await client.tasks.listTaskEvents({ taskId: id, afterSequence: watched[0] });
  const fromFirst: bigint[] = [];
  for await (const item of client.watch(id, { afterSequence: watched[0] }))
    if (item.case === "event") fromFirst.push(item.value.sequence);
  assert.deepEqual(fromFirst, tail.events.map((e) => e.sequence));
  assert.deepEqual(fromFirst, watched.slice(1));

  assert.deepEqual((await client.tasks.listVerdicts({ taskId: id })).verdicts, []);
  await client.tasks.listObligations({ taskId: id });
});

test("RuntimeService: lease, heartbeat, report, complete; ListTaskEvents sees it", async () => {
  const started = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, queue: "sdk-ts-runtime" });
  const id = started.task!.taskId;
  const leased = await client.runtime.leaseTasks({
    runtimeId: "sdk-ts",
    maxTasks: 1,
    queues: ["sdk-ts-runtime"],
    wait: { seconds: 5n },
  });
  assert.equal(leased.leases.length, 1);
  const lease = leased.leases[0];
  assert.equal(lease.task?.taskId, id);
  const ref = { taskId: id, leaseId: lease.leaseId, epoch: lease.epoch };
  const hb = await client.runtime.heartbeat({ lease: ref });
  assert.equal(hb.canceled, false);
  await client.runtime.reportEvents({
    lease: ref,
    events: [{ payload: { case: "message", value: { role: MessageRole.ASSISTANT, parts: [{ kind: { case: "text", value: "hello" } }] } } }],
  });
  await client.runtime.completeTask({
    lease: ref,
    output: { structured: { kind: { case: "structValue", value: { fields: {} } } } },
  });
  const got = await client.tasks.getTask({ taskId: id });
  assert.equal(got.task?.state, TaskState.COMPLETED);
  const events = await client.tasks.listTaskEvents({ taskId: id });
  const payloads = events.events.map((e) => e.payload.case);
  assert.ok(payloads.includes("message") && payloads.includes("output"), payloads.join(","));
});

test("HitlService: a gated call is approved while the runtime awaits the decision", async () => {
  const err = await rejects(client.hitl.getInterrupt({ interruptId: "no-such-interrupt" }));
  assert.equal(err.code, Code.NotFound);

  const spec = {
    ...agentSpec,
    name: "sdk-ts-gate",
    tools: [
      {
        type: "function",
        function: {
          name: "send_email",
          description: "Send an email",
          parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"], additionalProperties: false },
        },
      },
    ],
  };
  const started = await client.tasks.startTask({
    source: { case: "spec", value: spec },
    queue: "sdk-ts-gate",
    interruptPolicy: { policy: { case: "allowlist", value: { tools: ["send_email"] } } },
  });
  const id = started.task!.taskId;
  const { leases } = await client.runtime.leaseTasks({ runtimeId: "sdk-ts", maxTasks: 1, queues: ["sdk-ts-gate"], wait: { seconds: 5n } });
  assert.equal(leases.length, 1);
  const lease = { taskId: id, leaseId: leases[0].leaseId, epoch: leases[0].epoch };
  await client.runtime.heartbeat({ lease });

  const args = JSON.stringify({ to: "a@example.com" });
  const gate = await client.runtime.checkToolCall({ lease, callId: "call-1", toolName: "send_email", agentName: "sdk-ts-gate", argumentsJson: args });
  assert.equal(gate.outcome, GateOutcome.INTERRUPT, GateOutcome[gate.outcome]);
  const interruptId = gate.interrupt!.interruptId;

  const pending = await client.hitl.listInterrupts({ taskId: id });
  assert.deepEqual(pending.interrupts.map((i) => i.interruptId), [interruptId]);
  const got = await client.hitl.getInterrupt({ interruptId });

  const kinds: string[] = [];
  const awaited = (async () => {
    for await (const res of client.runtime.awaitDecision({ lease, interruptId })) {
      kinds.push(res.kind.case ?? "");
      if (res.kind.case === "decision") return res.kind.value;
    }
    assert.fail(`no decision: ${kinds.join(",")}`);
  })();
  // A resolve without a request id gets a generated one; its answer is the decision.
  const resolved = await client.hitl.resolveInterrupt({
    interruptId,
    decision: { case: "approve", value: { reason: "fine" } },
    argsDigest: got.interrupt!.argsDigest,
  });
  assert.equal(resolved.interrupt?.decision?.type, DecisionType.APPROVE);
  const decision = await awaited;
  assert.equal(decision.type, DecisionType.APPROVE);
  assert.equal(decision.argumentsJson, args);

  await client.runtime.reportEvents({
    lease,
    events: [
      { payload: { case: "toolCall", value: { callId: "call-1", toolName: "send_email", argumentsJson: args } } },
      { payload: { case: "toolResult", value: { callId: "call-1", result: { kind: { case: "stringValue", value: "sent" } } } } },
    ],
  });
  await client.runtime.completeTask({ lease });
  assert.equal((await client.tasks.getTask({ taskId: id })).task?.state, TaskState.COMPLETED);
});

test("RuntimeService: ReadTaskHistory and PublishDeltas reach a live watcher", async () => {
  const started = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, queue: "sdk-ts-deltas" });
  const id = started.task!.taskId;
  const { leases } = await client.runtime.leaseTasks({ runtimeId: "sdk-ts", maxTasks: 1, queues: ["sdk-ts-deltas"], wait: { seconds: 5n } });
  const lease = { taskId: id, leaseId: leases[0].leaseId, epoch: leases[0].epoch };
  const history = await client.runtime.readTaskHistory({ lease });
  assert.ok(history.events.length > 0);
  assert.deepEqual(history.events.map((e) => e.sequence), history.events.map((_, i) => BigInt(i + 1)));
  assert.equal(history.events.at(-1)!.sequence, history.lastSequence);
  const ctl = new AbortController();
  const deltas: string[] = [];
  let live!: () => void;
  const caughtUp = new Promise<void>((r) => (live = r));
  const watching = (async () => {
    for await (const item of client.watch(id, { signal: ctl.signal })) {
      if (item.case === "caughtUp") live();
      if (item.case === "messageDelta") {
        deltas.push(item.value.textDelta);
        if (deltas.length === 2) ctl.abort();
      }
    }
  })().catch((e) => {
    if (!ctl.signal.aborted) throw e;
  });
  await caughtUp;
  const sent = await client.runtime.publishDeltas({ lease, deltas: [{ messageId: "m1", textDelta: "hel" }, { messageId: "m1", textDelta: "lo" }] });
  assert.equal(sent.watchers, 1);
  await watching;
  assert.deepEqual(deltas, ["hel", "lo"]);
  await client.runtime.completeTask({ lease });
});

test("AdminService: stats, a dry-run purge and a backup", async () => {
  const stats = await client.admin.getStats({});
  assert.notEqual(stats.serverVersion, "");
  const purge = await client.admin.purgeTasks({ olderThan: { seconds: 3600n }, dryRun: true });
  assert.equal(purge.tasks, 0n);
  let total = 0n;
  let received = 0;
  for await (const chunk of client.admin.backup({})) {
    total = chunk.totalBytes || total;
    received += chunk.chunk.length;
  }
  assert.ok(received > 0);
  assert.equal(BigInt(received), total);
});
