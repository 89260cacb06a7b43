package tasks

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/hitl"
	storagev1 "github.com/agentplane/agentplane/server/store/gen/agentplane/storage/v1"
)

// rejectCall records a rejection of a call decided at once (a disabled HITL mode), as
// RuntimeService.CheckToolCall does.
func (h *harness) rejectCall(t testing.TB, l *agentplanev1.Lease, callID, tool, args string) {
	t.Helper()
	digest := hitl.ArgsDigest(args)
	reason := "rejected without running"
	call := hitl.Call{CallID: callID, ToolName: tool, ArgumentsJSON: args, AgentName: "echo"}
	res := hitl.GateResult{Outcome: agentplanev1.GateOutcome_GATE_OUTCOME_REJECT, ArgsDigest: digest, Decision: &agentplanev1.Decision{
		Type: agentplanev1.DecisionType_DECISION_TYPE_REJECT, ArgsDigest: digest, RuledArgsDigest: digest, Reason: &reason, ModelReason: &reason,
		DecidedBy: hitl.SystemPrincipal, Source: agentplanev1.DecisionSource_DECISION_SOURCE_HITL_DISABLED,
	}}
	err := h.m.UpdateLeased(ctx, ref(l), func(op *Op) error {
		rec := op.Task()
		in := hitl.DecidedCall(hitl.InterruptMeta{
			InterruptID: hitl.InterruptID(rec.GetTaskId(), callID), TaskID: rec.GetTaskId(), Tenant: rec.GetTenant(), Now: op.Now(),
		}, call, res)
		return op.Writer().PutInterrupt(&storagev1.InterruptRecord{Interrupt: in, CreateTime: timestamppb.New(op.Now()), RaisedEpoch: op.Epoch()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The event sequence of docs/hitl.md: a result answers a reported call, once; a
// rejected call is reported with its ruled arguments and an error result; a turn does
// not end while a reported call has no result.
func TestToolEventSequence(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	report := func(evs ...*agentplanev1.RuntimeEvent) error {
		_, err := h.m.ReportEvents(ctx, ref(l), Request{}, evs)
		return err
	}
	wantErr(t, report(toolResult("nobody-checked", false)), codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)

	h.allowCall(t, l, "c1", "search", `{"q":1}`)
	wantErr(t, report(toolResult("c1", false)), codes.FailedPrecondition, apierr.ReasonToolResultUnexpected) // not reported yet
	if err := report(toolCall("c1", "search", `{"q":1}`)); err != nil {
		t.Fatal(err)
	}
	// The call has no result: the turn cannot end.
	_, _, err := h.m.Pause(ctx, ref(l), Request{}, nil, "main", nil)
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	_, err = h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("done")})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	if err := report(toolResult("c1", false)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, report(toolResult("c1", false)), codes.FailedPrecondition, apierr.ReasonToolResultUnexpected) // a second result

	// A rejected call is reported too, with the arguments ruled on, and its result is
	// an error; call and result may share a report.
	h.rejectCall(t, l, "c2", "a2a__bank__pay", `{"amount": 12345678901234567}`)
	wantErr(t, report(toolCall("c2", "a2a__bank__pay", `{"amount": 1}`)), codes.FailedPrecondition, apierr.ReasonToolCallNotApproved)
	wantErr(t, report(toolCall("c2", "a2a__bank__pay", `{"amount": 12345678901234567}`), toolResult("c2", false)),
		codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	if err := report(toolCall("c2", "a2a__bank__pay", `{"amount": 12345678901234567}`), toolResult("c2", true)); err != nil {
		t.Fatalf("a rejected call and its error result: %v", err)
	}
	if _, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: assistantText("done")}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, ev := range h.events(t, "acme", task.GetTaskId()) {
		if c := ev.GetToolCall(); c != nil {
			calls = append(calls, c.GetArgumentsJson())
		}
	}
	equal(t, "reported calls", calls, []string{`{"q":1}`, `{"amount": 12345678901234567}`})
}

func TestToolOutputsForClientCalls(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	h.allowCall(t, l, "f1", "get_weather", `{"city":"Oslo"}`)
	h.allowCall(t, l, "f2", "get_time", `{}`)
	h.allowCall(t, l, "s1", "search", `{}`)
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{
		toolCall("f1", "get_weather", `{"city":"Oslo"}`), toolCall("f2", "get_time", `{}`), toolCall("s1", "search", `{}`),
	}); err != nil {
		t.Fatal(err)
	}
	f1 := &agentplanev1.ToolCall{CallId: "f1", ToolName: "get_weather", ArgumentsJson: `{"city":"Oslo"}`}
	f2 := &agentplanev1.ToolCall{CallId: "f2", ToolName: "get_time", ArgumentsJson: `{}`}
	// s1 is the runtime's own call: it has no result, so the turn cannot end.
	_, _, err := h.m.Pause(ctx, ref(l), Request{}, nil, "main", []*agentplanev1.ToolCall{f1, f2})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	// A client call must be the call reported.
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{toolResult("s1", false)}); err != nil {
		t.Fatal(err)
	}
	forged := &agentplanev1.ToolCall{CallId: "f1", ToolName: "get_weather", ArgumentsJson: `{"city":"Bergen"}`}
	_, _, err = h.m.Pause(ctx, ref(l), Request{}, nil, "main", []*agentplanev1.ToolCall{forged, f2})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	_, _, err = h.m.Pause(ctx, ref(l), Request{}, nil, "main", []*agentplanev1.ToolCall{{CallId: "s1", ToolName: "search", ArgumentsJson: `{}`}})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected) // answered already

	once := request(t, &agentplanev1.PauseTaskRequest{Lease: ref(l), Message: assistantText("let me check"), Node: "main",
		ToolOutputCalls: []*agentplanev1.ToolCall{f1, f2}, RequestId: "p1"})
	pause, waits, err := h.m.Pause(ctx, ref(l), once, assistantText("let me check"), "main", []*agentplanev1.ToolCall{f1, f2})
	if err != nil || pause != nil || len(waits) != 2 {
		t.Fatalf("Pause = %v, %v, %v", pause, waits, err)
	}
	// Retried after a lost response: the same interrupts, nothing raised again.
	if p2, w2, err := h.m.Pause(ctx, ref(l), once, assistantText("let me check"), "main", []*agentplanev1.ToolCall{f1, f2}); err != nil ||
		p2 != nil || len(w2) != 2 || !proto.Equal(w2[0], waits[0]) || !proto.Equal(w2[1], waits[1]) {
		t.Fatalf("retried Pause = %v, %v, %v; want the first call's interrupts", p2, w2, err)
	}
	for i, in := range waits {
		if in.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED || in.GetCallId() != []string{"f1", "f2"}[i] ||
			in.GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_PENDING {
			t.Fatalf("interrupt %d = %v", i, in)
		}
	}
	if waits[0].GetToolOutput().GetArgumentsJson() != `{"city":"Oslo"}` || waits[0].GetToolOutput().GetToolName() != "get_weather" {
		t.Errorf("the interrupt does not carry the call: %v", waits[0].GetToolOutput())
	}
	paused := h.get(t, "acme", task.GetTaskId())
	if paused.GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || len(paused.GetPendingInterruptIds()) != 2 {
		t.Fatalf("paused = %v", paused)
	}

	out := func(id string) *agentplanev1.ToolOutput {
		return &agentplanev1.ToolOutput{CallId: id, Result: structpb.NewStringValue("out of " + id)}
	}
	cont := func(msg *agentplanev1.Message, outs ...*agentplanev1.ToolOutput) error {
		var o *agentplanev1.ToolOutputs
		if msg == nil {
			o = &agentplanev1.ToolOutputs{Outputs: outs}
		}
		_, err := h.m.Continue(ctx, "acme", task.GetTaskId(), "alice", msg, o, Request{})
		return err
	}
	wantErr(t, cont(userText("hi")), codes.FailedPrecondition, apierr.ReasonToolOutputsMismatch)
	wantErr(t, cont(nil, out("f1")), codes.FailedPrecondition, apierr.ReasonToolOutputsMismatch)                       // f2 missing
	wantErr(t, cont(nil, out("f1"), out("f2"), out("s1")), codes.FailedPrecondition, apierr.ReasonToolOutputsMismatch) // s1 not waited for
	wantErr(t, cont(nil, out("f1"), out("f1")), codes.InvalidArgument, apierr.ReasonInvalidArgument)
	if err := cont(nil, out("f2"), out("f1")); err != nil {
		t.Fatal(err)
	}
	next := h.lease(t, "rt")
	res := next.GetContinueToolResults()
	if len(res) != 2 || res[0].GetCallId() != "f1" || res[0].GetToolName() != "get_weather" || res[0].GetResult().GetStringValue() != "out of f1" || res[1].GetCallId() != "f2" {
		t.Fatalf("continue_tool_results = %v", res)
	}
	if len(next.GetTask().GetPendingInterruptIds()) != 0 {
		t.Fatalf("pending after continue = %v", next.GetTask().GetPendingInterruptIds())
	}
	// The outputs are the calls' results: the turn can end, and a second result is refused.
	_, err = h.m.ReportEvents(ctx, ref(next), Request{}, []*agentplanev1.RuntimeEvent{toolResult("f1", false)})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolResultUnexpected)
	if _, err := h.m.Complete(ctx, ref(next), Request{}, &agentplanev1.TaskOutput{Message: assistantText("sunny")}); err != nil {
		t.Fatal(err)
	}
	// A task waiting for a message is not continued with outputs.
	t2 := h.start(t, params("acme"))
	l2 := h.lease(t, "rt")
	if _, _, err := h.m.Pause(ctx, ref(l2), Request{}, nil, "main", nil); err != nil {
		t.Fatal(err)
	}
	_, err = h.m.Continue(ctx, "acme", t2.GetTaskId(), "alice", nil, &agentplanev1.ToolOutputs{Outputs: []*agentplanev1.ToolOutput{out("f1")}}, Request{})
	wantErr(t, err, codes.FailedPrecondition, apierr.ReasonToolOutputsMismatch)
}

