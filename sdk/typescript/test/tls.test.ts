// The tls option: a control plane serving TLS with a self-signed certificate is reached
// with that certificate as the CA, and refused without it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { AgentplaneError, createClient } from "../src/index.js";
import { startServer, type TestServer } from "./server.js";

let srv: TestServer;
before(async () => {
  srv = await startServer({ tls: true });
});
after(async () => {
  await srv?.stop();
});

test("tls: caFile verifies the server; Node's roots do not", async () => {
  const ok = createClient({ address: srv.address, token: srv.token, tls: { caFile: srv.caFile } });
  try {
    const caps = await ok.capabilities.getCapabilities({});
    assert.ok(caps.capabilities);
  } finally {
    ok.close();
  }
  const untrusted = createClient({ address: srv.address, token: srv.token, tls: true });
  try {
    await assert.rejects(untrusted.capabilities.getCapabilities({}), (err) => err instanceof AgentplaneError && /certificate/.test(err.message));
  } finally {
    untrusted.close();
  }
});
