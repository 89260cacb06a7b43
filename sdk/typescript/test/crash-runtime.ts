// A runtime process for worker.test.ts's crash test: it runs the allowed call c1
// (appending a line to the file named by its third argument, the tool's side effect),
// says so on stdout, and hangs there until the test SIGKILLs it, before it reports the
// call's result.
import { appendFileSync } from "node:fs";
import { createClient } from "../src/index.js";
import { Worker } from "../src/worker.js";

const [address, token, effects, queue] = process.argv.slice(2);
const ap = createClient({ address, token });
const w = new Worker(
  ap.runtime,
  async (t) => {
    const gate = await t.toolCall({ id: "c1", name: "send_email", node: "sdk-ts-worker", argumentsJson: '{"to":"c@example.com"}' });
    if (!gate.allowed) throw new Error(`not allowed: ${gate.reason}`);
    appendFileSync(effects, "ran c1\n");
    process.stdout.write("RAN\n");
    await new Promise(() => {}); // killed here: the result is never reported
  },
  { runtimeId: "ts-crashing", queues: [queue], pollWaitMs: 1000 },
);
await w.run();
