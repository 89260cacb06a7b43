// Starts a task whose tool call needs a person, follows it with watch, and approves the
// call when the gate raises its interrupt. A Worker in the same process stands in for
// your runtime (a real one runs elsewhere, with a runtime token).
//
//   AGENTPLANE_ADDR=127.0.0.1:7233 [AGENTPLANE_TOKEN=apt_...] npm start
import { createClient, TaskState } from "@agentplane/sdk";
import { Worker, type Task } from "@agentplane/sdk/worker";

const ap = createClient({ address: process.env.AGENTPLANE_ADDR ?? "127.0.0.1:7233", token: process.env.AGENTPLANE_TOKEN });
const queue = "example-typescript";

// The runtime: asks the gate before it sends an email, and sends it only once approved.
const runtime = new Worker(
  ap.runtime,
  async (task: Task) => {
    const call = { id: "call-1", name: "send_email", node: "mailer", argumentsJson: JSON.stringify({ to: "ada@example.com" }) };
    const gate = await task.toolCall(call);
    if (gate.allowed) await task.toolResult(call, { sent: true, to: JSON.parse(gate.argumentsJson).to });
    await task.complete({ text: gate.allowed ? "The email was sent." : `Not sent: ${gate.reason}` });
  },
  { runtimeId: "example-typescript", queues: [queue], pollWaitMs: 2000 },
);
const running = runtime.run();

try {
  const { task } = await ap.tasks.startTask({
    queue,
    source: {
      case: "spec",
      value: {
        apiVersion: "qar/v1",
        kind: "AgentSpec",
        name: "mailer",
        instructions: "Send the emails you are asked to.",
        model: "m",
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
      },
    },
    interruptPolicy: { policy: { case: "allowlist", value: { tools: ["send_email"] } } },
  });
  const taskId = task!.taskId;
  console.log(`started ${taskId}`);

  for await (const item of ap.watch(taskId)) {
    if (item.case !== "event") continue;
    const { sequence, payload } = item.value;
    console.log(`#${sequence} ${payload.case}`);
    if (payload.case === "interruptRaised") {
      const interruptId = payload.value.interrupt?.interruptId ?? "";
      // approve reads the interrupt's args digest and resolves against it, with a request id.
      await ap.approve(interruptId, { reason: "looks right" });
      console.log(`approved ${interruptId}`);
    }
  }
  const { task: done } = await ap.tasks.getTask({ taskId });
  console.log(`task ${taskId} is ${TaskState[done!.state]}`);
} finally {
  runtime.stop();
  await running;
  ap.close();
}
