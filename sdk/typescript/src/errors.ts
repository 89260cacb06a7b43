// AgentplaneError: a failed call with its status details decoded.
import { Code, ConnectError } from "@connectrpc/connect";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RetryInfoSchema,
} from "../gen/google/rpc/error_details_pb.js";
import {
  SpecViolationsSchema,
  type SpecViolation,
} from "../gen/agentplane/v1/spec_service_pb.js";


/** One invalid request field, from a google.rpc.BadRequest detail. */
export interface FieldViolation {
  field: string;
  description: string;
  reason: string;
}

/**
 * AgentplaneError is what every call of a client made by createClient throws when the
 * server answers with an error (and what a connection failure becomes). It is a
 * ConnectError, so `code` is the gRPC code (`Code.NotFound`, ...), and it carries the
 * details agentplane attaches: branch on `reason` (docs/errors.md), never on the message.
 */
export class AgentplaneError extends ConnectError {
  // name stays "ConnectError": ConnectError's instanceof (and so ConnectError.from) goes by
  // the name, so an AgentplaneError is still a ConnectError to code written for Connect.

  /** The prototype chain decides (ConnectError's own check would take any ConnectError). */
  static override [Symbol.hasInstance](v: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(this, v);
  }

  /** The ErrorInfo reason ("TASK_NOT_FOUND"), or "" when the status carried none. */
  readonly reason: string;
  /** The ErrorInfo domain ("agentplane.dev"), or "". */
  readonly domain: string;
  /** The ErrorInfo metadata (`metadata` is the response's headers and trailers, as in ConnectError). */
  readonly reasonMetadata: Record<string, string>;
  /** Every SpecViolation of an agentplane.v1.SpecViolations detail (an invalid spec). */
  readonly specViolations: SpecViolation[];
  /** Every field violation of a google.rpc.BadRequest detail. */
  readonly fieldViolations: FieldViolation[];
  /** A google.rpc.RetryInfo delay in milliseconds, or undefined when none was sent. */
  readonly retryDelayMs: number | undefined;

  constructor(err: ConnectError) {
    super(err.rawMessage, err.code, err.metadata, undefined, err.cause ?? err);
    this.details = err.details;
    const info = err.findDetails(ErrorInfoSchema)[0];
    this.reason = info?.reason ?? "";
    this.domain = info?.domain ?? "";
    this.reasonMetadata = { ...(info?.metadata ?? {}) };
    this.specViolations = err.findDetails(SpecViolationsSchema).flatMap((d) => d.violations);
    this.fieldViolations = err
      .findDetails(BadRequestSchema)
      .flatMap((d) => d.fieldViolations)
      .map((v) => ({ field: v.field, description: v.description, reason: v.reason }));
    const retry = err.findDetails(RetryInfoSchema)[0]?.retryDelay;
    this.retryDelayMs =
      retry === undefined ? undefined : Number(retry.seconds) * 1000 + Math.floor(retry.nanos / 1e6);
  }

  /** The gRPC code's name ("NotFound"). */
  get codeName(): string {
    return Code[this.code];
  }
}

/** toAgentplaneError turns anything a call threw into an AgentplaneError. */
export function toAgentplaneError(err: unknown): AgentplaneError {
  if (err instanceof AgentplaneError) return err;
  return new AgentplaneError(ConnectError.from(err));
}
