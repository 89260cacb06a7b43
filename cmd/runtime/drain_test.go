package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestSIGTERMDuringAnApprovalWait is a process manager stopping the runtime while a
// task waits interactively for an approval: SIGTERM, and the runtime exits 0 once
// drain_timeout passed, with the task suspended (INPUT_REQUIRED, attempt 1). After the
// approval a second runtime finishes it, and the tool runs once.
func TestSIGTERMDuringAnApprovalWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	in := servertest.Start(t, nil)
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Emailing.", Calls: []fakemodel.Call{{ID: "call_1", Name: "send_email", Arguments: `{"to":"a@example.com"}`}}},
		fakemodel.Turn{Text: "Sent."},
	)
	var runs atomic.Int32
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		fmt.Fprint(w, `{"sent": true}`)
	}))
	defer tool.Close()
	cfg := fmt.Sprintf(`control_plane: {address: %q}
concurrency: 1
log_level: info
drain_timeout: 500ms
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
tools:
  - {name: send_email, description: Send an email, url: %q}
`, in.GRPCAddr, model.URL, tool.URL)
	cfgFile := writeFile(t, "runtime.yaml", cfg)
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("email the customer"),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
			Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"send_email"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := resp.GetTask().GetTaskId()

	first, logs := startRuntime(t, bin, cfgFile, "first")
	waitTaskState(t, ctx, in, taskID, logs, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED)
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	if err := testutil.Within(t, exited, "the runtime after SIGTERM"); err != nil {
		t.Fatalf("the runtime after SIGTERM: %v\n%s", err, logs)
	}
	got, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetState() != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || got.GetTask().GetAttempt() != 1 {
		t.Fatalf("after the drain: task %v attempt %d, want INPUT_REQUIRED (suspended), attempt 1\n%s",
			got.GetTask().GetState(), got.GetTask().GetAttempt(), logs)
	}
	list, err := in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: taskID})
	if err != nil || len(list.GetInterrupts()) != 1 {
		t.Fatalf("interrupts %v %v", list, err)
	}
	it := list.GetInterrupts()[0]
	if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
		InterruptId: it.GetInterruptId(), ArgsDigest: it.GetArgsDigest(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
	}); err != nil {
		t.Fatal(err)
	}
	second, logs2 := startRuntime(t, bin, cfgFile, "second")
	defer func() { _ = second.Process.Signal(syscall.SIGTERM) }()
	task := waitTaskState(t, ctx, in, taskID, logs2, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Sent." {
		t.Fatalf("task %v %v %v; log:\n%s", task.GetState(), task.GetFailure(), task.GetOutput(), logs2)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	// The second runtime rebuilt the turn from the history: the model was not asked
	// for the call again, so nothing it said before the wait was said twice.
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the model got %d requests, want 2", n)
	}
}
