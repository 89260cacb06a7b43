// createClient: one object with a typed client for every agentplane service.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIPv4 } from "node:net";
import {
  createClient as createConnectClient,
  type Client,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AdminService } from "../gen/agentplane/v1/admin_service_pb.js";
import { ScheduleService } from "../gen/agentplane/v1/schedule_service_pb.js";
import { CapabilityService } from "../gen/agentplane/v1/capability_service_pb.js";
import { HitlService } from "../gen/agentplane/v1/hitl_service_pb.js";
import { RuntimeService } from "../gen/agentplane/v1/runtime_service_pb.js";
import { SpecService } from "../gen/agentplane/v1/spec_service_pb.js";
import { TaskService } from "../gen/agentplane/v1/task_service_pb.js";
import { toAgentplaneError } from "./errors.js";
import { retryInterceptor } from "./retry.js";
import { rpcs } from "./api.gen.js";
import type { StartTaskRequestSchema } from "../gen/agentplane/v1/task_service_pb.js";
import type { Interrupt } from "../gen/agentplane/v1/hitl_pb.js";
import type { MessageInitShape, JsonValue } from "@bufbuild/protobuf";
import { resolve, TaskHandle, type ResolveOptions } from "./task.js";
import { watch, type WatchItem, type WatchOptions } from "./watch.js";

/** TLS settings: PEM contents (string or Buffer) or file paths (`caFile`, ...). */
export interface TlsOptions {
  /** CA bundle to verify the server with (default: Node's roots). */
  ca?: string | Buffer;
  caFile?: string;
  /** Client certificate and key, for mTLS (auth.client_certs). */
  cert?: string | Buffer;
  certFile?: string;
  key?: string | Buffer;
  keyFile?: string;
  /** The name to verify the server certificate against, when it differs from the address's host. */
  serverName?: string;
}

export interface ClientOptions {
  /** host:port of the gRPC listener ("127.0.0.1:7233"), or a full http:// or https:// URL. */
  address: string;
  /** Bearer token (`controlplane token new`), sent as `authorization: Bearer ...` on every call. */
  token?: string;
  /** true for TLS with Node's roots, or the TLS settings. Off by default (loopback). */
  tls?: boolean | TlsOptions;
  /**
   * Allows `token` over plaintext to an address that is not loopback, for a
   * TLS-terminating proxy in between (Go's WithPlaintextToken). Without it createClient
   * refuses to send a token in plaintext anywhere but loopback.
   */
  plaintextToken?: boolean;
  /** Extra interceptors, run inside the SDK's own (errors, request ids, retries, auth): once per attempt. */
  interceptors?: Interceptor[];
}

/** AgentplaneClient: a client per service, `watch`, and `close`. */
export interface AgentplaneClient {
  tasks: Client<typeof TaskService>;
  specs: Client<typeof SpecService>;
  hitl: Client<typeof HitlService>;
  runtime: Client<typeof RuntimeService>;
  admin: Client<typeof AdminService>;
  capabilities: Client<typeof CapabilityService>;
  schedules: Client<typeof ScheduleService>;
  /** The transport the clients share, for createConnectClient on it. */
  transport: Transport;
  /** Follows a task's events; see watch(). */
  watch(taskId: string, options?: WatchOptions): AsyncGenerator<WatchItem, void, undefined>;
  /** Starts a task (StartTask) and returns its handle. */
  start(request: MessageInitShape<typeof StartTaskRequestSchema>): Promise<TaskHandle>;
  /** The handle of an existing task; makes no call. */
  task(taskId: string): TaskHandle;
  /**
   * Lets a gated call run with its arguments unchanged. Like reject and edit it reads the
   * interrupt first and resolves against its argument digest (or `argsDigest`), so a call
   * whose arguments changed in between is refused (INTERRUPT_ARGS_MISMATCH) instead of
   * approved, and sends a request id (`requestId` to choose it) so that repeating it is safe.
   */
  approve(interruptId: string, options?: ResolveOptions): Promise<Interrupt>;
  /** Refuses a gated call: it does not run, and the model sees the reason (required). */
  reject(interruptId: string, reason: string, options?: Omit<ResolveOptions, "reason">): Promise<Interrupt>;
  /** Runs a gated call with new arguments (plain JSON, checked against the tool's parameter schema). */
  edit(interruptId: string, args: JsonValue, options?: ResolveOptions): Promise<Interrupt>;
  /** Closes the HTTP/2 connection. The client is unusable afterwards. */
  close(): void;
}

function pem(value: string | Buffer | undefined, file: string | undefined): string | Buffer | undefined {
  if (value !== undefined) return value;
  return file === undefined ? undefined : readFileSync(file);
}

