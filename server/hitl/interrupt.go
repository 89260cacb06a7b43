package hitl

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
)

// InterruptMeta is what an interrupt needs beyond the call: its identity, its task
// and the run context a reviewer sees.
type InterruptMeta struct {
	InterruptID   string
	TaskID        string
	Tenant        string
	SessionID     string
	OriginalInput string
	Now           time.Time
	// Timeout is the time until the deployment default applies; 0 means no deadline.
	Timeout time.Duration
}

// NewToolInterrupt builds the pending interrupt for a call the gate answered with
// INTERRUPT: the ApprovalRequest of docs/hitl.md plus the deadline and the args digest.
func NewToolInterrupt(m InterruptMeta, c Call, r GateResult) *agentplanev1.Interrupt {
	in := newInterrupt(m, agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL, c.AgentName, r.ArgsDigest)
	in.CallId = c.CallID
	req := &agentplanev1.ApprovalRequest{
		InterruptId:   m.InterruptID,
		ToolName:      c.ToolName,
		ArgumentsJson: c.ArgumentsJSON,
		Context:       m.approvalContext(c.AgentName, c.TripIndex, r.Tags),
		RequestTime:   timestamppb.New(m.Now),
	}
	if c.ToolDescription != "" {
		req.ToolDescription = &c.ToolDescription
	}
	in.Request = &agentplanev1.Interrupt_Approval{Approval: req}
	return in
}

// approvalContext is the run context of an ApprovalRequest a reviewer sees: the
// agent and trip asking, with m's session and original input.
func (m InterruptMeta) approvalContext(agent string, trip int32, tags []string) *agentplanev1.ApprovalContext {
	ac := &agentplanev1.ApprovalContext{AgentName: agent, TripIndex: trip, Tags: tags}
	if m.SessionID != "" {
		ac.SessionId = &m.SessionID
	}
	if m.OriginalInput != "" {
		ac.OriginalInput = &m.OriginalInput
	}
	return ac
}

// NewAutoPauseInterrupt builds the synthetic __auto_pause__ interrupt of a chat-mode
// turn end by node. It has no deadline: only ContinueTask resolves it. Its request is
// a TurnEndRequest; its args digest is the digest of empty text (nothing was asked
// about).
func NewAutoPauseInterrupt(m InterruptMeta, node string) *agentplanev1.Interrupt {
	m.Timeout = 0
	in := newInterrupt(m, agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE, node, ArgsDigest(""))
	req := &agentplanev1.TurnEndRequest{AgentName: node, RequestTime: timestamppb.New(m.Now)}
	if m.SessionID != "" {
		req.SessionId = &m.SessionID
	}
	in.Request = &agentplanev1.Interrupt_TurnEnd{TurnEnd: req}
	return in
}

// NewToolOutputInterrupt builds the interrupt of a reported call to a function tool
// the client executes (INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED): the task waits for the
// call's output, which only ContinueTask supplies. It has no deadline. call is the
// call as reported.
func NewToolOutputInterrupt(m InterruptMeta, node string, call *agentplanev1.ToolCall) *agentplanev1.Interrupt {
	m.Timeout = 0
	in := newInterrupt(m, agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED, node, ArgsDigest(call.GetArgumentsJson()))
	in.CallId = call.GetCallId()
	req := &agentplanev1.ToolOutputRequest{
		ToolName: call.GetToolName(), ArgumentsJson: call.GetArgumentsJson(), AgentName: node,
		TripIndex: call.GetTripIndex(), RequestTime: timestamppb.New(m.Now),
	}
	if m.SessionID != "" {
		req.SessionId = &m.SessionID
	}
	in.Request = &agentplanev1.Interrupt_ToolOutput{ToolOutput: req}
	return in
}

// ToolOutputInterruptID is the id of the TOOL_OUTPUT_REQUIRED interrupt of call
// callID of task taskID: derived, like InterruptID, but distinct from the id of the
// gate's record of the same call.
func ToolOutputInterruptID(taskID, callID string) string {
	return "out-" + InterruptID(taskID, callID)[len("in-"):]
}

func newInterrupt(m InterruptMeta, kind agentplanev1.InterruptKind, node, digest string) *agentplanev1.Interrupt {
	in := &agentplanev1.Interrupt{
		InterruptId: m.InterruptID,
		TaskId:      m.TaskID,
		Tenant:      m.Tenant,
		Kind:        kind,
		State:       agentplanev1.InterruptState_INTERRUPT_STATE_PENDING,
		ArgsDigest:  digest,
		Node:        node,
	}
	if m.Timeout > 0 {
		in.Deadline = timestamppb.New(m.Now.Add(m.Timeout))
	}
	return in
}

// Resolved returns a copy of in, RESOLVED with d. in is not modified.
func Resolved(in *agentplanev1.Interrupt, d *agentplanev1.Decision) *agentplanev1.Interrupt {
	out := cloneInterrupt(in)
	out.State = agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED
	out.Decision = d
	return out
}

// DeadlinePassed reports whether in is pending with a deadline at or before now.
func DeadlinePassed(in *agentplanev1.Interrupt, now time.Time) bool {
	return in.GetState() == agentplanev1.InterruptState_INTERRUPT_STATE_PENDING &&
		in.GetDeadline() != nil && !in.GetDeadline().AsTime().After(now)
}
