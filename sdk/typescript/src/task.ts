// TaskHandle and the decision helpers: what a caller reaches for first, over the
// generated clients (which stay available for everything else).
import { randomUUID } from "node:crypto";
import { fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import type { HitlService, ResolveInterruptRequestSchema } from "../gen/agentplane/v1/hitl_service_pb.js";
import { InterruptState, type Interrupt } from "../gen/agentplane/v1/hitl_pb.js";
import { MessageRole, TaskState, type MessageSchema, type Task } from "../gen/agentplane/v1/task_pb.js";
import type { StartTaskResponse, TaskService } from "../gen/agentplane/v1/task_service_pb.js";
import { watch, type WatchItem, type WatchOptions } from "./watch.js";

/** Options of a helper's call. */
export interface CallOptions {
  /**
   * The call's request id. Without it every call gets a fresh one; choose one and send
   * it again to repeat a call safely (the server answers the first call's result).
   */
  requestId?: string;
}

/** Options of approve and edit. */
export interface ResolveOptions extends CallOptions {
  /** An audit note. */
  reason?: string;
  /** Resolve against the digest the reviewer saw (Interrupt.argsDigest) instead of the one the helper reads. */
  argsDigest?: string;
}

export interface WaitOptions {
  /** Also return when the task is INPUT_REQUIRED (an interrupt to resolve, a chat turn, tool outputs to send). */
  untilInputRequired?: boolean;
  /** Stops waiting (the promise rejects with an AgentplaneError, Code.Canceled). */
  signal?: AbortSignal;
}

/** The output of a client-executed tool call, for continueToolOutputs: `result` is plain JSON. */
export interface ToolOutputInit {
  callId: string;
  result: JsonValue;
  isError?: boolean;
}

type MessageInit = MessageInitShape<typeof MessageSchema>;

/** terminal reports whether a task in this state has ended for good. */
export function terminal(state: TaskState): boolean {
  return state === TaskState.COMPLETED || state === TaskState.FAILED || state === TaskState.CANCELED;
}

/**
 * TaskHandle is one task, for the calls a caller makes on it. `ap.start(req)` returns
 * one; `ap.task(id)` makes one for an existing task id.
 */
export class TaskHandle {
  constructor(
    private readonly tasks: Client<typeof TaskService>,
    private readonly hitl: Client<typeof HitlService>,
    /** The task's id. */
    readonly id: string,
    /** StartTask's response (undefined for a handle made by `ap.task(id)`). */
    readonly started?: StartTaskResponse,
  ) {}

  /** The task as it is now. */
  async get(): Promise<Task> {
    return (await this.tasks.getTask({ taskId: this.id })).task!;
  }

  /** The task's events from the first, resuming after a dropped connection (see watch()). */
  watch(options?: WatchOptions): AsyncGenerator<WatchItem, void, undefined> {
    return watch(this.tasks, this.id, options);
  }

  /**
   * Resolves with the task once it is in a terminal state (COMPLETED, FAILED, CANCELED),
   * or, with `untilInputRequired`, INPUT_REQUIRED. A task that waits for input is not
   * terminal: without the option wait keeps waiting while someone else answers it. The
   * state is read with GetTask whenever the watch reports a change, so what it returns is
   * the state the task is in, never one it passed through earlier.
   */
  async wait(options: WaitOptions = {}): Promise<Task> {
    const done = (s: TaskState) => terminal(s) || (options.untilInputRequired === true && s === TaskState.INPUT_REQUIRED);
    const local = new AbortController();
    const stop = () => local.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", stop, { once: true });
    try {
      let first = true;
      for await (const item of this.watch({ signal: local.signal })) {
        // Read the state once the stream is open (its first item), then after each change to a state wanted.
        const changed = item.case === "event" && item.value.payload.case === "stateChanged" ? item.value.payload.value.toState : undefined;
        if (!first && (changed === undefined || !done(changed))) continue;
        first = false;
        const task = await this.get();
        if (done(task.state)) return task;
      }
      const task = await this.get();
      if (done(task.state)) return task;
      throw new Error(`client: the watch of task ${this.id} ended before it was done`);
    } finally {
      options.signal?.removeEventListener("abort", stop);
      local.abort();
    }
  }

  /** Cancels the task (CancelTask). */
  async cancel(reason = "", options: CallOptions = {}): Promise<Task> {
    return (await this.tasks.cancelTask({ taskId: this.id, reason, requestId: options.requestId ?? randomUUID() })).task!;
  }

  /** Answers a chat pause with the user's next message (text, or a Message). */
  async continue(message: string | MessageInit, options: CallOptions = {}): Promise<Task> {
    const value = typeof message === "string" ? { role: MessageRole.USER, parts: [{ kind: { case: "text" as const, value: message } }] } : message;
    return (
      await this.tasks.continueTask({ taskId: this.id, input: { case: "message", value }, requestId: options.requestId ?? randomUUID() })
    ).task!;
  }

  /** Sends the outputs of the client-executed tool calls the task waits for, one per pending call. */
  async continueToolOutputs(outputs: ToolOutputInit[], options: CallOptions = {}): Promise<Task> {
    const value = { outputs: outputs.map((o) => ({ callId: o.callId, result: fromJson(ValueSchema, o.result), isError: o.isError ?? false })) };
    return (
      await this.tasks.continueTask({ taskId: this.id, input: { case: "toolOutputs", value }, requestId: options.requestId ?? randomUUID() })
    ).task!;
  }

  /** The task's pending interrupts (ListInterrupts, first page: a task has few at a time). */
  async interrupts(): Promise<Interrupt[]> {
    return (await this.hitl.listInterrupts({ taskId: this.id, states: [InterruptState.PENDING] })).interrupts;
  }
}

type Decision = MessageInitShape<typeof ResolveInterruptRequestSchema>["decision"];

/**
 * resolve reads the interrupt, then resolves it against its argument digest (or the one
 * given), with a request id: a call whose arguments changed in between is refused
 * (FailedPrecondition, INTERRUPT_ARGS_MISMATCH) instead of decided, and repeating the
 * same call with the same requestId is safe.
 */
export async function resolve(
  hitl: Client<typeof HitlService>,
  interruptId: string,
  decision: Decision,
  options: ResolveOptions,
): Promise<Interrupt> {
  const argsDigest = options.argsDigest ?? (await hitl.getInterrupt({ interruptId })).interrupt?.argsDigest ?? "";
  const res = await hitl.resolveInterrupt({ interruptId, decision, argsDigest, requestId: options.requestId ?? randomUUID() });
  return res.interrupt!;
}