/**
 * createClient connects to a control plane's gRPC listener. Calls are lazy: nothing
 * connects until the first one. Every failed call throws an AgentplaneError. A call
 * whose request has a `requestId` and leaves it empty is sent with a fresh UUID, chosen
 * once per call and reused by its retries (on a copy: the caller's message is not
 * modified, as in Go), so each such call is a new one; set your own to repeat a call of
 * yours idempotently. Calls the API marks NO_SIDE_EFFECTS or IDEMPOTENT are repeated
 * after UNAVAILABLE, DEADLINE_EXCEEDED or a retryable reason, with backoff, up to
 * retryPolicy.attempts calls while their signal and timeout last, and `watch`
 * reconnects: the policy of every agentplane SDK (retry.ts; docs/clients.md, "Retries,
 * request ids and reconnection"). Like Go's Dial it
 * throws, before connecting, when a token would go in plaintext to an address that is
 * not loopback and `plaintextToken` is not set.
 */
export function createClient(options: ClientOptions): AgentplaneClient {
  const tls = options.tls === true ? {} : options.tls || undefined;
  const baseUrl = /^https?:\/\//.test(options.address)
    ? options.address
    : `${tls ? "https" : "http"}://${options.address}`;
  if (options.token !== undefined && baseUrl.startsWith("http://") && !options.plaintextToken && !isLoopback(baseUrl)) {
    throw new Error(
      `client: refusing to send a token in plaintext to ${options.address}; use TLS, or plaintextToken if something in between encrypts`,
    );
  }
  // Outermost first: the request id is chosen once, outside the retries that reuse it.
  const interceptors: Interceptor[] = [errorInterceptor, requestIdInterceptor, retryInterceptor];
  if (options.token !== undefined) interceptors.push(bearer(options.token));
  interceptors.push(...(options.interceptors ?? []));
  const sessionManager = new Http2SessionManager(
    baseUrl,
    // Notice a dead connection within seconds on a stream (watch) that waits for data.
    { pingIntervalMs: 10_000, pingTimeoutMs: 10_000 },
    tls
      ? {
          ca: pem(tls.ca, tls.caFile),
          cert: pem(tls.cert, tls.certFile),
          key: pem(tls.key, tls.keyFile),
          servername: tls.serverName,
        }
      : undefined,
  );
  const transport = createGrpcTransport({ baseUrl, interceptors, sessionManager });
  const tasks = createConnectClient(TaskService, transport);
  const hitl = createConnectClient(HitlService, transport);
  let closed = false;
  return {
    tasks,
    specs: createConnectClient(SpecService, transport),
    hitl,
    runtime: createConnectClient(RuntimeService, transport),
    admin: createConnectClient(AdminService, transport),
    capabilities: createConnectClient(CapabilityService, transport),
    schedules: createConnectClient(ScheduleService, transport),
    transport,
    watch: (taskId, watchOptions) => watch(tasks, taskId, watchOptions),
    async start(request) {
      const res = await tasks.startTask(request);
      return new TaskHandle(tasks, hitl, res.task?.taskId ?? "", res);
    },
    task: (taskId) => new TaskHandle(tasks, hitl, taskId),
    approve: (interruptId, o = {}) => resolve(hitl, interruptId, { case: "approve", value: { reason: o.reason } }, o),
    reject: async (interruptId, reason, o = {}) => {
      if (!reason) throw new Error("client: reject needs a reason");
      return resolve(hitl, interruptId, { case: "reject", value: { reason } }, o);
    },
    edit: (interruptId, args, o = {}) =>
      resolve(hitl, interruptId, { case: "edit", value: { reason: o.reason, argumentsJson: JSON.stringify(args) } }, o),
    close() {
      if (closed) return;
      closed = true;
      // The HTTP/2 session would otherwise stay open until it idles out.
      sessionManager.abort();
    },
  };
}

function bearer(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

// isLoopback reports whether an http:// URL's host is localhost or a loopback IP
// (127.0.0.0/8, ::1, IPv4-mapped 127.x), as Go's client decides it. URL writes IP
// literals in one normal form ("127.1" is "127.0.0.1", "[::ffff:127.0.0.1]" is
// "[::ffff:7f00:1]"), so comparing that form is enough.
function isLoopback(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  if (host === "localhost") return true;
  if (isIPv4(host)) return host.startsWith("127.");
  return host === "[::1]" || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(host);
}

// requestIdInterceptor sends a request whose request_id is empty (the RPCs the API
// lists with one) with a fresh one, on a shallow copy: the caller's message is left as
// it was. It runs once per logical call, outside retryInterceptor.
const requestIdInterceptor: Interceptor = (next) => (req) => {
  if (req.stream || !rpcs[`${req.service.typeName}/${req.method.name}`]?.requestId) return next(req);
  const msg = req.message as typeof req.message & { requestId: string };
  if (msg.requestId !== "") return next(req);
  const copy = { ...msg };
  copy.requestId = randomUUID();
  return next({ ...req, message: copy });
};

// errorInterceptor turns every error, of the call or of a response stream, into an AgentplaneError.
const errorInterceptor: Interceptor = (next) => async (req) => {
  let res;
  try {
    res = await next(req);
  } catch (err) {
    throw toAgentplaneError(err);
  }
  if (!res.stream) return res;
  const inner = res.message;
  return {
    ...res,
    message: (async function* () {
      try {
        yield* inner;
      } catch (err) {
        throw toAgentplaneError(err);
      }
    })(),
  };
};
