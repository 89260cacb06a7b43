package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/api/reasons"
	"github.com/agentplane/agentplane/api/specwire"
	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/apierr"
	"github.com/agentplane/agentplane/server/servertest"
)

// retryEnv is a server and helpers to drive one task through the runtime protocol.
type retryEnv struct {
	t   *testing.T
	ctx context.Context
	c   agentplanev1.RuntimeServiceClient
	ts  agentplanev1.TaskServiceClient
	hs  agentplanev1.HitlServiceClient
}

func newRetryEnv(t *testing.T) *retryEnv {
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &retryEnv{t: t, ctx: ctx, c: in.Client.Runtime, ts: in.Client.Tasks, hs: in.Client.Hitl}
}

func (e *retryEnv) start() *agentplanev1.Task {
	e.t.Helper()
	resp, err := e.ts.StartTask(e.ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Spec{Spec: specwire.MustStruct(tenancyAgent())}, Input: client.UserText("hi"), InterruptPolicy: gatedPolicy(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetTask()
}

func (e *retryEnv) lease() *agentplanev1.LeaseRef {
	e.t.Helper()
	resp, err := e.c.LeaseTasks(e.ctx, &agentplanev1.LeaseTasksRequest{RuntimeId: "rt", Wait: nil})
	if err != nil || len(resp.GetLeases()) != 1 {
		e.t.Fatalf("LeaseTasks = %v, %v; want one lease", resp, err)
	}
	l := resp.GetLeases()[0]
	return &agentplanev1.LeaseRef{TaskId: l.GetTask().GetTaskId(), LeaseId: l.GetLeaseId(), Epoch: l.GetEpoch()}
}

func (e *retryEnv) events(taskID string) []*agentplanev1.TaskEvent {
	e.t.Helper()
	resp, err := e.ts.ListTaskEvents(e.ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetEvents()
}

// twice makes call, then the same call again as a client does whose first response was
// lost, and checks that both succeed with equal answers.
func twice[T proto.Message](t *testing.T, what string, call func() (T, error)) T {
	t.Helper()
	first, err := call()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	again, err := call()
	if err != nil {
		t.Fatalf("%s, retried: %v; want the first call's success", what, err)
	}
	if !proto.Equal(first, again) {
		t.Fatalf("%s, retried, answered\n%v\nwant the first answer\n%v", what, again, first)
	}
	return first
}

func wantReused(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.AlreadyExists || reasons.Of(err) != apierr.ReasonRequestIDReused {
		t.Fatalf("%s with a reused request_id: %v; want ALREADY_EXISTS (%s)", what, err, apierr.ReasonRequestIDReused)
	}
}

// TestRetriedRuntimeWritesReturnTheFirstResult: every lease-fenced write carries a
// request_id; a retry after a lost response (simulated by calling twice) returns the
// first call's success, also when the first call released the lease or ended the task,
// and changes nothing more.
func TestRetriedRuntimeWritesReturnTheFirstResult(t *testing.T) {
	e := newRetryEnv(t)
	task := e.start()
	ref := e.lease()

	note := func(text string) []*agentplanev1.RuntimeEvent {
		return []*agentplanev1.RuntimeEvent{{Payload: &agentplanev1.RuntimeEvent_Note{Note: &agentplanev1.RuntimeNote{Text: text}}}}
	}
	report := func(id, text string) (*agentplanev1.ReportEventsResponse, error) {
		return e.c.ReportEvents(e.ctx, &agentplanev1.ReportEventsRequest{Lease: ref, RequestId: id, Events: note(text)})
	}
	before := len(e.events(task.GetTaskId()))
	twice(t, "ReportEvents", func() (*agentplanev1.ReportEventsResponse, error) { return report("r1", "once") })
	if n := len(e.events(task.GetTaskId())) - before; n != 1 {
		t.Fatalf("a retried report appended %d events, want 1", n)
	}
	_, err := report("r1", "something else")
	wantReused(t, "ReportEvents", err)

	// A gated call: the interrupt is resolved once, by a reviewer whose response was lost.
	check, err := e.c.CheckToolCall(e.ctx, &agentplanev1.CheckToolCallRequest{
		Lease: ref, CallId: "c1", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n":1}`,
	})
	if err != nil || check.GetOutcome() != agentplanev1.GateOutcome_GATE_OUTCOME_INTERRUPT {
		t.Fatalf("CheckToolCall = %v, %v; want INTERRUPT", check, err)
	}
	resolve := &agentplanev1.ResolveInterruptRequest{
		InterruptId: check.GetInterrupt().GetInterruptId(), RequestId: "approve-1",
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
	}
	resolved := twice(t, "ResolveInterrupt", func() (*agentplanev1.ResolveInterruptResponse, error) {
		return e.hs.ResolveInterrupt(e.ctx, resolve)
	})
	if resolved.GetInterrupt().GetState() != agentplanev1.InterruptState_INTERRUPT_STATE_RESOLVED {
		t.Fatalf("ResolveInterrupt: %v", resolved)
	}
	other := proto.CloneOf(resolve)
	other.Decision = &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: "no"}}
	_, err = e.hs.ResolveInterrupt(e.ctx, other)
	wantReused(t, "ResolveInterrupt", err)
	resolve.RequestId = "approve-2"
	_, err = e.hs.ResolveInterrupt(e.ctx, resolve)
	if reasons.Of(err) != apierr.ReasonAlreadyResolved {
		t.Fatalf("a second resolution under a new request_id: %v; want %s", err, apierr.ReasonAlreadyResolved)
	}

	// A pause ends the turn and releases the lease; its retry still answers.
	paused := twice(t, "PauseTask", func() (*agentplanev1.PauseTaskResponse, error) {
		return e.c.PauseTask(e.ctx, &agentplanev1.PauseTaskRequest{Lease: ref, RequestId: "p1", Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "more?"), Node: "teller"})
	})
	if paused.GetInterrupt().GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_AUTO_PAUSE {
		t.Fatalf("PauseTask: %v", paused)
	}

	// ContinueTask, retried after the task moved on to its next turn and paused again,
	// is not delivered as that turn's message.
	cont := &agentplanev1.ContinueTaskRequest{TaskId: task.GetTaskId(), Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("go on")}, RequestId: "u1"}
	if _, err := e.ts.ContinueTask(e.ctx, cont); err != nil {
		t.Fatal(err)
	}
	ref = e.lease()
	if _, err := e.c.PauseTask(e.ctx, &agentplanev1.PauseTaskRequest{Lease: ref, RequestId: "p2", Node: "teller"}); err != nil {
		t.Fatal(err)
	}
	before = len(e.events(task.GetTaskId()))
	got, err := e.ts.ContinueTask(e.ctx, cont)
	if err != nil {
		t.Fatalf("ContinueTask retried: %v; want the first call's success", err)
	}
	if got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || len(e.events(task.GetTaskId())) != before {
		t.Fatalf("a retried ContinueTask was delivered to the next turn: task %s", got.GetTask().GetState())
	}
	cont.Input = &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("something else")}
	_, err = e.ts.ContinueTask(e.ctx, cont)
	wantReused(t, "ContinueTask", err)

	// CompleteTask ends the task; its retry answers with the completed task.
	if _, err := e.ts.ContinueTask(e.ctx, &agentplanev1.ContinueTaskRequest{TaskId: task.GetTaskId(), Input: &agentplanev1.ContinueTaskRequest_Message{Message: client.UserText("bye")}, RequestId: "u2"}); err != nil {
		t.Fatal(err)
	}
	ref = e.lease()
	done := twice(t, "CompleteTask", func() (*agentplanev1.CompleteTaskResponse, error) {
		return e.c.CompleteTask(e.ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, RequestId: "done", Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")}})
	})
	if done.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("CompleteTask: %v", done.GetTask().GetState())
	}
	_, err = e.c.CompleteTask(e.ctx, &agentplanev1.CompleteTaskRequest{Lease: ref, Output: &agentplanev1.TaskOutput{Message: client.TextMessage(agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT, "ok")}})
	if reasons.Of(err) != apierr.ReasonTaskTerminal {
		t.Fatalf("CompleteTask again without a request_id: %v; want %s", err, apierr.ReasonTaskTerminal)
	}

	// FailTask with retry hands the task back; SuspendTask gives the lease up.
	task2 := e.start()
	ref = e.lease()
	twice(t, "FailTask", func() (*agentplanev1.FailTaskResponse, error) {
		return e.c.FailTask(e.ctx, &agentplanev1.FailTaskRequest{Lease: ref, RequestId: "f1", Reason: "model.down", Retry: true})
	})
	ref = e.lease()
	if ref.GetTaskId() != task2.GetTaskId() {
		t.Fatal("leased another task")
	}
	if _, err := e.c.CheckToolCall(e.ctx, &agentplanev1.CheckToolCallRequest{
		Lease: ref, CallId: "c2", ToolName: gatedTool, AgentName: "teller", ArgumentsJson: `{"n":2}`,
	}); err != nil {
		t.Fatal(err)
	}
	suspended := twice(t, "SuspendTask", func() (*agentplanev1.SuspendTaskResponse, error) {
		return e.c.SuspendTask(e.ctx, &agentplanev1.SuspendTaskRequest{Lease: ref, RequestId: "s1"})
	})
	if suspended.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED {
		t.Fatalf("SuspendTask: %v", suspended.GetTask().GetState())
	}

	// CancelTask: the retry answers with the canceled task instead of TASK_TERMINAL.
	canceled := twice(t, "CancelTask", func() (*agentplanev1.CancelTaskResponse, error) {
		return e.ts.CancelTask(e.ctx, &agentplanev1.CancelTaskRequest{TaskId: task2.GetTaskId(), Reason: "enough", RequestId: "k1"})
	})
	if canceled.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("CancelTask: %v", canceled.GetTask().GetState())
	}
	_, err = e.ts.CancelTask(e.ctx, &agentplanev1.CancelTaskRequest{TaskId: task2.GetTaskId(), Reason: "other", RequestId: "k1"})
	wantReused(t, "CancelTask", err)
}
