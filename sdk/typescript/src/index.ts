// The agentplane TypeScript SDK: createClient, AgentplaneError, watch, and the
// generated API types (protobuf-es v2: plain objects, `create(Schema, init)`). The
// runtime worker is "@agentplane/sdk/worker" (src/worker.ts), apart, as Temporal ships
// its client and worker: its Task class would otherwise shadow the Task message here.
export { createClient, type AgentplaneClient, type ClientOptions, type TlsOptions } from "./client.js";
export { AgentplaneError, toAgentplaneError, type FieldViolation } from "./errors.js";
export { TaskHandle, terminal, type CallOptions, type ResolveOptions, type ToolOutputInit, type WaitOptions } from "./task.js";
export { watch, type WatchItem, type WatchOptions } from "./watch.js";
export { Reason, StopReason, retryPolicy, retryableReasons, rpcs, type Idempotency, type RpcPolicy } from "./api.gen.js";
export { retryable, backoffMs } from "./retry.js";
export { Code, ConnectError } from "@connectrpc/connect";
export * from "../gen/agentplane/v1/admin_service_pb.js";
export * from "../gen/agentplane/v1/capability_service_pb.js";
export * from "../gen/agentplane/v1/errors_pb.js";
export * from "../gen/agentplane/v1/hitl_pb.js";
export * from "../gen/agentplane/v1/hitl_service_pb.js";
export * from "../gen/agentplane/v1/peers_pb.js";
export * from "../gen/agentplane/v1/runtime_service_pb.js";
export * from "../gen/agentplane/v1/spec_pb.js";
export * from "../gen/agentplane/v1/spec_service_pb.js";
export * from "../gen/agentplane/v1/task_pb.js";
export * from "../gen/agentplane/v1/task_service_pb.js";
export * from "../gen/agentplane/v1/verdict_pb.js";
