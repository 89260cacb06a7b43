package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
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
