// Package agenttest holds what the runtime's in-process tests share: a worker running a
// handler against a servertest control plane, a watch of a task to its end, reviewer
// decisions and the task's log.
package agenttest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client/worker"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// Quiet is a logger that drops everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// RunWorker runs h in a worker leasing at most maxTasks tasks (0: no bound); the
// channel gets Run's result.
func RunWorker(t testing.TB, ctx context.Context, in *servertest.Instance, h worker.Handler, maxTasks int) <-chan error {
	t.Helper()
	w, err := worker.New(in.Client.Runtime, h, worker.Options{RuntimeID: "agent-test", MaxTasks: maxTasks, PollWait: time.Second, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return done
}

// Watch calls fn with every response of WatchTask on taskID until the stream ends.
func Watch(t testing.TB, ctx context.Context, in *servertest.Instance, taskID string, fn func(*agentplanev1.WatchTaskResponse)) {
	t.Helper()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(resp)
	}
}

// Approval returns the tool approval a watch response raises, or nil.
func Approval(resp *agentplanev1.WatchTaskResponse) *agentplanev1.Interrupt {
	it := resp.GetEvent().GetInterruptRaised().GetInterrupt()
	if it.GetKind() != agentplanev1.InterruptKind_INTERRUPT_KIND_TOOL_APPROVAL {
		return nil
	}
	return it
}

// Approve approves it as raised (its digest bound).
func Approve(t testing.TB, ctx context.Context, in *servertest.Instance, it *agentplanev1.Interrupt) {
	t.Helper()
	Resolve(t, ctx, in, &agentplanev1.ResolveInterruptRequest{InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}}})
}

// Reject rejects it with reason.
func Reject(t testing.TB, ctx context.Context, in *servertest.Instance, it *agentplanev1.Interrupt, reason string) {
	t.Helper()
	Resolve(t, ctx, in, &agentplanev1.ResolveInterruptRequest{InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
		Decision: &agentplanev1.ResolveInterruptRequest_Reject{Reject: &agentplanev1.RejectDecision{Reason: reason}}})
}

// Resolve sends req.
func Resolve(t testing.TB, ctx context.Context, in *servertest.Instance, req *agentplanev1.ResolveInterruptRequest) {
	t.Helper()
	if _, err := in.Client.Hitl.ResolveInterrupt(ctx, req); err != nil {
		t.Fatal(err)
	}
}

// Events reads the task's whole log (up to 500 events).
func Events(t testing.TB, ctx context.Context, in *servertest.Instance, taskID string) []*agentplanev1.TaskEvent {
	t.Helper()
	resp, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetEvents()
}

// ModelCallIDs maps the runtime's call ids in a task's log (the gate's, and the
// tool_call and tool_result events') to the model's own ids, as the runtime records
// both on each assistant message ({"tool_calls": [{id, call_id, ...}]}).
func ModelCallIDs(events []*agentplanev1.TaskEvent) map[string]string {
	ids := map[string]string{}
	for _, ev := range events {
		for _, p := range ev.GetMessage().GetParts() {
			for _, v := range p.GetData().GetData().GetFields()["tool_calls"].GetListValue().GetValues() {
				f := v.GetStructValue().GetFields()
				ids[f["call_id"].GetStringValue()] = f["id"].GetStringValue()
			}
		}
	}
	return ids
}

// Task reads the task.
func Task(t testing.TB, ctx context.Context, in *servertest.Instance, taskID string) *agentplanev1.Task {
	t.Helper()
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	return got.GetTask()
}

// StartTask starts req and returns the task's id.
func StartTask(t testing.TB, ctx context.Context, in *servertest.Instance, req *agentplanev1.StartTaskRequest) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// AgentDoc is a minimal support agent on the fake model ("fake-1").
const AgentDoc = "apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n"

// Notes records the notes a tool provider writes (agent.Note, without a task).
type Notes struct{ Texts []string }

// Note appends text.
func (n *Notes) Note(_ context.Context, text string, _ map[string]string) error {
	n.Texts = append(n.Texts, text)
	return nil
}
