// The TypeScript SDK's driver of the conformance scenarios (testdata/conformance/
// scenarios.json; sdk/conformance_test.go runs it with the Go and Python drivers). It
// reads its scenario from AGENTPLANE_SCENARIO, connects to AGENTPLANE_ADDRESS with the
// SDK's defaults, and writes what it saw as JSON lines on stdout; a line on stdin lets a
// scenario go on.
import { createInterface } from "node:readline";
import { fromJson, type DescService, type JsonValue } from "@bufbuild/protobuf";
import { AdminService } from "../gen/agentplane/v1/admin_service_pb.js";
import { CapabilityService } from "../gen/agentplane/v1/capability_service_pb.js";
import { HitlService } from "../gen/agentplane/v1/hitl_service_pb.js";
import { RuntimeService } from "../gen/agentplane/v1/runtime_service_pb.js";
import { SpecService } from "../gen/agentplane/v1/spec_service_pb.js";
import { TaskService } from "../gen/agentplane/v1/task_service_pb.js";
import { TaskStateSchema } from "../gen/agentplane/v1/task_pb.js";
import { Code, createClient, Reason, retryableReasons, toAgentplaneError, type AgentplaneClient } from "../src/index.js";
import { TaskStopped, Worker, type Task } from "../src/worker.js";

interface Call {
  method: string;
  request: JsonValue;
}
interface Scenario {
  name: string;
  calls?: Call[];
  task_id?: string;
  queue?: string;
}

function emit(v: unknown): void {
  process.stdout.write(JSON.stringify(v, (_, x) => (typeof x === "bigint" ? Number(x) : x)) + "\n");
}

const reasonNames = new Map<string, string>(Object.entries(Reason).map(([name, wire]) => [wire, name]));

/** The google.rpc.Code name of a Connect code ("FAILED_PRECONDITION"). */
function codeName(code: Code): string {
  if (code === Code.Canceled) return "CANCELLED";
  return Code[code].replace(/(?<!^)([A-Z])/g, "_$1").toUpperCase();
}

function describe(e: unknown): Record<string, unknown> {
  if (e === undefined) return { code: "OK" };
  const err = toAgentplaneError(e);
  return {
    code: codeName(err.code),
    reason: err.reason,
    reason_name: reasonNames.get(err.reason) ?? "",
    retryable: retryableReasons.has(err.reason),
    domain: err.domain,
    metadata: err.reasonMetadata,
  };
}

async function invoke(ap: AgentplaneClient, c: Call): Promise<Record<string, unknown>> {
  const services: Record<string, [DescService, unknown]> = {
    [TaskService.typeName]: [TaskService, ap.tasks],
    [SpecService.typeName]: [SpecService, ap.specs],
    [HitlService.typeName]: [HitlService, ap.hitl],
    [RuntimeService.typeName]: [RuntimeService, ap.runtime],
    [AdminService.typeName]: [AdminService, ap.admin],
    [CapabilityService.typeName]: [CapabilityService, ap.capabilities],
  };
  const [service, name] = c.method.split("/");
  const [desc, client] = services[service];
  const method = desc.methods.find((m) => m.name === name)!;
  const req = fromJson(method.input, c.request);
  let err: unknown;
  try {
    await (client as Record<string, (r: unknown) => Promise<unknown>>)[method.localName](req);
  } catch (e) {
    err = e;
  }
  const res: Record<string, unknown> = { method: c.method, ...describe(err) };
  if ("requestId" in req) res.caller_request_id = (req as { requestId: string }).requestId;
  return res;
}

async function watch(ap: AgentplaneClient, taskId: string): Promise<void> {
  const waited = ap
    .task(taskId)
    .wait()
    .then(
      (t) => emit({ wait: TaskStateSchema.value[t.state].name }),
      (e) => emit({ wait_error: String(e) }),
    );
  try {
    for await (const item of ap.watch(taskId)) {
      if (item.case === "event") emit({ seq: item.value.sequence });
    }
  } catch (e) {
    emit({ watch_error: String(e) });
  }
  await waited;
}

async function leaseLost(ap: AgentplaneClient, queue: string): Promise<void> {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  let first = true;
  let finished!: () => void;
  const done = new Promise<void>((resolve) => (finished = resolve));
  const w = new Worker(
    ap.runtime,
    async (t: Task) => {
      if (!first) {
        await t.complete();
        return;
      }
      first = false;
      emit({ started: { task_id: t.ref.taskId, lease_id: t.ref.leaseId, epoch: t.ref.epoch } });
      await lines.next();
      let writeReason = "";
      try {
        await t.say("still mine?");
      } catch (e) {
        writeReason = toAgentplaneError(e).reason;
      }
      const r = t.signal.reason;
      emit({ write_reason: writeReason, stop_reason: r instanceof TaskStopped ? r.kind : "" });
      finished();
    },
    { runtimeId: "conformance-ts", queues: [queue], pollWaitMs: 1000 },
  );
  const running = w.run();
  await done;
  await w.stop();
  await running;
}

async function main(): Promise<void> {
  const sc = JSON.parse(process.env.AGENTPLANE_SCENARIO ?? "") as Scenario;
  const ap = createClient({ address: process.env.AGENTPLANE_ADDRESS ?? "" });
  try {
    switch (sc.name) {
      case "retry_after_unavailable":
      case "error_reason_and_metadata":
        for (const c of sc.calls ?? []) emit(await invoke(ap, c));
        break;
      case "watch_across_restart":
        await watch(ap, sc.task_id ?? "");
        break;
      case "lease_lost_mid_handler":
        await leaseLost(ap, sc.queue ?? "");
        break;
      default:
        throw new Error(`unknown scenario ${sc.name}`);
    }
    emit({ done: true });
  } finally {
    ap.close();
  }
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`conformance-driver: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
