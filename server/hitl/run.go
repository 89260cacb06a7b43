package hitl

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
)

// This file binds what a runtime runs to what was decided. Every answer of the gate
// is stored under an id derived from the task and the runtime's call id: a raised
// interrupt, or, for a call decided at once, a resolved record (DecidedCall). When
// the runtime reports the call (a ToolCall event), the task domain finds that record
// by the same id and CheckRun compares the report with the decision.

var callIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// InterruptID is the id of the record of the gate's answer for call callID of task
// taskID. It is derived, not drawn, so that a runtime retrying CheckToolCall (a lost
// response, a new lease replaying its turn) finds the answer it already got instead
// of raising a second interrupt, and so that the report of the call finds its
// decision.
func InterruptID(taskID, callID string) string {
	sum := sha256.Sum256([]byte(taskID + "\x00" + callID))
	return "in-" + strings.ToLower(callIDEncoding.EncodeToString(sum[:16]))
}

// DecidedCall is the record of a call the gate decided at once: ALLOW, or REJECT
// because the HITL mode is disabled. It is RESOLVED with r.Decision from the start,
// so the report of the call is checked against it exactly like a reviewer's decision.
// Nobody was asked, so it is not an interrupt anyone lists or resolves
// (DecidedAtCheck). It keeps the digest of the arguments, not the arguments: they
// travel in the runtime's ToolCall event, and checking the call needs only the digest.
func DecidedCall(m InterruptMeta, c Call, r GateResult) *agentplanev1.Interrupt {
	m.Timeout = 0
	c.ArgumentsJSON = ""
	in := NewToolInterrupt(m, c, r)
	d := proto.CloneOf(r.Decision)
	d.ArgumentsJson = ""
	in.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	in.Decision = d
	return in
}

// DecidedAtCheck reports whether in is the record of a call the gate decided at once
// (DecidedCall) rather than an interrupt a person was asked about.
func DecidedAtCheck(in *agentplanev1.Interrupt) bool {
	switch in.GetDecision().GetSource() {
	case agentplanev1.DecisionSource_DECISION_SOURCE_POLICY, agentplanev1.DecisionSource_DECISION_SOURCE_HITL_DISABLED:
		return true
	}
	return false
}

// OutcomeOf is the gate's answer recorded by in: ALLOW or REJECT for a call decided
// at once, INTERRUPT for one that waited (or waits) for a decision.
func OutcomeOf(in *agentplanev1.Interrupt) agentplanev1.GateOutcome {
	switch {
	case !DecidedAtCheck(in):
		return agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT
	case in.GetDecision().GetType() == agentplanev1.DecisionType_DECISION_TYPE_REJECT:
		return agentplanev1.GateOutcome_GATE_OUTCOME_REJECT
	}
	return agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW
}

// CheckRun refuses a reported tool call that the decision recorded for it (in, found
// by InterruptID) does not account for: the call still waits for a decision, names
// another tool, or has arguments whose digest is not the decision's args_digest (the
// original text for approve, ALLOW and reject, the reviewer's for edit). A rejected
// call is reported too, so that the transcript has it; it did not run, and its
// result must say so (CheckResult). The refusal is FAILED_PRECONDITION with reason
// TOOL_CALL_NOT_APPROVED. Whether the decision was already used is the caller's to
// check: it is stored beside the interrupt.
func CheckRun(in *agentplanev1.Interrupt, call *agentplanev1.ToolCall) error {
	id := call.GetCallId()
	if in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
		return NotApproved(id, "call %q has no tool-call decision", id)
	}
	if in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
		return NotApproved(id, "call %q still waits for a decision on interrupt %s; run it once the decision approves it",
			id, in.GetInterruptId())
	}
	if tool := in.GetApproval().GetToolName(); tool != call.GetToolName() {
		return NotApproved(id, "call %q was checked as a call to tool %q, not %q", id, tool, call.GetToolName())
	}
	d := in.GetDecision()
	want := d.GetArgsDigest()
	if Rejected(d) {
		// Decisions recorded before rejections carried args_digest.
		want = d.GetRuledArgsDigest()
	}
	if digest := ArgsDigest(call.GetArgumentsJson()); digest != want {
		if Rejected(d) {
			return NotApproved(id, "call %q was rejected; report it with the arguments ruled on (digest %s), not other ones (digest %s)",
				id, want, digest).WithMetadata("args_digest", want)
		}
		return NotApproved(id, "the arguments of call %q (digest %s) are not the ones %s (digest %s); run exactly the decision's arguments_json",
			id, digest, decisionWord(d), want).WithMetadata("args_digest", want)
	}
	return nil
}

// Rejected reports whether d lets its call not run.
func Rejected(d *agentplanev1.Decision) bool {
	switch d.GetType() {
	case agentplanev1.DecisionType_DECISION_TYPE_APPROVE, agentplanev1.DecisionType_DECISION_TYPE_EDIT:
		return false
	}
	return true
}

// CheckResult refuses a reported tool result that the call's decision (in, as for
// CheckRun) does not allow: a rejected call did not run, so its result is an error
// (is_error, carrying what the model is told). A result naming another tool than
// the call is refused too.
func CheckResult(in *agentplanev1.Interrupt, res *agentplanev1.ToolResult) error {
	id := res.GetCallId()
	if tool := in.GetApproval().GetToolName(); res.GetToolName() != "" && tool != res.GetToolName() {
		return apierr.FailedPrecondition(apierr.ReasonToolResultUnexpected, "call %q is a call to tool %q, not %q", id, tool, res.GetToolName()).
			WithMetadata("call_id", id)
	}
	if d := in.GetDecision(); Rejected(d) && !res.GetIsError() {
		return apierr.FailedPrecondition(apierr.ReasonToolResultUnexpected,
			"call %q was %s by %s and did not run; report its result with is_error set, carrying the decision's model_reason", id, decisionWord(d), d.GetDecidedBy()).
			WithMetadata("call_id", id)
	}
	return nil
}

// NotApproved is the refusal of a reported tool call that no decision lets run.
func NotApproved(callID, format string, args ...any) *apierr.Error {
	return apierr.FailedPrecondition(apierr.ReasonToolCallNotApproved, format, args...).WithMetadata("call_id", callID)
}
