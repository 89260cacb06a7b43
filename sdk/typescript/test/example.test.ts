// examples/typescript/approve.ts runs against a real control plane: it starts a task,
// follows it, approves its gated call, and sees it complete. go test ./sdk builds the
// example first (npm ci && npm run build in examples/typescript).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, type TestServer } from "./server.js";

const example = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..", "examples", "typescript", "dist", "approve.js");

let srv: TestServer;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
});

// Under AGENTPLANE_SDK_STRICT (go test ./sdk, which builds the example) a missing build fails.
const strict = process.env.AGENTPLANE_SDK_STRICT === "1";
const missing = !existsSync(example) && `!!! ${example} is not built: run npm ci && npm run build in examples/typescript`;

test("examples/typescript/approve.ts approves its gated call and the task completes", { skip: !strict && missing }, async () => {
  if (missing) assert.fail(missing);
  const out = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [example], { env: { ...process.env, AGENTPLANE_ADDR: srv.address, AGENTPLANE_TOKEN: srv.token }, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    );
  });
  assert.match(out, /approved in-/);
  assert.match(out, /toolResult/);
  assert.match(out, /is COMPLETED\n$/);
});
