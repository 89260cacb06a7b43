// watch: a task's events as an async iterator that survives dropped connections.
import { Code, type Client } from "@connectrpc/connect";
import type { TaskService, WatchTaskResponse } from "../gen/agentplane/v1/task_service_pb.js";
import { AgentplaneError, toAgentplaneError } from "./errors.js";

/** One item of a watch: WatchTaskResponse's oneof, `{case, value}`. */
export type WatchItem = Exclude<WatchTaskResponse["kind"], { case: undefined }>;

export interface WatchOptions {
  /** Start after this event sequence (0, the default, replays the whole history). */
  afterSequence?: bigint | number;
  /** Ends the watch (the iterator throws an AgentplaneError with Code.Canceled). */
  signal?: AbortSignal;
  /** Also yield the server's keepalives (skipped by default). */
  keepalives?: boolean;
  /**
   * How many reconnections in a row (without an event in between) before giving up and
   * throwing the last error. Default 10.
   */
  maxReconnects?: number;
  /** Delay before the first reconnection, doubled each time up to 5 s. Default 200 ms. */
  backoffMs?: number;
}

// Codes after which the same watch may be opened again: the connection or the server
// went away, not the request. Node reports a connection that died under a stream as
// Canceled ("http/2 stream closed with error code CANCEL"); the caller's own cancel
// comes through the signal, which is checked first.
const transient = new Set<Code>([
  Code.Unavailable,
  Code.Canceled,
  Code.Unknown,
  Code.Internal,
  Code.DeadlineExceeded,
  Code.Aborted,
]);

function retryable(err: AgentplaneError, signal: AbortSignal | undefined): boolean {
  if (signal?.aborted) return false;
  // A status the server sent with a reason is its answer, not a dropped connection.
  if (err.reason !== "" && err.code !== Code.Unavailable) return false;
  return transient.has(err.code);
}

/**
 * watch follows a task: its events from afterSequence on, then live ones, with
 * `caughtUp` once the replay has reached the present and `messageDelta`s while a
 * message streams in. When the connection drops it reopens the watch after the last
 * event it yielded, so events come with no gap and no duplicate (deltas sent while it
 * was away are lost: the full message follows as an event). It ends when the task is
 * terminal and its events are all delivered; a server error with a reason
 * (TASK_NOT_FOUND, ...) is thrown at once.
 */
export async function* watch(
  tasks: Client<typeof TaskService>,
  taskId: string,
  options: WatchOptions = {},
): AsyncGenerator<WatchItem, void, undefined> {
  let last = BigInt(options.afterSequence ?? 0);
  const maxReconnects = options.maxReconnects ?? 10;
  let delay = options.backoffMs ?? 200;
  let failures = 0;
  for (;;) {
    try {
      for await (const res of tasks.watchTask({ taskId, afterSequence: last }, { signal: options.signal })) {
        const item = res.kind;
        switch (item.case) {
          case "event":
            if (item.value.sequence <= last) continue; // already yielded before a reconnection
            last = item.value.sequence;
            failures = 0;
            delay = options.backoffMs ?? 200;
            yield item;
            break;
          case "keepalive":
            if (options.keepalives) yield item;
            break;
          case "caughtUp":
          case "messageDelta":
            yield item;
            break;
          default:
            break; // an arm added after this SDK: skip it
        }
      }
      return;
    } catch (e) {
      const err = toAgentplaneError(e);
      if (!retryable(err, options.signal) || failures >= maxReconnects) throw err;
      failures++;
      await sleep(delay, options.signal);
      delay = Math.min(delay * 2, 5_000);
    }
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
