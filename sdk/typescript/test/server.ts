// A real control plane for the tests: the binary from $AGENTPLANE_BIN (built from the
// tree with `go build ./cmd/controlplane` when unset), on a free loopback port, with a
// temp data dir and a multi-tenant config whose one token holds every role.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

export interface TestServer {
  address: string;
  token: string;
  /** With startServer({ tls: true }): the server's self-signed certificate (PEM file), its own CA. */
  caFile?: string;
  /** SIGKILLs the server and starts it again on the same port and data dir. */
  restart(): Promise<void>;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

// Servers still running when this process ends (a test timed out, the run was
// interrupted) are killed with it and their temp dirs removed, so nothing is left behind.
const children = new Set<ChildProcess>();
const dirs = new Set<string>();
const killChildren = () => {
  for (const c of children) c.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
};
process.once("exit", killChildren);
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    killChildren();
    process.exit(1);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function binary(dir: string): string {
  if (process.env.AGENTPLANE_BIN) return process.env.AGENTPLANE_BIN;
  const bin = path.join(dir, "controlplane");
  execFileSync("go", ["build", "-o", bin, "./cmd/controlplane"], { cwd: repoRoot, stdio: "inherit" });
  return bin;
}

/** tls: serve TLS with a fresh self-signed certificate; config: YAML appended to the configuration. */
export async function startServer(opts: { tls?: boolean; config?: string } = {}): Promise<TestServer> {
  const dir = mkdtempSync(path.join(tmpdir(), "agentplane-sdk-ts-"));
  dirs.add(dir);
  const bin = binary(dir);
  let tlsConfig = "";
  let caFile: string | undefined;
  if (opts.tls) {
    // Go's own generator, from GOROOT: a self-signed certificate for 127.0.0.1 that is its own CA.
    const goroot = execFileSync("go", ["env", "GOROOT"], { encoding: "utf8" }).trim();
    execFileSync("go", ["run", path.join(goroot, "src", "crypto", "tls", "generate_cert.go"), "--host", "127.0.0.1", "--ca"], { cwd: dir, stdio: "inherit" });
    caFile = path.join(dir, "cert.pem");
    tlsConfig = `tls:\n  cert_file: ${caFile}\n  key_file: ${path.join(dir, "key.pem")}\n`;
  }
  const token = "apt_" + randomBytes(32).toString("base64url");
  const sha = createHash("sha256").update(token).digest("hex");
  const config = path.join(dir, "config.yaml");
  writeFileSync(
    config,
    `auth:
  require_principal: true
  tokens:
    - name: sdk-test
      sha256: ${sha}
      tenant: acme
      roles: [admin, user, approver, runtime]
gates:
  locked_keys: [mcp]
${tlsConfig}${opts.config ?? ""}`,
  );
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  let proc: ChildProcess | undefined;

  const launch = () =>
    new Promise<void>((resolve, reject) => {
      const p = spawn(
        bin,
        ["--config", config, "--data-dir", path.join(dir, "data"), "--grpc-addr", address, "--http-addr", "off", "--log-level", "warn"],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      proc = p;
      children.add(p);
      p.once("exit", () => children.delete(p));
      let out = "";
      const timer = setTimeout(() => reject(new Error(`no gRPC address within 30 s:\n${out}`)), 30_000);
      const onData = (d: Buffer) => {
        out += d;
        if (/gRPC\s+\S+/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      p.stdout!.on("data", onData);
      p.stderr!.on("data", onData);
      p.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`controlplane exited (${code}):\n${out}`));
      });
    });

  const kill = async () => {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((resolve) => p.once("exit", resolve));
    p.kill("SIGKILL");
    await exited;
  };

  await launch();
  return {
    address,
    token,
    caFile,
    kill,
    async restart() {
      await kill();
      await launch();
    },
    async stop() {
      const p = proc;
      if (p && p.exitCode === null && p.signalCode === null) {
        const exited = new Promise((resolve) => p.once("exit", resolve));
        p.kill("SIGTERM");
        const timer = setTimeout(() => p.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
      dirs.delete(dir);
    },
  };
}

export const agentSpec = {
  apiVersion: "qar/v1",
  kind: "AgentSpec",
  name: "sdk-ts",
  instructions: "Answer briefly.",
  model: "m",
};
