package main_test

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/internal/testutil"
	"github.com/agentplane/agentplane/server/servertest"
)

// TestRuntimeRunDrainsOnSIGTERM is a process manager stopping `ctl runtime run` while
// its task waits for an approval: SIGTERM, and the process exits 0 once its drain
// timeout passed, with the task suspended (not failed, no attempt counted). After the
// approval a second runtime finishes it; the tool ran once and the greeting before it
// was said once.
func TestRuntimeRunDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and signals ctl")
	}
	bin := filepath.Join(t.TempDir(), "ctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	in := servertest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: m\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("weather?"),
		InterruptPolicy: &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Allowlist{
			Allowlist: &agentplanev1.ToolListPolicy{Tools: []string{"get_weather"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetTask().GetTaskId()
	script := filepath.Join("..", "..", "examples", "runtime", "hello.yaml")

	first := exec.Command(bin, "--addr", in.GRPCAddr, "runtime", "run", "--script", script, "--drain-timeout", "500ms", "--runtime-id", "first")
	logs := &testutil.SyncBuffer{}
	first.Stdout, first.Stderr = logs, logs
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill() })
	interrupt := waitInterrupt(t, ctx, in, id)
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	if err := testutil.Within(t, exited, "ctl runtime run after SIGTERM"); err != nil {
		t.Fatalf("ctl runtime run after SIGTERM: %v\n%s", err, logs)
	}
	task, err := in.Client.Tasks.GetTask(ctx, &agentplanev1.GetTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	if st := task.GetTask().GetState(); st != agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED || task.GetTask().GetAttempt() != 1 {
		t.Fatalf("after the drain: task %v attempt %d, want INPUT_REQUIRED (suspended) attempt 1\n%s", st, task.GetTask().GetAttempt(), logs)
	}

	if _, err := in.Client.Hitl.ResolveInterrupt(ctx, &agentplanev1.ResolveInterruptRequest{
		InterruptId: interrupt.GetInterruptId(), ArgsDigest: interrupt.GetArgsDigest(),
		Decision: &agentplanev1.ResolveInterruptRequest_Approve{Approve: &agentplanev1.ApproveDecision{}},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "--addr", in.GRPCAddr, "runtime", "run", "--script", script, "--once", "--runtime-id", "second").CombinedOutput()
	if err != nil || !strings.Contains(string(out), id+": completed") {
		t.Fatalf("second runtime: %v\n%s", err, out)
	}
	calls, results, greetings := 0, 0, 0
	evs, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: id, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.GetEvents() {
		switch {
		case ev.GetToolCall() != nil:
			calls++
		case ev.GetToolResult() != nil:
			results++
		case strings.HasPrefix(client.MessageText(ev.GetMessage()), "Hello!"):
			greetings++
		}
	}
	if calls != 1 || results != 1 || greetings != 1 {
		t.Fatalf("tool calls %d, results %d, greetings %d; want 1 each", calls, results, greetings)
	}
}

// waitInterrupt watches task id until it raises an interrupt, and returns it.
func waitInterrupt(t *testing.T, ctx context.Context, in *servertest.Instance, id string) *agentplanev1.Interrupt {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testutil.WaitLimit)
	defer cancel()
	stream, err := in.Client.Tasks.WatchTask(ctx, &agentplanev1.WatchTaskRequest{TaskId: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF || err != nil {
			t.Fatalf("watching for the interrupt: %v", err)
		}
		if it := resp.GetEvent().GetInterruptRaised().GetInterrupt(); it != nil {
			return it
		}
	}
}
