// Worker: the runtime side, mirroring Go's client/worker: a lease loop with capacity,
// heartbeats, cancel, the tool-call gate (interactive or durable), reports, the task's
// history for a replay, verdicts, and the end of a task (complete, fail, pause, wait for
// client tool outputs, suspend), with a graceful stop.
import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { create, fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import {
  RecordVerdictRequestSchema,
  type Lease,
  type LeaseRef,
  type RecordVerdictResponse,
  type RuntimeEventSchema,
  type RuntimeService,
} from "../gen/agentplane/v1/runtime_service_pb.js";
import { GateOutcome, DecisionType, InterruptState, type Decision, type Interrupt } from "../gen/agentplane/v1/hitl_pb.js";
import { MessageRole, type Message, type MessageDeltaSchema, type TaskEvent, type ToolResult } from "../gen/agentplane/v1/task_pb.js";
import { AgentplaneError, toAgentplaneError } from "./errors.js";
import { Reason, StopReason } from "./api.gen.js";
// The pause before retry number n: the retry policy of every SDK (100 ms doubling up to
// 2 s, jittered into [d/2, d], so that runtimes that lost the same server do not return
// in lockstep), for writes, polls and awaits alike.
import { backoffMs } from "./retry.js";

export { StopReason } from "./api.gen.js";

/**
 * Why a task's signal was aborted (`task.signal.reason`). `kind` is a StopReason
 * ("lease_lost", "canceled", "stopping"): the same names as Go's worker.StopReason and
 * Python's task.stop_reason.
 */
export class TaskStopped extends Error {
  constructor(
    readonly kind: StopReason,
    message: string,
  ) {
    super(message);
    this.name = "TaskStopped";
  }
}

/** Thrown by Task.toolCall after it gave the lease up to wait durably; return from the handler. */
export class Suspended extends Error {
  constructor(readonly interruptId: string, readonly callId: string) {
    super(`task suspended until interrupt ${interruptId} (call ${callId}) is decided`);
    this.name = "Suspended";
  }
}

/**
 * Thrown by Task.modelCall when the model call was rejected (by a person or its
 * deadline): the control plane has failed the task (reason budget.model_call_rejected).
 * Return from the handler; nothing more is written.
 */
export class ModelCallRejected extends Error {
  constructor(readonly callId: string, readonly reason: string) {
    super(`model call ${callId} was rejected; the control plane failed the task: ${reason}`);
    this.name = "ModelCallRejected";
  }
}

/** A handler throws a Failure to choose how its task fails. */
export class Failure extends Error {
  constructor(readonly reason: string, message: string, readonly retry = false) {
    super(message);
    this.name = "Failure";
  }
}

export type Delivery = "interactive" | "durable";

export interface WorkerOptions {
  runtimeId: string;
  /** Run queues served (none: the default queue). */
  queues?: string[];
  /** Tasks run at once; default 1. */
  capacity?: number;
  /** How long one LeaseTasks waits for work; default 20 s. */
  pollWaitMs?: number;
  /** How gated calls wait; default interactive. */
  delivery?: Delivery;
  /** Fraction of the time left on the lease after which to heartbeat; default 1/3. */
  heartbeatFraction?: number;
  /**
   * How long stop() lets running tasks finish before it hands them back (a task waiting
   * for a decision is suspended, any other is returned to the queue); default 20 s, under
   * the 30 s that systemd and Kubernetes leave between SIGTERM and SIGKILL.
   */
  drainTimeoutMs?: number;
}

/** The default of WorkerOptions.drainTimeoutMs. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 20_000;

/** The runtime note attributes that record a step (Task.step); the Go and Python SDKs use the same. */
export const STEP_ATTR = "agentplane.step";
export const STEP_RESULT_ATTR = "agentplane.step.result";

export type Handler = (task: Task) => Promise<void>;

/** A tool call the model wants to make. */
export interface Call {
  /** Unique in the task and stable across replays. */
  id: string;
  name: string;
  description?: string;
  /** The arguments as the model produced them (JSON text). */
  argumentsJson: string;
  /** The agent (graph node) making the call; the gate needs it. */
  node: string;
  trip?: number;
  delivery?: Delivery;
  /** Called when the call waits for a decision, before waiting or suspending. */
  onInterrupt?: (it: Interrupt) => void;
}

/** A model call a handler is about to make, for Task.modelCall. */
export interface ModelCall {
  /**
   * Unique in the task and the same when a later lease replays the turn (derive it from
   * the history, e.g. the node and the number of model calls it made): a resumed task
   * finds its approval by it.
   */
  id: string;
  /** The agent (graph node) making the call. */
  node: string;
  trip?: number;
  /** The model about to be called, for the reviewer. */
  model?: string;
  delivery?: Delivery;
  /** Called when the call waits for approval, before waiting or suspending. */
  onInterrupt?: (it: Interrupt) => void;
}

/** The answer to a tool call. */
export interface Gate {
  call: Call;
  /** The tool may run, with exactly argumentsJson. */
  allowed: boolean;
  argumentsJson: string;
  interrupt?: Interrupt;
  decision?: Decision;
  /** Why the call may not run, for the model. */
  reason: string;
  /** An earlier lease reported this call already: do not run it again. */
  reported: boolean;
  resultReported: boolean;
  /** The control plane logged the allowed call with its answer (report_allowed_call): it is not reported again. */
  reportedWithCheck?: boolean;
}

function stopCause(err: AgentplaneError): TaskStopped | undefined {
  if (err.code !== Code.FailedPrecondition) return undefined;
  if (err.reason === Reason.LEASE_LOST) return new TaskStopped(StopReason.LEASE_LOST, err.message);
  if (err.reason === Reason.TASK_TERMINAL) return new TaskStopped(StopReason.CANCELED, err.message);
  return undefined;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** One leased task, handed to the handler. Its signal aborts when the task must stop. */
export class Task {
  readonly ref: LeaseRef;
  private readonly ctl = new AbortController();
  private endedAs = "";
  private deadlineMs: number;
  private readonly resolved = new Map<string, Interrupt>();
  private readonly pending = new Map<string, Interrupt>();
  private waitStopped = false;
  private steps: Map<string, string> | undefined;

  constructor(
    private readonly rt: Client<typeof RuntimeService>,
    readonly lease: Lease,
    private readonly delivery: Delivery,
  ) {
    this.ref = { $typeName: "agentplane.v1.LeaseRef", taskId: lease.task?.taskId ?? "", leaseId: lease.leaseId, epoch: lease.epoch };
    this.deadlineMs = lease.deadline ? timestampMs(lease.deadline) : Date.now() + 30_000;
    for (const it of lease.resolvedInterrupts) this.resolved.set(it.callId, it);
    for (const it of lease.pendingInterrupts) this.pending.set(it.callId, it);
  }

  get id(): string {
    return this.ref.taskId;
  }
  /** Aborted (reason: a TaskStopped) when the task was canceled, the lease lost, or the worker stops. */
  get signal(): AbortSignal {
    return this.ctl.signal;
  }
  /** The task's input text. */
  get inputText(): string {
    return (this.lease.task?.input?.parts ?? []).flatMap((p) => (p.kind.case === "text" ? [p.kind.value] : [])).join("");
  }
  /** The attempt number of this lease, from 1. */
  get attempt(): number {
    return this.lease.attempt;
  }
  /** The user messages ContinueTask delivered since the task last paused (chat mode). */
  get continueMessages(): Message[] {
    return this.lease.continueMessages;
  }
  /** The outputs of client-executed tool calls ContinueTask delivered (waitForToolOutputs). */
  get continueToolResults(): ToolResult[] {
    return this.lease.continueToolResults;
  }
  get ended(): string {
    return this.endedAs;
  }
  get deadline(): number {
    return this.deadlineMs;
  }
  /** @internal */
  setDeadline(ms: number) {
    this.deadlineMs = ms;
  }
  /** @internal */
  stop(reason: TaskStopped) {
    if (!this.ctl.signal.aborted) this.ctl.abort(reason);
  }
  /** @internal: the worker's stop ended an interactive wait; the task is handed back by suspending it. */
  get stoppedWaiting(): boolean {
    return this.waitStopped;
  }

  // write makes one fenced call; LEASE_LOST and TASK_TERMINAL stop the task. A call that
  // fails transiently (UNAVAILABLE, DEADLINE_EXCEEDED, a reset stream, or an error the server marks
  // retryable, such as STORE_UNAVAILABLE while its database restarts) is made again while
  // the lease may still be renewed: until its deadline, which heartbeats keep moving while
  // they succeed. Every call here is idempotent (request ids). A call still failing at the
  // deadline stops the task as lease_lost: the lease expires and the task is queued again,
  // instead of an outage failing it.
  private async write<T>(what: string, end: string, call: () => Promise<T>): Promise<T> {
    if (this.endedAs !== "") throw new Error(`${what}: task already ended by this runtime (${this.endedAs})`);
    for (let failures = 1; ; failures++) {
      try {
        const res = await call();
        if (end !== "") this.endedAs = end;
        return res;
      } catch (e) {
        const err = toAgentplaneError(e);
        const cause = stopCause(err);
        if (cause) {
          this.stop(cause);
          throw err;
        }
        // A stream reset by a server that went away comes back CANCELED from Node's
        // HTTP/2 without an agentplane reason; nothing here cancels a write on purpose.
        const lost = err.code === Code.Unavailable || err.code === Code.DeadlineExceeded || (err.code === Code.Canceled && err.reason === "");
        const retryable = lost || err.retryDelayMs !== undefined;
        if (!retryable || this.signal.aborted) throw err;
        const left = this.deadlineMs - Date.now();
        if (left <= 0) {
          this.stop(new TaskStopped(StopReason.LEASE_LOST, `${what} kept failing until the lease deadline: ${err.message}`));
          throw err;
        }
        await sleep(Math.min(backoffMs(failures), left), this.signal);
      }
    }
  }

  /** Appends events to the log; returns the last sequence. */
  async report(...events: MessageInitShape<typeof RuntimeEventSchema>[]): Promise<bigint> {
    const requestId = randomUUID();
    const res = await this.write("report events", "", () =>
      this.rt.reportEvents({ lease: this.ref, events, requestId }),
    );
    return res.lastSequence;
  }

  /** Reports a runtime note (progress, diagnostics). */
  async note(text: string, attributes: Record<string, string> = {}): Promise<void> {
    await this.report({ payload: { case: "note", value: { text, attributes } } });
  }

  /**
   * The task's logged events after sequence `after`, oldest first, up to `until` (0: the
   * newest when the read starts), paged through ReadTaskHistory under the lease (runtimes
   * may not call WatchTask). A resumed handler reads up to `lease.historyCursor` to
   * rebuild its state.
   */
  async *history(after: bigint = 0n, until: bigint = 0n): AsyncGenerator<TaskEvent, void, undefined> {
    for (;;) {
      const res = await this.write("read history", "", () => this.rt.readTaskHistory({ lease: this.ref, afterSequence: after }));
      if (until <= 0n) until = res.lastSequence;
      for (const ev of res.events) {
        if (ev.sequence > until) return;
        yield ev;
        after = ev.sequence;
      }
      if (res.events.length === 0 || after >= until) return;
    }
  }

  /** Records an evaluator node's verdict; the lease is set, and a request id when it has none. */
  async recordVerdict(req: MessageInitShape<typeof RecordVerdictRequestSchema>): Promise<RecordVerdictResponse> {
    const msg = create(RecordVerdictRequestSchema, req);
    msg.lease = this.ref;
    msg.requestId ||= randomUUID();
    return this.write("record verdict", "", () => this.rt.recordVerdict(msg));
  }

  /** Hands message fragments to the task's live watchers (nothing is stored); returns how many there were. */
  async publishDeltas(...deltas: MessageInitShape<typeof MessageDeltaSchema>[]): Promise<number> {
    const res = await this.write("publish deltas", "", () => this.rt.publishDeltas({ lease: this.ref, deltas }));
    return res.watchers;
  }

  /** Reports an assistant message. */
  async say(text: string, node = ""): Promise<void> {
    await this.report({
      payload: { case: "message", value: { role: MessageRole.ASSISTANT, node, parts: [{ kind: { case: "text", value: text } }] } },
    });
  }

  /**
   * Asks whether a tool call may run, waits for a decision when it is gated, and reports
   * the call when it may run (the tool's result is yours to report with toolResult). A
   * rejected call is reported with its error result. Durable delivery gives the lease
   * up and throws Suspended; a replay finds the decision in the next lease.
   */
  async toolCall(c: Call): Promise<Gate> {
    if (!c.id || !c.name) throw new Error("toolCall needs Call.id and Call.name");
    let gate: Gate;
    const it = this.resolved.get(c.id) ?? this.pending.get(c.id);
    this.resolved.delete(c.id);
    if (it) gate = await this.waitOrUse(c, it);
    else gate = await this.check(c);
    if (gate.reported || gate.reportedWithCheck) return gate;
    const call = { callId: c.id, toolName: c.name, node: c.node, tripIndex: c.trip ?? 0 };
    if (gate.allowed) {
      await this.report({ payload: { case: "toolCall", value: { ...call, argumentsJson: gate.argumentsJson } } });
    } else {
      await this.report(
        { payload: { case: "toolCall", value: { ...call, argumentsJson: c.argumentsJson } } },
        {
          payload: {
            case: "toolResult",
            value: { callId: c.id, toolName: c.name, node: c.node, isError: true, result: { kind: { case: "stringValue", value: gate.reason } } },
          },
        },
      );
    }
    return gate;
  }

  /**
   * Asks, before a model call, whether it may run: a task counting against a budget whose
   * on_limit is approve (docs/budgets.md) needs a person's approval for each model call
   * once that budget is spent. Resolves when the call may run; without a round trip when
   * the lease does not say checkModelCalls. A held call waits for its decision
   * (interactive) or gives the lease up and throws Suspended (durable), as toolCall does;
   * a rejection throws ModelCallRejected (the task has failed).
   */
  async modelCall(c: ModelCall): Promise<void> {
    if (!this.lease.checkModelCalls) return;
    if (!c.id || !c.node) throw new Error("modelCall needs ModelCall.id and ModelCall.node");
    const res = await this.write("check model call", "", () =>
      this.rt.checkModelCall({ lease: this.ref, callId: c.id, agentName: c.node, tripIndex: c.trip ?? 0, model: c.model ?? "" }),
    );
    const call: Call = { id: c.id, name: "", argumentsJson: "", node: c.node, trip: c.trip, delivery: c.delivery, onInterrupt: c.onInterrupt };
    let gate: Gate;
    switch (res.outcome) {
      case GateOutcome.ALLOW:
        return;
      case GateOutcome.REJECT:
        gate = gateOf(call, res.decision);
        break;
      case GateOutcome.INTERRUPT:
        if (!res.interrupt?.interruptId) throw new Error("CheckModelCall answered INTERRUPT without an interrupt id");
        gate = await this.waitOrUse(call, res.interrupt);
        break;
      default:
        throw new Error(`CheckModelCall answered an unknown outcome ${res.outcome}`);
    }
    if (gate.allowed) return;
    this.endedAs = "failed by the control plane: model call rejected";
    throw new ModelCallRejected(c.id, gate.reason);
  }

  private async check(c: Call): Promise<Gate> {
    const res = await this.write("check tool call", "", () =>
      this.rt.checkToolCall({
        lease: this.ref,
        callId: c.id,
        toolName: c.name,
        toolDescription: c.description,
        argumentsJson: c.argumentsJson,
        agentName: c.node,
        tripIndex: c.trip ?? 0,
        // An allowed call is reported by the check itself: one round trip fewer.
        reportAllowedCall: true,
      }),
    );
    const base: Gate = { call: c, allowed: false, argumentsJson: "", reason: "", reported: false, resultReported: false, interrupt: res.interrupt, decision: res.decision };
    if (res.callReported) return { ...base, reported: true, resultReported: res.resultReported, reason: `call ${c.id} was already run under an earlier lease` };
    switch (res.outcome) {
      case GateOutcome.ALLOW:
        return { ...base, allowed: true, argumentsJson: c.argumentsJson, reportedWithCheck: res.reportedWithCheck };
      case GateOutcome.REJECT: {
        const g = gateOf(c, res.decision);
        return { ...g, reason: g.reason || res.reason };
      }
      case GateOutcome.INTERRUPT:
        if (!res.interrupt?.interruptId) throw new Error("gate answered INTERRUPT without an interrupt id");
        return this.waitOrUse(c, res.interrupt);
    }
    throw new Error(`gate answered an unknown outcome ${res.outcome}`);
  }

  private async waitOrUse(c: Call, it: Interrupt): Promise<Gate> {
    let dec = it.decision;
    if (it.state !== InterruptState.RESOLVED || !dec) {
      c.onInterrupt?.(it);
      if ((c.delivery ?? this.delivery) === "durable") {
        await this.suspend();
        throw new Suspended(it.interruptId, c.id);
      }
      dec = await this.awaitDecision(it.interruptId);
    }
    const g = { ...gateOf(c, dec), interrupt: it };
    if (g.allowed && dec.type === DecisionType.APPROVE) g.argumentsJson = c.argumentsJson;
    return g;
  }

  /**
   * Waits for the decision on an interrupt (interactive); a dropped stream is reopened.
   * When the worker's drain time runs out during the wait, the task is suspended: it waits
   * for the decision without a lease, and the next lease carries it.
   */
  async awaitDecision(interruptId: string): Promise<Decision> {
    try {
      return await this.awaitLoop(interruptId);
    } catch (e) {
      const r = this.signal.reason;
      if (r instanceof TaskStopped && r.kind === StopReason.STOPPING) this.waitStopped = true;
      throw e;
    }
  }

  private async awaitLoop(interruptId: string): Promise<Decision> {
    for (let failures = 0; ; failures++) {
      try {
        const dec = await this.write("await decision", "", async () => {
          for await (const res of this.rt.awaitDecision({ lease: this.ref, interruptId }, { signal: this.signal })) {
            if (res.kind.case === "decision") return res.kind.value;
            if (res.kind.case === "canceled") throw new TaskStopped(StopReason.CANCELED, res.kind.value.reason);
          }
          return undefined;
        });
        if (dec) return dec;
      } catch (e) {
        if (e instanceof TaskStopped) {
          this.stop(e);
          throw e;
        }
        const err = toAgentplaneError(e);
        if (this.signal.aborted || stopCause(err) || err.reason !== "" || failures >= 10) throw err;
      }
      await sleep(backoffMs(failures + 1), this.signal);
      if (this.signal.aborted) throw this.signal.reason;
    }
  }

  /**
   * Runs fn once per task and returns its result. When the task's history already records
   * step `name` (an earlier lease ran it, before a durable wait, a hand-back on stop, or a
   * crash after the record), it returns the recorded result without calling fn. Use it
   * for what must not happen twice before the handler may lose its lease: a message to
   * the user, a call to another system. The record is a runtime note (STEP_ATTR,
   * STEP_RESULT_ATTR) reported after fn resolved; the result must survive JSON and should
   * be small. A runtime that dies between fn and the record runs fn again; a durable
   * wait, a pause and a stop always come after it. `name` must be unique in the task.
   */
  async step<T>(name: string, fn: () => Promise<T>): Promise<T> {
    if (!name) throw new Error("step needs a name");
    if (this.steps === undefined) {
      const read = new Map<string, string>();
      for await (const ev of this.history()) {
        if (ev.payload.case !== "note") continue;
        const a = ev.payload.value.attributes;
        if (a[STEP_ATTR]) read.set(a[STEP_ATTR], a[STEP_RESULT_ATTR] ?? "null");
      }
      this.steps ??= read;
    }
    const rec = this.steps.get(name);
    if (rec !== undefined) return JSON.parse(rec) as T;
    const v = await fn();
    const json = JSON.stringify(v ?? null);
    await this.note(`step ${name} done`, { [STEP_ATTR]: name, [STEP_RESULT_ATTR]: json });
    this.steps.set(name, json);
    return v;
  }

  /** Reports a tool's result (isError when it failed). */
  async toolResult(c: Call, result: JsonValue, isError = false): Promise<void> {
    await this.report({
      payload: { case: "toolResult", value: { callId: c.id, toolName: c.name, node: c.node, isError, result: jsonValue(result) } },
    });
  }

  /** Gives the lease up while an interrupt is pending (durable delivery). */
  async suspend(): Promise<void> {
    const requestId = randomUUID();
    await this.write("suspend task", "suspended", () => this.rt.suspendTask({ lease: this.ref, requestId }));
  }

  /** Ends a chat turn: the task waits for ContinueTask. */
  async pause(message = "", node = ""): Promise<void> {
    const requestId = randomUUID();
    await this.write("pause task", "paused", () =>
      this.rt.pauseTask({
        lease: this.ref,
        node,
        requestId,
        message: message ? { role: MessageRole.ASSISTANT, parts: [{ kind: { case: "text", value: message } }] } : undefined,
      }),
    );
  }

  /**
   * Ends a turn whose allowed calls (gates from toolCall) are function tools the client
   * runs: the task waits in INPUT_REQUIRED on one TOOL_OUTPUT_REQUIRED interrupt per call
   * until ContinueTask supplies their outputs, and the lease is released. The next lease
   * carries them in continueToolResults.
   */
  async waitForToolOutputs(node: string, ...gates: Gate[]): Promise<Interrupt[]> {
    const requestId = randomUUID();
    const toolOutputCalls = gates.map((g) => ({
      callId: g.call.id,
      toolName: g.call.name,
      argumentsJson: g.argumentsJson,
      node: g.call.node,
      tripIndex: g.call.trip ?? 0,
    }));
    const res = await this.write("pause task for tool outputs", "paused", () =>
      this.rt.pauseTask({ lease: this.ref, node, requestId, toolOutputCalls }),
    );
    return res.toolOutputInterrupts;
  }

  /** Completes the task, with a final assistant message and/or a structured output. */
  async complete(output: { text?: string; structured?: JsonValue } = {}): Promise<void> {
    const requestId = randomUUID();
    await this.write("complete task", "completed", () =>
      this.rt.completeTask({
        lease: this.ref,
        requestId,
        output: {
          message: output.text ? { role: MessageRole.ASSISTANT, parts: [{ kind: { case: "text", value: output.text } }] } : undefined,
          structured: output.structured === undefined ? undefined : jsonValue(output.structured),
        },
      }),
    );
  }

  /** Fails the task; retry hands it back to the queue. */
  async fail(reason: string, message: string, retry = false): Promise<void> {
    const requestId = randomUUID();
    await this.write("fail task", retry ? "handed back" : "failed", () => this.rt.failTask({ lease: this.ref, reason, message, retry, requestId }));
  }
}


function gateOf(c: Call, dec: Decision | undefined): Gate {
  const g: Gate = { call: c, allowed: false, argumentsJson: "", reason: "", reported: false, resultReported: false, decision: dec };
  if (dec && (dec.type === DecisionType.APPROVE || dec.type === DecisionType.EDIT)) {
    g.allowed = true;
    g.argumentsJson = dec.argumentsJson;
  } else {
    g.reason = dec?.modelReason || dec?.reason || "";
  }
  return g;
}

// jsonValue builds a google.protobuf.Value from a plain JSON value.
function jsonValue(v: JsonValue): Value {
  return fromJson(ValueSchema, v);
}

/**
 * Worker leases tasks and runs them with a handler, `capacity` at a time, heartbeating
 * each lease. run() resolves once stop() was called (or its signal aborted) and every
 * running task has ended. A handler that throws fails its task (a Failure chooses the
 * reason and retry); one that throws Suspended, or ends the task itself, is done.
 */
export class Worker {
  private readonly stopping = new AbortController();
  private readonly running = new Set<Promise<void>>();
  private readonly tasks = new Set<Task>();
  private readonly o: Required<WorkerOptions>;

  constructor(
    private readonly rt: Client<typeof RuntimeService>,
    private readonly handler: Handler,
    options: WorkerOptions,
  ) {
    if (!options.runtimeId) throw new Error("Worker: runtimeId is required");
    this.o = {
      queues: [],
      capacity: 1,
      pollWaitMs: 20_000,
      delivery: "interactive",
      heartbeatFraction: 1 / 3,
      drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS,
      ...options,
    };
  }

  /**
   * Stops leasing; run() resolves once the running tasks have ended. The tasks still
   * running after drainMs (default: the drainTimeoutMs option, 20 s) are stopped (their
   * signal aborts with a TaskStopped "stopping") and handed back unless their handler ended
   * them: a task waiting for a decision is suspended (it resumes on whichever runtime is up
   * when the decision comes, no attempt counted), any other is returned to the queue. Go's
   * Stop(ctx) does the same. Resolves true when every task ended within drainMs.
   */
  async stop(drainMs: number = this.o.drainTimeoutMs): Promise<boolean> {
    this.stopping.abort();
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      Promise.all(this.running).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), drainMs))),
    ]);
    clearTimeout(timer);
    if (!drained) for (const t of this.tasks) t.stop(new TaskStopped(StopReason.STOPPING, "the runtime's drain time ran out"));
    return drained;
  }

  /**
   * Runs the worker until SIGINT or SIGTERM, the way a process manager stops it: the first
   * signal stops leasing and drains (stop()), a second hands the running tasks back at
   * once. Resolves once every task has ended, so the process can exit 0.
   */
  async runUntilSignal(signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM"]): Promise<void> {
    const hard = new AbortController();
    let stopping = false;
    const onSignal = () => {
      if (stopping) return hard.abort();
      stopping = true;
      void this.stop();
    };
    for (const s of signals) process.on(s, onSignal);
    try {
      await this.run(hard.signal);
    } finally {
      for (const s of signals) process.off(s, onSignal);
    }
  }

  /**
   * Leases and runs tasks until stop() or until signal aborts. An aborted signal also
   * stops the running tasks at once (their signal aborts with a TaskStopped "stopping")
   * and hands them back to the queue (FailTask retry) unless their handler ended them.
   */
  async run(signal?: AbortSignal): Promise<void> {
    const abortAll = () => {
      this.stopping.abort();
      for (const t of this.tasks) t.stop(new TaskStopped(StopReason.STOPPING, "the runtime is stopping"));
    };
    signal?.addEventListener("abort", abortAll, { once: true });
    if (signal?.aborted) abortAll();
    const stop = this.stopping.signal;
    let failures = 0;
    while (!stop.aborted) {
      const free = this.o.capacity - this.running.size;
      if (free <= 0) {
        await Promise.race([...this.running, new Promise((r) => stop.addEventListener("abort", r, { once: true }))]);
        continue;
      }
      let leases: Lease[];
      try {
        const res = await this.rt.leaseTasks(
          { runtimeId: this.o.runtimeId, maxTasks: free, queues: this.o.queues, wait: { seconds: BigInt(Math.ceil(this.o.pollWaitMs / 1000)) } },
          { signal: stop },
        );
        leases = res.leases;
        failures = 0;
      } catch (e) {
        if (stop.aborted) break;
        const err = toAgentplaneError(e);
        if (err.retryDelayMs === undefined && ![Code.Unavailable, Code.DeadlineExceeded, Code.Unknown, Code.Internal, Code.Canceled].includes(err.code)) throw err;
        await sleep(backoffMs(++failures, err), stop);
        continue;
      }
      for (const l of leases) {
        const t = new Task(this.rt, l, this.o.delivery);
        this.tasks.add(t);
        if (signal?.aborted) t.stop(new TaskStopped(StopReason.STOPPING, "the runtime is stopping"));
        const p = this.runTask(t).finally(() => {
          this.running.delete(p);
          this.tasks.delete(t);
        });
        this.running.add(p);
      }
    }
    await Promise.all(this.running);
  }

  private async runTask(t: Task): Promise<void> {
    // Acknowledge the lease before the handler runs (the control plane counts an attempt
    // only for an acknowledged lease); a task found canceled or lost still goes to the
    // handler, with its signal aborted.
    await this.beat(t, undefined);
    const hb = new AbortController();
    const beats = this.heartbeat(t, hb.signal);
    let error: unknown;
    try {
      await this.handler(t);
    } catch (e) {
      error = e;
    }
    hb.abort();
    await beats;
    if (t.ended !== "" || error instanceof Suspended) return;
    const stopped = t.signal.reason;
    if (stopped instanceof TaskStopped && stopped.kind === StopReason.STOPPING) {
      try {
        // A task stopped in an interactive wait is suspended, not failed: it waits for its
        // decision without a lease and without counting an attempt.
        if (t.stoppedWaiting) await t.suspend();
        else await t.fail("runtime.stopping", "the runtime stopped before the task ended", true);
      } catch {
        // The lease expires; the task is queued again.
      }
      return;
    }
    if (t.signal.aborted) return; // canceled or lease lost: not ours to write to any more
    if (error === undefined) return; // the lease expires and the task is queued again
    const f = error instanceof Failure ? error : new Failure("runtime.error", String((error as Error)?.message ?? error));
    try {
      await t.fail(f.reason || "runtime.error", f.message, f.retry);
    } catch {
      // The lease expires; the task is queued again.
    }
  }

  // heartbeat beats at a fraction of the time left on the lease until done.
  private async heartbeat(t: Task, done: AbortSignal): Promise<void> {
    while (!done.aborted && !t.signal.aborted && t.ended === "") {
      await sleep(Math.max((t.deadline - Date.now()) * this.o.heartbeatFraction, 10), done);
      if (done.aborted || t.ended !== "") return;
      await this.beat(t, done);
    }
  }

  // beat sends one heartbeat; a canceled task, a lost lease, or no success before the
  // deadline stops the task. Other errors are left to the next beat.
  private async beat(t: Task, done: AbortSignal | undefined): Promise<void> {
    try {
      const res = await this.rt.heartbeat({ lease: t.ref }, { signal: done });
      if (res.deadline) t.setDeadline(timestampMs(res.deadline));
      if (res.canceled) t.stop(new TaskStopped(StopReason.CANCELED, res.cancelReason));
    } catch (e) {
      if (done?.aborted) return;
      const cause = stopCause(toAgentplaneError(e));
      if (cause) return t.stop(cause);
      if (Date.now() >= t.deadline) t.stop(new TaskStopped(StopReason.LEASE_LOST, "no heartbeat succeeded before the lease deadline"));
    }
  }
}
