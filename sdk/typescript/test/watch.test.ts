// watch resumes after the server dies mid-stream: a SIGKILLed control plane is started
// again on the same port and data dir, and the watch delivers every event once, in order.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient, MessageRole, TaskState, type AgentplaneClient } from "../src/index.js";
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

function say(text: string) {
  return { payload: { case: "message" as const, value: { role: MessageRole.ASSISTANT, parts: [{ kind: { case: "text" as const, value: text } }] } } };
}

test("watch resumes after a server restart with no gap and no duplicate", async () => {
  const started = await client.tasks.startTask({ source: { case: "spec", value: agentSpec }, queue: "sdk-ts-watch" });
  const id = started.task!.taskId;
  const leased = await client.runtime.leaseTasks({ runtimeId: "sdk-ts-watch", maxTasks: 1, queues: ["sdk-ts-watch"], wait: { seconds: 5n } });
  assert.equal(leased.leases.length, 1);
  const lease = { taskId: id, leaseId: leased.leases[0].leaseId, epoch: leased.leases[0].epoch };
  await client.runtime.reportEvents({ lease, events: [say("one"), say("two")] });

  const seen: bigint[] = [];
  let restarted: Promise<void> | undefined;
  let caughtUp = 0;
  for await (const item of client.watch(id, { backoffMs: 100, maxReconnects: 30 })) {
    if (item.case === "caughtUp") caughtUp++;
    if (item.case !== "event") continue;
    seen.push(item.value.sequence);
    const text = item.value.payload.case === "message" ? item.value.payload.value.parts[0]?.kind.value : undefined;
    if (text === "one" && !restarted) {
      // Written (durably) while this watch is between events, then the server dies: the
      // watch must bring these after the restart, once each.
      await client.runtime.reportEvents({ lease, events: [say("three"), say("four")] });
      restarted = srv.restart().then(async () => {
        await client.runtime.reportEvents({ lease, events: [say("five")] });
        await client.runtime.completeTask({ lease });
      });
    }
  }
  assert.ok(restarted, "the server was restarted");
  await restarted;

  const history = await client.tasks.listTaskEvents({ taskId: id });
  assert.deepEqual(seen, history.events.map((e) => e.sequence), "every event once, in order (five came after the restart)");
  const texts = history.events.flatMap((e) => (e.payload.case === "message" ? [e.payload.value.parts[0]?.kind.value] : []));
  assert.deepEqual(texts, ["one", "two", "three", "four", "five"]);
  assert.equal((await client.tasks.getTask({ taskId: id })).task?.state, TaskState.COMPLETED);
  // "five" was written after the restart, so the watch saw it on a new connection.
  assert.ok(caughtUp >= 1, "caught_up before the task ended");
});

test("watch of an unknown task throws at once instead of retrying", async () => {
  await assert.rejects(
    (async () => {
      for await (const _ of client.watch("no-such-task")) void _;
    })(),
    (err: { reason?: string }) => err.reason === "TASK_NOT_FOUND",
  );
});
