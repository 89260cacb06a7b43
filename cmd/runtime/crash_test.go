package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
	"github.com/agentplane/agentplane/server/store/pgstore/pgtest"
)

// TestKilledMidToolCall SIGKILLs the runtime binary while its tool call runs; a second
// runtime takes the task once the lease expires, learns from the gate that the call
// was reported, reports its result as lost instead of running the tool again, and
// finishes the task. The tool ran exactly once.
func TestKilledMidToolCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "I could not confirm the refund."},
	)
	var mu sync.Mutex
	toolRuns := 0
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		toolRuns++
		mu.Unlock()
		started <- struct{}{}
		select { // hangs until the runtime dies
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer tool.Close()
	defer close(release)
	cfgFile := filepath.Join(dir, "runtime.yaml")
	cfg := fmt.Sprintf(`control_plane: {address: %q}
concurrency: 1
log_level: warn
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
tools:
  - name: issue_refund
    description: Refund an order
    url: %q
    timeout: 60s
`, in.GRPCAddr, model.URL, tool.URL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := resp.GetTask().GetTaskId()

	killMidCallAndResume(t, ctx, in, bin, cfgFile, taskID, started, "I could not confirm the refund.")
	mu.Lock()
	runs := toolRuns
	mu.Unlock()
	if runs != 1 {
		t.Errorf("the tool ran %d times, want exactly 1", runs)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	if last := reqs[1].Messages; len(last) != 4 || !strings.Contains(string(last[3]), `"tool_call_id":"call_1"`) || !strings.Contains(string(last[3]), "lost") {
		t.Errorf("the second runtime's conversation: %s", last)
	}
	var results int
	evs, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.GetEvents() {
		if r := ev.GetToolResult(); r != nil {
			results++
			if !r.GetIsError() {
				t.Errorf("the lost call's result is not an error: %v", r)
			}
		}
	}
	if results != 1 {
		t.Errorf("%d tool results logged, want 1", results)
	}
}

// TestKilledWhileResultReported SIGKILLs the runtime binary while its tool result's
// report is still on its way and the next model call already runs (the report travels
// while the model is asked): the control plane is cut off from the runtime as the tool
// answers, so the report cannot land, and the runtime dies in the model call. The
// answer to a result the log never held must not be reported; a second runtime finds
// the call reported without a result, reports the result as lost instead of running
// the tool again, and finishes the task.
func TestKilledWhileResultReported(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	proxy := pgtest.NewProxy(t, in.GRPCAddr) // a TCP proxy the test can cut
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "issue_refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Refunded", Hang: true}, // the first runtime dies in this call
		fakemodel.Turn{Text: "I could not confirm the refund."},
	)
	var toolRuns atomic.Int32
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toolRuns.Add(1)
		proxy.Cut() // the result's report cannot reach the control plane
		_, _ = io.WriteString(w, `{"refunded":true}`)
	}))
	defer tool.Close()
	cfg := `control_plane: {address: %q}
concurrency: 1
log_level: warn
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
tools:
  - name: issue_refund
    description: Refund an order
    url: %q
`
	first := writeFile(t, "first.yaml", fmt.Sprintf(cfg, proxy.Addr(), model.URL, tool.URL))
	second := writeFile(t, "second.yaml", fmt.Sprintf(cfg, in.GRPCAddr, model.URL, tool.URL))
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n")},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"),
	})
	if err != nil {
		t.Fatal(err)
	}
	taskID := resp.GetTask().GetTaskId()

	run, logs := startRuntime(t, bin, first, "first")
	for len(model.Requests()) < 2 { // the model is asked with the result not yet logged
		select {
		case <-ctx.Done():
			t.Fatalf("the model was not asked again while the result's report was held; runtime log:\n%s", logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = run.Wait()
	if req := model.Requests()[1].Messages; len(req) != 4 || !strings.Contains(string(req[3]), "refunded") {
		t.Errorf("the first runtime's second model call was not given the result: %s", req)
	}

	run2, logs2 := startRuntime(t, bin, second, "second")
	defer func() { _ = run2.Process.Signal(syscall.SIGTERM) }()
	task := waitTaskState(t, ctx, in, taskID, logs2, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "I could not confirm the refund." {
		t.Fatalf("task %v %v %v; log:\n%s", task.GetState(), task.GetFailure(), task.GetOutput(), logs2)
	}
	if n := toolRuns.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want exactly 1", n)
	}
	if reqs := model.Requests(); len(reqs) != 3 || len(reqs[2].Messages) != 4 || !strings.Contains(string(reqs[2].Messages[3]), "lost") {
		t.Errorf("the second runtime's conversation: %d requests, %s", len(reqs), reqs[len(reqs)-1].Messages)
	}
	// The log: the first answer, its call, the lost result, the final answer; never
	// an answer after a call whose result is not before it.
	evs, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ev := range evs.GetEvents() {
		switch {
		case ev.GetToolCall() != nil:
			seq = append(seq, "call")
		case ev.GetToolResult() != nil:
			if !ev.GetToolResult().GetIsError() || !strings.Contains(ev.GetToolResult().GetResult().GetStringValue(), "lost") {
				t.Errorf("the call's result: %v", ev.GetToolResult())
			}
			seq = append(seq, "result")
		case ev.GetMessage().GetRole() == agentplanev1.MessageRole_MESSAGE_ROLE_ASSISTANT:
			seq = append(seq, client.MessageText(ev.GetMessage()))
		}
	}
	if got, want := strings.Join(seq, " | "), "Refunding. | call | result | I could not confirm the refund."; got != want {
		t.Errorf("log: %s, want %s", got, want)
	}
}
