package approvals

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	"github.com/agentplane/agentplane/server/tasks"
)

// TestReportedToolCallsRunOnlyWhatWasDecided drives each way a call can be decided
// through CheckToolCall (and ResolveInterrupt), then reports the call as a runtime
// does before running it: only the decided tool with the decided args passes, once. A
// rejected call is reported too (for the transcript), with the arguments ruled on.
func TestReportedToolCallsRunOnlyWhatWasDecided(t *testing.T) {
	orig := map[string]any{"path": "/tmp/c1", "data": "x"}
	edited := map[string]any{"path": "/tmp/safe"}
	tests := []struct {
		name string
		// policy nil: the task has none (a plain agent then rejects gated calls).
		policy *agentplanev1.InterruptPolicy
		tool   string
		// decide rules on the interrupt, when the call was gated.
		decide func(id string) *agentplanev1.ResolveInterruptRequest
		// report is what the runtime reports; ok says it may run.
		report map[string]any
		ok     bool
	}{
		{"allowed by policy, same args", allowlist("fs.write"), "fs.read", nil, orig, true},
		{"allowed by policy, other args", allowlist("fs.write"), "fs.read", nil, edited, false},
		{"approved, same args", allowlist("fs.write"), "fs.write", approve, orig, true},
		{"approved, other args", allowlist("fs.write"), "fs.write", approve, edited, false},
		{"edited, edited args", allowlist("fs.write"), "fs.write", func(id string) *agentplanev1.ResolveInterruptRequest { return edit(id, args(t, edited)) }, edited, true},
		{"edited, original args", allowlist("fs.write"), "fs.write", func(id string) *agentplanev1.ResolveInterruptRequest { return edit(id, args(t, edited)) }, orig, false},
		{"rejected by a reviewer, ruled args", allowlist("fs.write"), "fs.write", func(id string) *agentplanev1.ResolveInterruptRequest { return reject(id, "no") }, orig, true},
		{"rejected by a reviewer, other args", allowlist("fs.write"), "fs.write", func(id string) *agentplanev1.ResolveInterruptRequest { return reject(id, "no") }, edited, false},
		{"still pending", allowlist("fs.write"), "fs.write", nil, orig, false},
		{"rejected at once (no reviewer), ruled args", nil, "a2a__bank__pay", nil, orig, true},
		{"rejected at once (no reviewer), other args", nil, "a2a__bank__pay", nil, edited, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testConfig())
			ref := e.startAndLease(t, tenant, func(p *tasks.StartParams) { p.InterruptPolicy = tt.policy })
			resp, err := e.svc.CheckToolCall(ctx, checkReq(ref, "c1", tt.tool, args(t, orig)))
			if err != nil {
				t.Fatal(err)
			}
			if tt.decide != nil {
				if _, err := e.svc.ResolveInterrupt(ctx, tenant, "alice", tt.decide(resp.GetInterrupt().GetInterruptId())); err != nil {
					t.Fatal(err)
				}
			}
			before := e.task(t, tenant, ref.GetTaskId()).GetLastSequence()
			err = e.report(ref, "c1", tt.tool, args(t, tt.report))
			rec := e.record(t, tenant, hitl.InterruptID(ref.GetTaskId(), "c1"))
			if !tt.ok {
				wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
				if after := e.task(t, tenant, ref.GetTaskId()).GetLastSequence(); after != before || rec.GetConsumedEpoch() != 0 {
					t.Fatalf("a refused report wrote something: sequence %d -> %d, consumed_epoch %d", before, after, rec.GetConsumedEpoch())
				}
				return
			}
			if err != nil {
				t.Fatalf("the decided call was refused: %v", err)
			}
			if rec.GetConsumedEpoch() != ref.GetEpoch() {
				t.Errorf("consumed_epoch = %d, want the reporting lease's %d", rec.GetConsumedEpoch(), ref.GetEpoch())
			}
			// Single use: the same call cannot be reported again.
			wantErr(t, e.report(ref, "c1", tt.tool, args(t, tt.report)), codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
		})
	}
}

func TestReportedToolCallRefusals(t *testing.T) {
	e := newEnv(t, testConfig())
	ref := e.startAndLease(t, tenant)
	a := args(t, map[string]any{"path": "/tmp/a"})
	if _, err := e.svc.CheckToolCall(ctx, checkReq(ref, "c-read", "fs.read", a)); err != nil {
		t.Fatal(err)
	}
	toolCall := func(callID, tool string, a string) *agentplanev1.RuntimeEvent {
		return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_ToolCall{ToolCall: &agentplanev1.ToolCall{CallId: callID, ToolName: tool, ArgumentsJson: a}}}
	}
	msg := &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: &agentplanev1.Message{
		Role: agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, Parts: []*agentplanev1.Part{{Kind: &agentplanev1.Part_Text{Text: "reading"}}},
	}}}
	tests := []struct {
		name   string
		events []*agentplanev1.RuntimeEvent
		code   codes.Code
		reason apierr.Reason
	}{
		{"never checked", []*agentplanev1.RuntimeEvent{toolCall("c-unchecked", "fs.read", a)}, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved},
		{"another tool under the call's decision", []*agentplanev1.RuntimeEvent{toolCall("c-read", "fs.delete", a)}, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved},
		{"the whole report, with a message before", []*agentplanev1.RuntimeEvent{msg, toolCall("c-unchecked", "fs.read", a)}, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved},
		{"twice in one report", []*agentplanev1.RuntimeEvent{toolCall("c-read", "fs.read", a), toolCall("c-read", "fs.read", a)}, codes.FailedPrecondition, apierr.ReasonToolCallNotApproved},
		{"without a call id", []*agentplanev1.RuntimeEvent{toolCall("", "fs.read", a)}, codes.InvalidArgument, apierr.ReasonEventInvalid},
		{"without a tool name", []*agentplanev1.RuntimeEvent{toolCall("c-read", "", a)}, codes.InvalidArgument, apierr.ReasonEventInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.task(t, tenant, ref.GetTaskId()).GetLastSequence()
			_, err := e.tasks.ReportEvents(ctx, ref, tasks.Request{}, tt.events)
			wantErr(t, err, tt.code, tt.reason)
			if after := e.task(t, tenant, ref.GetTaskId()).GetLastSequence(); after != before {
				t.Errorf("a refused report appended %d events", after-before)
			}
		})
	}
	// Nothing above used the decision of c-read.
	if err := e.report(ref, "c-read", "fs.read", a); err != nil {
		t.Fatalf("the allowed call was refused after refused reports: %v", err)
	}
}

