// The package's entries as a user's program sees them: tsc type-checks the programs in
// test/fixtures/exports, which import "@agentplane/sdk" and "@agentplane/sdk/worker" by
// name (package.json's exports, the built declarations in dist/).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

test("the main entry's Task is the message, the worker is on the /worker entry (tsc --noEmit)", async () => {
  const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");
  const fixture = path.join(root, "test", "fixtures", "exports");
  try {
    await promisify(execFile)(process.execPath, [tsc, "-p", fixture], { cwd: root });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    assert.fail(`tsc rejected the fixture:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
});
