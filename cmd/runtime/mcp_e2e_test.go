package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/client"
	"github.com/agentplane/agentplane/cmd/runtime/internal/fakemodel"
	"github.com/agentplane/agentplane/cmd/runtime/internal/mcptest"
	agentplanev1 "github.com/agentplane/agentplane/gen/agentplane/v1"
	"github.com/agentplane/agentplane/server/config"
	"github.com/agentplane/agentplane/server/servertest"
)

const supportDoc = "apiVersion: qar/v1\nkind: AgentSpec\nname: support\ninstructions: Help.\nmodel: fake-1\n"

// writeRuntimeConfig writes the runtime binary's config: the control plane, the fake
// model, the MCP limits.
func writeRuntimeConfig(t *testing.T, dir, grpcAddr, modelURL string) string {
	t.Helper()
	f := filepath.Join(dir, "runtime.yaml")
	cfg := fmt.Sprintf(`control_plane: {address: %q}
concurrency: 1
log_level: warn
models:
  - {match: "fake-*", base_url: %q, max_retries: 0}
mcp:
  call_timeout: 60s
  max_result_bytes: 4096
`, grpcAddr, modelURL)
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// startMCPTask starts the support agent with the crm MCP server (its credentials in a
// header) and policy.
func startMCPTask(t *testing.T, ctx context.Context, in *servertest.Instance, srv *mcptest.Server, policy *agentplanev1.InterruptPolicy) string {
	t.Helper()
	resp, err := in.Client.Tasks.StartTask(ctx, &agentplanev1.StartTaskRequest{
		Source: &agentplanev1.StartTaskRequest_Document{Document: []byte(supportDoc)},
		Format: agentplanev1.DocumentFormat_DOCUMENT_FORMAT_YAML, Input: client.UserText("refund order 42"),
		McpServers:      &agentplanev1.McpServerList{Servers: []*agentplanev1.McpServer{{Name: "crm", Url: srv.URL, Headers: map[string]string{"Authorization": "Bearer crm"}}}},
		InterruptPolicy: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTask().GetTaskId()
}

// TestMCPToolApprovedWithCtl, end to end with the real binaries: the support agent
// calls an MCP tool (crm.refund, on a Go SDK server) that a CEL policy gates; the task
// waits in INPUT_REQUIRED with the tool not run; a reviewer approves with ctl; the tool
// runs once with the model's arguments and the task completes.
func TestMCPToolApprovedWithCtl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	ctl := buildBinary(t, dir, "../ctl", "ctl")
	in := servertest.Start(t, nil)
	srv := mcptest.Start(t, func(s *mcptest.Server) { s.Header, s.HeaderValue = "Authorization", "Bearer crm" })
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "crm__refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "Refunded order 42."},
	)
	cfgFile := writeRuntimeConfig(t, dir, in.GRPCAddr, model.URL)
	taskID := startMCPTask(t, ctx, in, srv, &agentplanev1.InterruptPolicy{Policy: &agentplanev1.InterruptPolicy_Predicate{
		Predicate: &agentplanev1.PredicatePolicy{Expression: `tool_name.startsWith("crm.") && args.order_id == 42 ? ["refunds"] : []`}}})
	rt, logs := startRuntime(t, bin, cfgFile, "rt-1")
	defer func() { _ = rt.Process.Signal(syscall.SIGTERM) }()

	waitTaskState(t, ctx, in, taskID, logs, agentplanev1.TaskState_TASK_STATE_INPUT_REQUIRED)
	its, err := in.Client.Hitl.ListInterrupts(ctx, &agentplanev1.ListInterruptsRequest{TaskId: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if len(its.GetInterrupts()) != 1 {
		t.Fatalf("%d pending interrupts, want 1", len(its.GetInterrupts()))
	}
	it := its.GetInterrupts()[0]
	if a := it.GetApproval(); a.GetToolName() != "crm.refund" || a.GetArgumentsJson() != `{"order_id":42}` || strings.Join(a.GetContext().GetTags(), ",") != "refunds" {
		t.Errorf("approval request: tool %q args %q tags %q", a.GetToolName(), a.GetArgumentsJson(), a.GetContext().GetTags())
	}
	if n := srv.Calls("refund"); n != 0 {
		t.Fatalf("refund ran %d times before the approval", n)
	}
	cmd := exec.CommandContext(ctx, ctl, "hitl", "approve", it.GetInterruptId())
	cmd.Env = append(os.Environ(), "AGENTPLANE_ADDR="+in.GRPCAddr, "AGENTPLANE_TOKEN=", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctl hitl approve: %v\n%s", err, out)
	}

	task := waitTaskState(t, ctx, in, taskID, logs, agentplanev1.TaskState_TASK_STATE_COMPLETED, agentplanev1.TaskState_TASK_STATE_FAILED)
	if task.GetState() != agentplanev1.TaskState_TASK_STATE_COMPLETED || client.MessageText(task.GetOutput().GetMessage()) != "Refunded order 42." {
		t.Fatalf("task %v %v %v; runtime log:\n%s", task.GetState(), task.GetFailure(), task.GetOutput(), logs)
	}
	if args := srv.Args("refund"); len(args) != 1 || args[0] != `{"order_id":42}` {
		t.Errorf("refund ran with %q, want once with the model's arguments", args)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Messages[len(reqs[1].Messages)-1]), "refunded order 42") {
		t.Errorf("the model did not read the tool's result")
	}
}

// TestKilledMidMCPToolCall SIGKILLs the runtime binary while its MCP tool call runs on
// the server; a second runtime takes the task once the lease expires, learns from the
// gate that the call was reported, reports its result as lost instead of calling the
// tool again, and finishes the task. The server counted exactly one call.
func TestKilledMidMCPToolCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	bin := buildBinary(t, dir, ".", "runtime")
	in := servertest.Start(t, func(c *config.Config) { c.Tasks.LeaseTTL = config.Duration(2 * time.Second) })
	hold := make(chan struct{})
	defer close(hold)
	srv := mcptest.Start(t, func(s *mcptest.Server) {
		s.Header, s.HeaderValue = "Authorization", "Bearer crm"
		s.Hold, s.Started = hold, make(chan struct{}, 4)
	})
	model := fakemodel.Start(t,
		fakemodel.Turn{Text: "Refunding.", Calls: []fakemodel.Call{{ID: "call_1", Name: "crm__refund", Arguments: `{"order_id":42}`}}},
		fakemodel.Turn{Text: "I could not confirm the refund."},
	)
	cfgFile := writeRuntimeConfig(t, dir, in.GRPCAddr, model.URL)
	taskID := startMCPTask(t, ctx, in, srv, nil)

	killMidCallAndResume(t, ctx, in, bin, cfgFile, taskID, srv.Started, "I could not confirm the refund.")
	if n := srv.Calls("refund"); n != 1 {
		t.Errorf("the MCP server ran refund %d times, want exactly 1", n)
	}
	var calls, results int
	evs, err := in.Client.Tasks.ListTaskEvents(ctx, &agentplanev1.ListTaskEventsRequest{TaskId: taskID, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.GetEvents() {
		if c := ev.GetToolCall(); c != nil {
			calls++
			if c.GetToolName() != "crm.refund" {
				t.Errorf("tool_call for %q, want crm.refund", c.GetToolName())
			}
		}
		if r := ev.GetToolResult(); r != nil {
			results++
			if !r.GetIsError() || !strings.Contains(r.GetResult().GetStringValue(), "lost") {
				t.Errorf("the lost call's result: %v", r)
			}
		}
	}
	if calls != 1 || results != 1 {
		t.Errorf("%d tool calls and %d results logged, want 1 and 1", calls, results)
	}
}
