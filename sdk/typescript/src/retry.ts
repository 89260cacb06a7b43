// The retry policy of every agentplane SDK (docs/clients.md, "Retries, request ids and
// reconnection"), over the tables tools/sdkgen generates from the API (api.gen.ts):
// which RPCs may be repeated (their idempotency_level), after which errors, with which
// backoff.
import { Code, type Interceptor } from "@connectrpc/connect";
import { Reason, retryPolicy, retryableReasons, rpcs } from "./api.gen.js";
import { AgentplaneError, toAgentplaneError } from "./errors.js";

const declared: ReadonlySet<string> = new Set<string>(Object.values(Reason));
const transportCodes: readonly Code[] = [Code.Canceled, Code.Aborted, Code.Internal, Code.Unknown];

/**
 * The code an error counts as. Node's HTTP/2 reports a stream whose connection died
 * (the server went away) as CANCELED ("stream closed with error code CANCEL"), ABORTED
 * ("read ECONNRESET"), INTERNAL or UNKNOWN, without a status from the server; with no
 * agentplane reason (no agentplane reason comes with these codes but INTERNAL's own),
 * and when the caller did not abort, that is the UNAVAILABLE the Go and Python SDKs see
 * for the same event.
 */
export function effectiveCode(err: AgentplaneError, signal?: AbortSignal): Code {
  if (err.reason === "" && !signal?.aborted && transportCodes.includes(err.code)) {
    return Code.Unavailable;
  }
  return err.code;
}

/**
 * Whether a call of method ("agentplane.v1.TaskService/GetTask") that failed with err may
 * be made again unchanged: the RPC is NO_SIDE_EFFECTS or IDEMPOTENT in the API, and
 * either the error's reason is declared retryable (store.unavailable, limit.concurrency,
 * ...) or it has no declared reason and its code is one the policy retries for that
 * level (UNAVAILABLE, DEADLINE_EXCEEDED).
 */
export function retryable(method: string, err: AgentplaneError, signal?: AbortSignal): boolean {
  const p = rpcs[method];
  if (p === undefined || p.idempotency === "IDEMPOTENCY_UNKNOWN" || signal?.aborted) return false;
  if (declared.has(err.reason)) return retryableReasons.has(err.reason);
  return retryPolicy.codes[p.idempotency].includes(effectiveCode(err, signal));
}

/**
 * The pause before retry number n (from 1): retryPolicy.backoffBaseMs doubled per
 * retry up to backoffMaxMs, drawn from [(1-jitter)*d, d], and never shorter than the
 * error's RetryInfo delay.
 */
export function backoffMs(n: number, err?: AgentplaneError, baseMs: number = retryPolicy.backoffBaseMs): number {
  let d = baseMs;
  for (let i = 1; i < n && d < retryPolicy.backoffMaxMs; i++) d *= 2;
  d = Math.min(d, Math.max(retryPolicy.backoffMaxMs, baseMs));
  const low = d * (1 - retryPolicy.jitter);
  return Math.max(low + Math.random() * (d - low), err?.retryDelayMs ?? 0);
}

/** Waits ms, or less when signal aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
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

/**
 * retryInterceptor repeats a unary call after an error `retryable` allows, with the same
 * request (so the same request id, which the request-id interceptor outside it set once),
 * up to retryPolicy.attempts calls, while the call's signal (its timeout included) lasts.
 */
export const retryInterceptor: Interceptor = (next) => async (req) => {
  if (req.stream) return next(req);
  const method = `${req.service.typeName}/${req.method.name}`;
  for (let attempt = 1; ; attempt++) {
    try {
      return await next(req);
    } catch (e) {
      const err = toAgentplaneError(e);
      if (attempt >= retryPolicy.attempts || !retryable(method, err, req.signal)) throw e;
      await sleep(backoffMs(attempt, err), req.signal);
      if (req.signal.aborted) throw e;
    }
  }
};
