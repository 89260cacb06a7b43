// A runtime process for drain.test.ts: it acknowledges the task once (a step), asks to
// send an email (gated, interactive), says WAITING on stdout once the call waits for a
// decision, and runs until SIGTERM with a short drain timeout. It exits on its own.
import { createClient } from "../src/index.js";
import { Worker } from "../src/worker.js";
import { emailHandler } from "./drain-handler.js";

const [address, token, effects, queue] = process.argv.slice(2);
const ap = createClient({ address, token });
const w = new Worker(ap.runtime, emailHandler(effects, () => process.stdout.write("WAITING\n")), {
  runtimeId: "ts-draining",
  queues: [queue],
  pollWaitMs: 1000,
  drainTimeoutMs: 500,
});
await w.runUntilSignal();
ap.close();
