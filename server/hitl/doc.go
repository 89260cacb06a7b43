// Package hitl is the human-in-the-loop domain: which tool calls wait for a person,
// and how a person's ruling becomes the server's decision.
//
// The pure core, used on the hot path of RuntimeService.CheckToolCall:
//
//   - CompilePolicy / Compiler: an InterruptPolicy (allowlist, denylist, or a CEL
//     predicate over the policy context) is checked and compiled at StartTask; a bad
//     predicate is INVALID_ARGUMENT (POLICY_INVALID) naming line and column. The
//     Compiler caches compiled policies by content digest so the gate never
//     recompiles.
//   - Gate.Check: policy, always-gated calls (injected: A2A skills, destructive MCP
//     tools, caller tightenings) and the node's HITL mode give ALLOW, INTERRUPT or
//     REJECT with a synthesized decision. A predicate that fails at run time gates
//     the call (fail closed) and says so.
//   - ResolveMode: enabled / passthrough / disabled, with passthrough handed to the
//     enclosing frame and, at the top, to the control plane's reviewers.
//   - ArgsDigest: SHA-256 of the arguments exactly as the model wrote them (JSON
//     text, possibly malformed); decisions bind the arguments ruled on and the
//     arguments to run by it.
//   - InterruptID, DecidedCall, CheckRun: every answer of the gate is stored under an
//     id derived from the task and the call id (an interrupt, or the resolved record
//     of a call decided at once), and the runtime's report of the call is checked
//     against that decision: same tool, same arguments by digest (the ruled ones
//     for a rejection, which is reported too); CheckResult checks its result.
//   - DecideResolve, DeadlineDecision, DecideContinue: the server's decisions, bound
//     to interrupt, principal and digests; RenderReason applies
//     content_trust.hitl_reason_policy to the reason that reaches the model.
//
// Guarantees: no function here panics on input; every answer the gate cannot be sure
// of gates; a decision is built only for a pending interrupt of the right kind.
//
// The package is pure (no I/O, no store): the task domain builds chat-mode pauses
// with it, and subpackage approvals stores interrupts and delivers decisions.
package hitl
