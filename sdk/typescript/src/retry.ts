// The retry policy of every agentplane SDK (docs/clients.md, "Retries, request ids and
// reconnection"), over the tables tools/sdkgen generates from the API (api.gen.ts):
// which RPCs may be repeated (their idempotency_level), after which errors, with which
// backoff.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Reason, retryPolicy, retryableReasons, rpcs } from "./api.gen.js";
import { AgentplaneError, toAgentplaneError } from "./errors.js";

const declared: ReadonlySet<string> = new Set<string>(Object.values(Reason));

// The Node.js error codes of a connection that broke under a call (connect-node reports
// them as ABORTED, INTERNAL or UNAVAILABLE), and the HTTP/2 resets of its streams.
const nodeTransportErrors: ReadonlySet<string> = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "ERR_STREAM_DESTROYED",
  "ERR_HTTP2_INVALID_STREAM",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_INVALID_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
]);
const h2Reset = /^http\/2 stream closed with error code (CANCEL|INTERNAL_ERROR|REFUSED_STREAM)\b/;

/**
 * The code an error counts as. Node's HTTP/2 reports a call whose connection broke (the
 * server went away) as CANCELED ("http/2 stream closed with error code CANCEL"), ABORTED
 * ("read ECONNRESET") or INTERNAL, without a status from the server. Such an error, with
 * no agentplane reason and when the caller did not abort, counts as the UNAVAILABLE the
 * Go and Python SDKs see for the same event; any other error (one an interceptor of yours
 * throws, say) keeps its code.
 */
export function effectiveCode(err: AgentplaneError, signal?: AbortSignal): Code {
  if (err.reason === "" && !signal?.aborted && brokenTransport(err)) return Code.Unavailable;
  return err.code;
}

function brokenTransport(err: AgentplaneError): boolean {
  if (h2Reset.test(err.rawMessage)) return true;
  let e: unknown = err.cause;
  for (let depth = 0; depth < 8 && e instanceof Error; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && nodeTransportErrors.has(code)) return true;
    if (e instanceof ConnectError && h2Reset.test(e.rawMessage)) return true;
    e = e.cause;
  }
  return false;
}

/**
 * Whether a call of method ("agentplane.v1.TaskService/GetTask") that failed with err may
 * be made again unchanged: the RPC is NO_SIDE_EFFECTS or IDEMPOTENT in the API, and
 * either the error's reason is declared retryable (STORE_UNAVAILABLE, LIMIT_CONCURRENCY,
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
