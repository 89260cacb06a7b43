// Across languages: the Python runtime (examples/python-runtime/runtime.py, on the Python
// SDK's Worker) serves a task that this TypeScript client starts, watches and approves.
// Needs Debian's /usr/bin/python3 with python3-grpcio and python3-protobuf (.ci/run
// installs them); without them the test is skipped loudly (fails under go test ./sdk).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, TaskState, type AgentplaneClient } from "../src/index.js";
import { startServer, type TestServer } from "./server.js";

const python = "/usr/bin/python3";
const runtime = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..", "examples", "python-runtime", "runtime.py");

function pythonReady(): boolean {
  try {
    execFileSync(python, ["-c", "import grpc, google.protobuf"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

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

// go test ./sdk sets AGENTPLANE_SDK_STRICT: a missing Python then fails the test, unless the
// Python suite was opted out of (AGENTPLANE_SKIP_SDK_TESTS=py).
const strict = process.env.AGENTPLANE_SDK_STRICT === "1";
const optedOut = /(^|,)\s*(py|all)\s*(,|$)/.test(process.env.AGENTPLANE_SKIP_SDK_TESTS ?? "");
const missing = !pythonReady() && `!!! ${python} with grpc and protobuf not found: install python3-grpcio python3-protobuf`;
const skip = optedOut ? "AGENTPLANE_SKIP_SDK_TESTS opts out of Python" : !strict && missing;

test("a Python runtime serves a task a TypeScript client starts, watches and approves", { skip }, async () => {
  if (missing) assert.fail(missing);
  const queue = "cross-python";
  const proc = spawn(python, [runtime, "--address", srv.address, "--queue", queue, "--exit-after", "1"], {
    env: { ...process.env, AGENTPLANE_TOKEN: srv.token },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
  try {
    const { task } = await client.tasks.startTask({
      queue,
      source: { case: "spec", value: { apiVersion: "qar/v1", kind: "AgentSpec", name: "weather", instructions: "Answer briefly.", model: "m" } },
      input: { parts: [{ kind: { case: "text", value: "weather in Paris, then clean up" } }] },
      interruptPolicy: { policy: { case: "allowlist", value: { tools: ["delete_file"] } } },
    });
    const taskId = task!.taskId;
    const seen: string[] = [];
    for await (const item of client.watch(taskId)) {
      if (item.case !== "event") continue;
      const { payload } = item.value;
      seen.push(payload.case ?? "");
      if (payload.case === "interruptRaised") {
        const interruptId = payload.value.interrupt?.interruptId ?? "";
        const { interrupt } = await client.hitl.getInterrupt({ interruptId });
        assert.equal(interrupt!.callId, "c2");
        await client.hitl.resolveInterrupt({ interruptId, decision: { case: "approve", value: {} }, argsDigest: interrupt!.argsDigest });
      }
    }
    const { task: done } = await client.tasks.getTask({ taskId });
    assert.equal(TaskState[done!.state], "COMPLETED", `${seen.join(",")}\n${out}`);
    assert.ok(seen.includes("interruptResolved"), seen.join(","));
    assert.equal(await exited, 0, out);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
  }
});
