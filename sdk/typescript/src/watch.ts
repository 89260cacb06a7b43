// watch: a task's events as an async iterator that survives dropped connections.
import type { Client } from "@connectrpc/connect";
import type { TaskService, WatchTaskResponse } from "../gen/agentplane/v1/task_service_pb.js";
import { toAgentplaneError } from "./errors.js";
import { retryPolicy } from "./api.gen.js";
import { backoffMs, retryable, sleep } from "./retry.js";

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
   * How many reopenings in a row (without a message in between) before giving up and
   * throwing the last error. Default retryPolicy.watchReconnects (10), as in every SDK.
   */
  maxReconnects?: number;
  /**
   * Pause before the first reopening, doubled each time up to retryPolicy.backoffMaxMs
   * (2 s), jittered. Default retryPolicy.backoffBaseMs (100 ms).
   */
  backoffMs?: number;
}

const watchMethod = "agentplane.v1.TaskService/WatchTask";

/**
 * watch follows a task: its events from afterSequence on, then live ones, with
 * `caughtUp` once the replay has reached the present and `messageDelta`s while a
 * message streams in. When the stream breaks with an error the retry policy allows for
 * WatchTask (UNAVAILABLE: the connection dropped, the server restarted; a retryable
 * reason) it reopens the watch after the last event it yielded, so events come with no
 * gap and no duplicate (deltas sent while it was away are lost: the full message follows
 * as an event), and gives up after maxReconnects reopenings in a row without a message.
 * It ends when the task is terminal and its events are all delivered; any other error
 * (TASK_NOT_FOUND, ...) is thrown at once. Go's Client.Watch and Python's Client.watch
 * do the same (docs/clients.md, "Retries, request ids and reconnection").
 */
export async function* watch(
  tasks: Client<typeof TaskService>,
  taskId: string,
  options: WatchOptions = {},
): AsyncGenerator<WatchItem, void, undefined> {
  let last = BigInt(options.afterSequence ?? 0);
  const maxReconnects = options.maxReconnects ?? retryPolicy.watchReconnects;
  let failures = 0;
  for (;;) {
    try {
      for await (const res of tasks.watchTask({ taskId, afterSequence: last }, { signal: options.signal })) {
        failures = 0;
        const item = res.kind;
        switch (item.case) {
          case "event":
            if (item.value.sequence <= last) continue; // already yielded before a reconnection
            last = item.value.sequence;
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
      if (!retryable(watchMethod, err, options.signal) || failures >= maxReconnects) throw err;
      failures++;
      await sleep(backoffMs(failures, err, options.backoffMs), options.signal);
    }
  }
}