// TestAnswersGivenAtOnce: ALLOW and at-once rejections are recorded so that reports
// can be checked, answered the same on a retry, and are not interrupts.
func TestAnswersGivenAtOnce(t *testing.T) {
	e := newEnv(t, testConfig())
	ref := e.startAndLease(t, tenant)
	a := args(t, map[string]any{"path": "/tmp/a"})
	first, err := e.svc.CheckToolCall(ctx, checkReq(ref, "c-read", "fs.read", a))
	if err != nil {
		t.Fatal(err)
	}
	d := first.GetDecision()
	if first.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_ALLOW || d.GetSource() != agentplanev1.DecisionSource_DECISION_SOURCE_POLICY ||
		d.GetDecidedBy() != hitl.SystemPrincipal || d.GetArgumentsJson() != a {
		t.Fatalf("ALLOW answer = %v", first)
	}
	before, _ := e.events(t, tenant, ref.GetTaskId())
	again, err := e.svc.CheckToolCall(ctx, checkReq(ref, "c-read", "fs.read", args(t, map[string]any{"path": "/tmp/a"})))
	if err != nil || !proto.Equal(again, first) {
		t.Fatalf("retry = %v, %v; want the first answer %v", again, err, first)
	}
	if after, _ := e.events(t, tenant, ref.GetTaskId()); len(after) != len(before) {
		t.Errorf("a retried check logged %d more events", len(after)-len(before))
	}

	id := hitl.InterruptID(ref.GetTaskId(), "c-read")
	rec := e.record(t, tenant, id)
	if rec.GetInterrupt().GetApproval().GetArgumentsJson() != "" || rec.GetInterrupt().GetDecision().GetArgumentsJson() != "" {
		t.Error("the record of an allowed call keeps the arguments, not only their digest")
	}
	// Not an interrupt: nobody can see, resolve or await it.
	_, err = e.svc.GetInterrupt(ctx, tenant, id)
	wantErr(t, err, codes.NotFound, apierr.ReasonInterruptNotFound)
	_, err = e.svc.ResolveInterrupt(ctx, tenant, "alice", reject(id, "no"))
	wantErr(t, err, codes.NotFound, apierr.ReasonInterruptNotFound)
	_, err = e.await(t, ref, id)
	wantErr(t, err, codes.NotFound, apierr.ReasonInterruptNotFound)
	list, err := e.svc.ListInterrupts(ctx, tenant, &agentplanev1.ListInterruptsRequest{TaskId: ref.GetTaskId(), States: bothStates})
	if err != nil || len(list.GetInterrupts()) != 0 {
		t.Errorf("the task's interrupts = %v, %v; want none", list.GetInterrupts(), err)
	}

	tests := []struct {
		name string
		req  *agentplanev1.CheckToolCallRequest
	}{
		{"other args", checkReq(ref, "c-read", "fs.read", args(t, map[string]any{"path": "/etc/passwd"}))},
		{"another tool", checkReq(ref, "c-read", "fs.list", a)},
		{"an input the gate now answers otherwise", func() *agentplanev1.CheckToolCallRequest {
			r := checkReq(ref, "c-read", "fs.read", a)
			r.Annotations = &agentplanev1.McpToolAnnotations{DestructiveHint: proto.Bool(true)}
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.CheckToolCall(ctx, tt.req)
			wantErr(t, err, codes.FailedPrecondition, apierr.ReasonArgsMismatch)
		})
	}
}

// TestGatedCallCannotBeReaskedIntoAnAllow: a call the gate interrupted stays
// interrupted when asked about again with inputs that would have allowed it.
func TestGatedCallCannotBeReaskedIntoAnAllow(t *testing.T) {
	e := newEnv(t, testConfig())
	ref := e.startAndLease(t, tenant)
	a := args(t, map[string]any{"path": "/tmp/a"})
	destructive := checkReq(ref, "c1", "fs.read", a)
	destructive.Annotations = &agentplanev1.McpToolAnnotations{DestructiveHint: proto.Bool(true)}
	gated, err := e.svc.CheckToolCall(ctx, destructive)
	if err != nil || gated.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("destructive call = %v, %v; want INTERRUPT", gated, err)
	}
	_, err = e.svc.CheckToolCall(ctx, checkReq(ref, "c1", "fs.read", a))
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonArgsMismatch)
	wantErr(t, e.report(ref, "c1", "fs.read", a), codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
}