func TestTokenUsageIsSummedOnTheTask(t *testing.T) {
	h := newHarness(t)
	task := h.start(t, params("acme"))
	l := h.lease(t, "rt")
	msg := func(in, out int32) *agentplanev1.RuntimeEvent {
		m := assistantText("thinking")
		m.Model = "gpt-test"
		m.Usage = &agentplanev1.TokenUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
		return &agentplanev1.RuntimeEvent{Payload: &agentplanev1.RuntimeEvent_Message{Message: m}}
	}
	if _, err := h.m.ReportEvents(ctx, ref(l), Request{}, []*agentplanev1.RuntimeEvent{msg(100, 20), note("n"), msg(150, 30)}); err != nil {
		t.Fatal(err)
	}
	final := assistantText("done")
	final.Usage = &agentplanev1.TokenUsage{InputTokens: 200, OutputTokens: 5, TotalTokens: 205}
	done, err := h.m.Complete(ctx, ref(l), Request{}, &agentplanev1.TaskOutput{Message: final})
	if err != nil {
		t.Fatal(err)
	}
	want := &agentplanev1.TokenUsage{InputTokens: 450, OutputTokens: 55, TotalTokens: 505}
	equal(t, "usage", done.GetUsage(), want)
	equal(t, "usage as read", h.get(t, "acme", task.GetTaskId()).GetUsage(), want)
	for _, ev := range h.events(t, "acme", task.GetTaskId()) {
		if m := ev.GetMessage(); m != nil && (m.GetModel() != "gpt-test" || m.GetMessageId() == "") {
			t.Errorf("logged message %v lost its model or has no id", m)
		}
	}
}
