package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/servertest"
)

// hostileTasks is how many tasks the memory benchmark runs, hostileConcurrency how
// many the runtime runs at once.
const (
	hostileTasks       = 8
	hostileConcurrency = 4
)

// BenchmarkHostileMCPMemory runs the real runtime binary (concurrency 4) on tasks
// whose MCP servers are mcptest.Hostile: one lists odd names and a 1 MiB description,
// one 10,000 tools over pages, one 10,000 tools on one page, one never answers. Each
// task's model (a fake) calls flood (a 400 MiB answer), flood_sse (an event that
// never ends), flood_events (endless notifications), silent (no answer) and ok, then
// answers. It reports the runtime process's peak RSS (wait4's ru_maxrss) and fails
// past 256 MiB, or when a task does not complete.
//
//	go test -run '^$' -bench HostileMCPMemory -benchtime 1x ./cmd/runtime/
func BenchmarkHostileMCPMemory(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	bin := buildBinary(b, dir, ".", "runtime")
	in := servertest.Start(b, nil)
	h := mcptest.StartHostile(b)
	calls := []fakemodel.Call{
		{ID: "c1", Name: "evil__flood", Arguments: `{}`},
		{ID: "c2", Name: "evil__flood_sse", Arguments: `{}`},
		{ID: "c3", Name: "evil__flood_events", Arguments: `{}`},
		{ID: "c4", Name: "evil__silent", Arguments: `{}`},
		{ID: "c5", Name: "evil__ok", Arguments: `{}`},
	}
	var routes strings.Builder
	for i := range b.N * hostileTasks {
		model := fakemodel.Start(b, fakemodel.Turn{Text: "Calling.", Calls: calls}, fakemodel.Turn{Text: "done"})
		fmt.Fprintf(&routes, "  - {match: \"fake-%d\", base_url: %q, max_retries: 0}\n", i, model.URL)
	}
	cfg := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `control_plane: {address: %q}
concurrency: %d
log_level: warn
models:
%smcp:
  connect_timeout: 3s
  call_timeout: 3s
`, in.GRPCAddr, hostileConcurrency, routes.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	servers := &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{
		{Name: "evil", Url: h.URL + "/tools"}, {Name: "many", Url: h.URL + "/many"},
		{Name: "onepage", Url: h.URL + "/onepage"}, {Name: "silent", Url: h.URL + "/silent"},
	}}
	var ids []string
	for i := range b.N * hostileTasks {
		doc := fmt.Sprintf("apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-%d\n", i)
		resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
			Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(doc)},
			Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("go"), McpServers: servers,
		})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, resp.GetTask().GetTaskId())
	}
	b.ResetTimer()
	rt, logs := startRuntime(b, bin, cfg, "hostile")
	for _, id := range ids {
		task := waitTaskState(b, ctx, in, id, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
		if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED {
			b.Fatalf("task %s %v %v; runtime log:\n%s", id, task.GetState(), task.GetFailure(), logs)
		}
	}
	b.StopTimer()
	if err := rt.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	_ = rt.Wait()
	ru, ok := rt.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Skip("no rusage on this platform")
	}
	peak := float64(ru.Maxrss) / 1024 // KiB on Linux
	b.ReportMetric(peak, "peak-rss-MiB")
	if peak > 256 {
		b.Errorf("the runtime's peak RSS was %.0f MiB, want under 256", peak)
	}
}
