// The handler of the drain and step tests: say "working on it" once (a step), send an
// email through the gate (the side effect is a line appended to the effects file), and
// complete.
import { appendFileSync } from "node:fs";
import type { Task } from "../src/worker.js";

export function emailHandler(effects: string, onWait: () => void) {
  return async (t: Task) => {
    await t.step("ack", () => t.say("working on it"));
    const gate = await t.toolCall({ id: "e1", name: "send_email", node: "sdk-ts-worker", argumentsJson: '{"to":"d@example.com"}', onInterrupt: onWait });
    if (!gate.allowed) throw new Error(`not allowed: ${gate.reason}`);
    appendFileSync(effects, "sent\n");
    await t.toolResult(gate.call, "sent");
    await t.complete({ text: "emailed" });
  };
}
